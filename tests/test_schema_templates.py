"""Relation schemas (TOML) and query templates."""

from __future__ import annotations

import pytest

from curation.templates import render_query
from kb_sources.errors import SchemaError, TemplateError, UnknownNameError
from kb_sources.schema import Schema, builtin_schemas, get_schema, load_schema, parse_schema
from kb_sources.types import Entity


@pytest.fixture(scope="module")
def schemas():
    return builtin_schemas()


def test_builtin_po_and_ptm(schemas):
    po, ptm = schemas["PO"], schemas["PTM"]
    assert po.slot_names == ("gene", "variant", "treatment")
    assert po.query_slots == ("gene", "variant") and po.answer == "treatment"
    assert po.templates[0] == "Treatment for gene {gene} and variant {variant}?"
    assert ptm.query_slots == ("substrate", "ptm", "residue") and ptm.answer == "catalyst"
    assert ptm.templates[0] == "Catalysts for the {ptm} of {substrate} at {residue}?"


def test_render_po_and_ptm(schemas):
    q = render_query(schemas["PO"], {"gene": "BRAF", "variant": "V600E"})
    assert q.text == "Treatment for gene BRAF and variant V600E?"
    q = render_query(schemas["PTM"], {"substrate": Entity("AKT1", "gene"), "ptm": "phosphorylation",
                                      "residue": "S473"})
    assert q.text == "Catalysts for the phosphorylation of AKT1 at S473?"


def test_subset_of_slots_picks_fitting_template(schemas):
    assert render_query(schemas["PO"], {"gene": "EGFR"}).text == "Treatment for gene EGFR?"
    q = render_query(schemas["PTM"], {"substrate": "BRCA2", "residue": "S3291"})
    assert q.text == "Catalysts for BRCA2 at S3291?"


def test_missing_slot_is_clear_error(schemas):
    with pytest.raises(TemplateError, match=r"needs slot\(s\) variant, which are empty"):
        render_query(schemas["PO"], {"gene": "BRAF", "variant": "  "}, template=0)


def test_answer_slot_stays_hidden(schemas):
    with pytest.raises(TemplateError, match="'treatment' is the answer of schema PO"):
        render_query(schemas["PO"], {"gene": "BRAF", "treatment": "vemurafenib"})


def test_unknown_slot_and_empty_query(schemas):
    with pytest.raises(TemplateError, match="has no slot"):
        render_query(schemas["PO"], {"disease": "melanoma"})
    with pytest.raises(TemplateError, match="No query slot is filled"):
        render_query(schemas["PO"], {})


def test_combination_entities_joined(schemas):
    q = render_query(schemas["PO"], {"gene": [Entity("EML4", "gene"), Entity("ALK", "gene")],
                                     "variant": "fusion"})
    assert q.text == "Treatment for gene EML4 and ALK and variant fusion?"


def test_curator_edit(schemas):
    q = render_query(schemas["PO"], {"gene": "BRAF", "variant": "V600E"})
    edited = q.edited_to("BRAF V600E dabrafenib resistance")
    assert edited.edited and edited.text == "BRAF V600E dabrafenib resistance"
    assert not q.edited_to(q.text).edited
    with pytest.raises(TemplateError, match="empty"):
        q.edited_to("   ")


def test_schema_validation_errors():
    base = {"name": "X", "answer": "b", "templates": ["{a}?"],
            "slots": [{"name": "a", "type": "gene", "query": True}, {"name": "b", "type": "drug"}]}
    assert parse_schema(base, "x.toml").query_slots == ("a",)
    with pytest.raises(SchemaError, match="x.toml: missing key 'answer'"):
        parse_schema({k: v for k, v in base.items() if k != "answer"}, "x.toml")
    with pytest.raises(SchemaError, match="uses \\['b'\\], which are not query slots"):
        parse_schema({**base, "templates": ["{a} {b}?"]}, "x.toml")
    with pytest.raises(SchemaError, match="not one of the slots"):
        parse_schema({**base, "answer": "zzz"}, "x.toml")
    with pytest.raises(SchemaError, match="malformed"):
        parse_schema({**base, "templates": ["{a?"]}, "x.toml")


def test_get_schema_lists_options(schemas):
    assert get_schema("po", schemas).name == "PO"
    with pytest.raises(UnknownNameError, match="Available options: .*PO, PTM"):
        get_schema("GO", schemas)


# -- issue 42 item 9: a placeholder is a slot name only ------------------------------------------
_SCHEMA_TOML = """name = "dg"
answer = "gene"
templates = [{template!r}]

[[slots]]
name = "disease"
type = "disease"
query = true

[[slots]]
name = "gene"
type = "gene"
"""


@pytest.mark.parametrize("placeholder", ["{disease:>200000000}", "{disease!r}",
                                         "{disease.__class__}", "{disease[0]}", "{}", "{0}",
                                         "{disease:{disease}}"])
def test_a_placeholder_with_a_spec_conversion_or_access_is_refused_at_load(tmp_path, placeholder):
    path = tmp_path / "dg.toml"
    template = f"Genes of {placeholder}?"
    path.write_text(_SCHEMA_TOML.format(template=template), encoding="utf-8")
    with pytest.raises(SchemaError) as caught:
        load_schema(path)
    assert str(caught.value) == (
        f"{path}: template {template!r} has the placeholder {placeholder!r}; a placeholder is a "
        "slot name only, without a format spec (':'), conversion ('!') or attribute/index "
        "access ('.', '[]'). Use {slot}, e.g. {gene}, and double braces {{ }} for literal braces")


def test_schema_add_refuses_a_format_spec_and_query_stays_small(tmp_workspace, tmp_path, capsys):
    from curation.cli.main import main

    path = tmp_path / "dg.toml"
    path.write_text(_SCHEMA_TOML.format(template="Genes of {disease:>200000000}?"),
                    encoding="utf-8")
    ws = str(tmp_workspace.root)
    assert main(["schema", "add", str(path), "-w", ws]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert (f"{path}: template 'Genes of {{disease:>200000000}}?' has the placeholder "
            "'{disease:>200000000}'" in err and "Use {slot}" in err)
    assert not (tmp_workspace.root / "schemas" / "dg.toml").exists()
    # a file that reached schemas/ before the check: the query names it, builds no huge string
    (tmp_workspace.root / "schemas").mkdir(exist_ok=True)
    stored = tmp_workspace.root / "schemas" / "dg.toml"
    stored.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["query", "-w", ws, "--schema", "dg", "disease=melanoma"]) == 2
    err = capsys.readouterr().err
    assert f"{stored}: template 'Genes of {{disease:>200000000}}?'" in err
    assert len(err) < 1000


def test_render_substitutes_names_only_whatever_the_template(schemas):
    """Defence in depth: a schema built in code (or a --template typed at the CLI) with a spec
    is refused by the renderer too, before any string is built."""
    po = schemas["PO"]
    bad = Schema(po.name, po.description, po.slots, po.answer, ("{gene:>200000000}",))
    with pytest.raises(TemplateError, match=r"has the placeholder '\{gene:>200000000\}'"):
        render_query(bad, {"gene": "BRAF"})
    with pytest.raises(TemplateError, match=r"has the placeholder '\{gene!r\}'"):
        render_query(po, {"gene": "BRAF"}, template="{gene!r} {gene.upper}")
    q = render_query(po, {"gene": "{variant}", "variant": "V600E"},
                     template="{{gene}} {gene} and {variant}")
    assert q.text == "{gene} {variant} and V600E"  # slot text is never re-parsed
