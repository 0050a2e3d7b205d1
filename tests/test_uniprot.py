"""UniProt Swiss-Prot reader: MOD_RES 'by X' features -> PTM relations."""

from __future__ import annotations

import gzip
from pathlib import Path
from types import SimpleNamespace

import pytest
from Bio.SeqFeature import SimpleLocation

from kb_sources.errors import InputFormatError
from kb_sources.read_stats import IssueKind
from kb_sources.registry import get_reader
from kb_sources.schema import builtin_schemas
from kb_sources.types import Entity
from kb_sources.uniprot import (
    ModRes,
    catalyst_entity,
    normalise_ptm,
    parse_mod_res,
    parse_note,
    read_uniprot,
    residue_entity,
    residue_from_name,
)


@pytest.fixture(scope="module")
def fixture_relations(fixtures_dir: Path) -> dict[str, object]:
    return {r.record_id: r for r in read_uniprot(fixtures_dir / "uniprot_sample.dat")}


# ------------------------------------------------------------------------------ pure functions


@pytest.mark.parametrize(
    ("modification", "ptm"),
    [
        ("Phosphoserine", "phosphorylation"),
        ("Phosphothreonine", "phosphorylation"),
        ("Phosphotyrosine", "phosphorylation"),
        ("N6-acetyllysine", "acetylation"),
        ("N-acetylserine", "acetylation"),
        ("N6,N6-dimethyllysine", "methylation"),
        ("Omega-N-methylarginine", "methylation"),
        ("Asymmetric dimethylarginine", "methylation"),
        ("N6-succinyllysine", "succinylation"),
        ("N6-(2-hydroxyisobutyryl)lysine", "2-hydroxyisobutyrylation"),
        ("4-hydroxyproline", "hydroxylation"),
        ("N6-(pyridoxal phosphate)lysine", "pyridoxal phosphate attachment"),
        ("ADP-ribosylserine", "ADP-ribosylation"),
        ("Citrulline", "citrullination"),
        ("Sulfotyrosine", "sulfation"),
        ("S-nitrosocysteine", "S-nitrosylation"),
        ("Something new", "something new"),
    ],
)
def test_normalise_ptm(modification: str, ptm: str) -> None:
    assert normalise_ptm(modification) == ptm


@pytest.mark.parametrize(
    ("modification", "letter"),
    [("Phosphoserine", "S"), ("Phosphothreonine", "T"), ("N6-acetyllysine", "K"),
     ("Omega-N-methylarginine", "R"), ("4-hydroxyproline", "P"), ("Unknown thing", "")],
)
def test_residue_from_name(modification: str, letter: str) -> None:
    assert residue_from_name(modification) == letter


@pytest.mark.parametrize(
    ("note", "expected"),
    [
        ("Phosphoserine", ("Phosphoserine", (), ())),
        ("Phosphoserine; by CDK1", ("Phosphoserine", ("CDK1",), ())),
        ("Phosphoserine; by CDK1 and CDK2", ("Phosphoserine", ("CDK1", "CDK2"), ())),
        ("Phosphothreonine; by IKBKE, PDPK1 and TBK1",
         ("Phosphothreonine", ("IKBKE", "PDPK1", "TBK1"), ())),
        ("Phosphoserine; by IKBKE, MTOR, and TBK1",
         ("Phosphoserine", ("IKBKE", "MTOR", "TBK1"), ())),
        ("Phosphoserine; by PKA or PKC", ("Phosphoserine", ("PKA", "PKC"), ())),
        ("Phosphotyrosine; by autocatalysis", ("Phosphotyrosine", ("autocatalysis",), ())),
        ("Phosphothreonine; by PKC/PRKCD", ("Phosphothreonine", ("PKC/PRKCD",), ())),
        ("N6-acetyllysine; alternate", ("N6-acetyllysine", (), ("alternate",))),
        ("Phosphoserine; by MAPK1; in vitro", ("Phosphoserine", ("MAPK1",), ("in vitro",))),
    ],
)
def test_parse_note(note: str, expected: tuple) -> None:
    assert parse_note(note) == expected


def test_residue_entity_has_three_letter_synonyms() -> None:
    entity = residue_entity("S", 473)
    assert entity == Entity("S473", "residue", "",
                            ("Ser473", "Ser-473", "Ser 473", "serine 473"))


def test_catalyst_slash_is_one_entity_with_alternatives() -> None:
    substrate = Entity("Plscr1", "gene", "Q9JJ00")
    entity, auto = catalyst_entity("PKC/PRKCD", substrate)
    assert entity == Entity("PRKCD", "gene", "", ("PKC", "PKC/PRKCD"))
    assert auto is False
    assert catalyst_entity("autocatalysis", substrate) == (substrate, True)


def test_parse_mod_res_old_layout_without_evidence_braces() -> None:
    feature = SimpleNamespace(location=SimpleLocation(64, 65), qualifiers={
        "description": "Phosphoserine; by PKA (By similarity)."})
    assert parse_mod_res(feature, "M" * 64 + "S") == ModRes(
        65, "S", "Phosphoserine", ("PKA",), (), (), "By similarity")


def test_parse_mod_res_isoform_residue_from_name() -> None:
    feature = SimpleNamespace(location=SimpleLocation(9, 10, ref="P31749-2"), qualifiers={
        "note": "Phosphothreonine; by PDPK1", "evidence": "ECO:0000269|PubMed:1"})
    mod = parse_mod_res(feature, "M" * 20)  # canonical residue 10 is M: not used for isoforms
    assert (mod.position, mod.residue, mod.pmids) == (10, "T", ("1",))


# ---------------------------------------------------------------------- hand-made fixture file


def test_fixture_yields_one_relation_per_catalyst(fixture_relations: dict) -> None:
    assert sorted(fixture_relations) == [
        "P31749:176:Phosphotyrosine:TNK2",
        "P31749:308:Phosphothreonine:IKBKE",
        "P31749:308:Phosphothreonine:PDPK1",
        "P31749:308:Phosphothreonine:TBK1",
        "P31749:473:Phosphoserine:IKBKE",
        "P31749:473:Phosphoserine:MTOR",
        "P31749:473:Phosphoserine:TBK1",
        "Q9UQM7:286:Phosphothreonine:autocatalysis",
        "Q9UQM7:331:Phosphoserine:PKA/PRKACA",
        "Q9UQM7:334:Omega-N-methylarginine:PRMT1",
    ]


def test_modern_layout_relation(fixture_relations: dict) -> None:
    rel = fixture_relations["P31749:473:Phosphoserine:MTOR"]
    assert rel.schema == "PTM" and rel.source == "uniprot"
    substrate = rel.slots["substrate"][0]
    assert (substrate.text, substrate.type, substrate.id) == ("AKT1", "gene", "P31749")
    assert substrate.synonyms == (
        "PKB", "RAC", "RAC-alpha serine/threonine-protein kinase", "Protein kinase B",
        "Protein kinase B alpha", "PKB alpha", "Proto-oncogene c-Akt", "AKT1_HUMAN",
    )
    assert rel.slots["ptm"] == (Entity("phosphorylation", "ptm"),)
    assert rel.slots["residue"][0].text == "S473"
    assert rel.slots["catalyst"] == (Entity("MTOR", "gene"),)
    assert rel.pmids == ("15718470", "18456494", "9094314")
    assert rel.attributes["modification"] == "Phosphoserine"
    assert rel.attributes["organism"] == "Homo sapiens (Human)"
    builtin_schemas()["PTM"].validate_relation(rel)


def test_old_three_column_layout_with_continuation(fixture_relations: dict) -> None:
    rel = fixture_relations["P31749:308:Phosphothreonine:TBK1"]
    assert rel.slots["residue"][0].text == "T308"
    assert rel.slot_text("catalyst") == "TBK1"
    assert rel.pmids == ("9094314", "9512493")
    assert rel.attributes["evidence"] == "ECO:0000269|PubMed:9094314, ECO:0000269|PubMed:9512493"


def test_autocatalysis_slash_and_methylation(fixture_relations: dict) -> None:
    auto = fixture_relations["Q9UQM7:286:Phosphothreonine:autocatalysis"]
    assert auto.slots["catalyst"] == auto.slots["substrate"]
    assert auto.slot_text("catalyst") == "CAMK2A"
    assert auto.attributes["autocatalysis"] == "yes"
    pka = fixture_relations["Q9UQM7:331:Phosphoserine:PKA/PRKACA"]
    assert pka.slots["catalyst"] == (Entity("PRKACA", "gene", "", ("PKA", "PKA/PRKACA")),)
    assert pka.pmids == ()  # evidence by similarity only (ECO:0000250|UniProtKB:...)
    methyl = fixture_relations["Q9UQM7:334:Omega-N-methylarginine:PRMT1"]
    assert methyl.slot_text("ptm") == "methylation"
    assert methyl.slot_text("residue") == "R334"


def test_include_without_catalyst_adds_empty_answer(fixtures_dir: Path) -> None:
    relations = list(read_uniprot(fixtures_dir / "uniprot_sample.dat",
                                  include_without_catalyst=True, source="sprot"))
    assert len(relations) == 12
    acetyl = next(r for r in relations if r.record_id == "P31749:14:N6-acetyllysine:")
    assert acetyl.slots["catalyst"] == ()
    assert acetyl.slot_text("ptm") == "acetylation"
    assert acetyl.attributes["note"] == "alternate"
    assert {r.source for r in relations} == {"sprot"}


# ------------------------------------------------------------------------------------ real data


def test_real_swissprot_sample(data_dir: Path) -> None:
    path = data_dir / "uniprot_sample" / "swissprot_entries_sample.dat.gz"
    relations = list(read_uniprot(path))
    # 19 catalyst features: the 18 of mod_res_features.tsv (modern /note layout) + PRKN S65 "by
    # PINK1" in the old 3-column layout; "CDK1 and CDK2", "CHEK1 and CHEK2" split into two.
    assert len(relations) == 22
    with_pmids = [r for r in relations if r.pmids]
    assert len(with_pmids) == 18
    assert len({r.record_id for r in relations}) == 22
    by_id = {r.record_id: r for r in relations}
    for kinase in ("CDK1", "CDK2"):
        brca2 = by_id[f"P51587:3291:Phosphoserine:{kinase}"]
        assert brca2.slot_text("substrate") == "BRCA2"
        assert brca2.slot_text("residue") == "S3291"
        assert brca2.slot_text("ptm") == "phosphorylation"
        assert brca2.slot_text("catalyst") == kinase
        assert brca2.pmids == ("15800615",)
    prkn = by_id["O60260:65:Phosphoserine:PINK1"]
    assert prkn.pmids == ("23754282", "24660806", "24784582")
    assert prkn.slots["substrate"][0].synonyms[0] == "PARK2"  # evidence braces stripped
    autocatalysis = [r for r in relations if r.attributes.get("autocatalysis") == "yes"]
    assert len(autocatalysis) == 13
    assert by_id["Q9JJ00:170:Phosphothreonine:PKC/PRKCD"].slot_text("catalyst") == "PRKCD"
    schema = builtin_schemas()["PTM"]
    for rel in relations:
        schema.validate_relation(rel)


def test_real_sample_without_catalyst_option(data_dir: Path) -> None:
    path = data_dir / "uniprot_sample" / "swissprot_entries_sample.dat.gz"
    relations = list(read_uniprot(path, include_without_catalyst=True))
    # 35 MOD_RES features (34 modern + 1 old layout), 16 of them without catalyst.
    assert len(relations) == 22 + 16


# ------------------------------------------------------------------------------ malformed input


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match=r"empty\.dat: file is empty"):
        list(read_uniprot(_write(tmp_path, "empty.dat", b"")))


def test_truncated_gzip(tmp_path: Path, fixtures_dir: Path) -> None:
    blob = gzip.compress((fixtures_dir / "uniprot_sample.dat").read_bytes())
    path = _write(tmp_path, "cut.dat.gz", blob[: len(blob) // 2])
    with pytest.raises(InputFormatError, match=r"cut\.dat\.gz: compressed data is truncated"):
        list(read_uniprot(path))


def test_bad_utf8_names_line(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = (fixtures_dir / "uniprot_sample.dat").read_bytes().split(b"\n")
    assert lines[13].startswith(b"OS   Homo sapiens")
    lines[13] = b"OS   Homo sapiens (Hum\xe4n)."
    path = _write(tmp_path, "latin1.dat", b"\n".join(lines))
    with pytest.raises(InputFormatError, match=r"latin1\.dat, line 14: invalid UTF-8 byte"):
        list(read_uniprot(path))


def test_not_a_swissprot_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "other.dat", b"accession\tgene\nP31749\tAKT1\n")
    with pytest.raises(InputFormatError,
                       match=r"other\.dat, line 1: cannot parse Swiss-Prot entry: Failed to "
                             r"find ID.*Expected a UniProtKB/Swiss-Prot flat file"):
        list(read_uniprot(path))


def test_entry_without_terminator(tmp_path: Path, fixtures_dir: Path) -> None:
    text = (fixtures_dir / "uniprot_sample.dat").read_text().rstrip("\n/")
    path = _write(tmp_path, "noend.dat", text.encode())
    with pytest.raises(InputFormatError,
                       match=r"noend\.dat, line \d+: cannot parse Swiss-Prot entry \(after entry "
                             r"AKT1_HUMAN\): the last entry is incomplete"):
        list(read_uniprot(path))


def test_unknown_line_code_names_line(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = (fixtures_dir / "uniprot_sample.dat").read_text().split("\n")
    lines.insert(5, "XX   not a Swiss-Prot line code")
    path = _write(tmp_path, "xx.dat", "\n".join(lines).encode())
    with pytest.raises(InputFormatError, match=r"xx\.dat, line 6: .*Unknown keyword 'XX'"):
        list(read_uniprot(path))


def test_absurdly_long_line(tmp_path: Path, fixtures_dir: Path) -> None:
    text = (fixtures_dir / "uniprot_sample.dat").read_text()
    long_text = text.replace("OS   Homo", "OS   " + "x" * 1_100_000, 1)
    path = _write(tmp_path, "long.dat", long_text.encode())
    with pytest.raises(InputFormatError,
                       match=r"long\.dat, line 14: line is longer than 1,000,000 bytes"):
        list(read_uniprot(path))


def test_pubmed_tag_that_is_not_a_pmid_is_dropped_and_counted(tmp_path: Path,
                                                                fixtures_dir: Path) -> None:
    text = (fixtures_dir / "uniprot_sample.dat").read_text()
    assert 'PubMed:20333297"' in text  # MOD_RES 176 "Phosphotyrosine; by TNK2"
    path = _write(tmp_path, "digits.dat", text.replace(
        'PubMed:20333297"', 'PubMed:٢٠٣٣٣٢٩٧, ECO:0000269|PubMed:20333297"').encode())
    result = get_reader("kb", "uniprot").read(path)
    by_id = {r.record_id: r for r in result}
    assert by_id["P31749:176:Phosphotyrosine:TNK2"].pmids == ("20333297",)
    [issue] = result.issues
    assert issue.summary() == ("1 non-PMID item(s) dropped from PMID lists (first: record "
                               "AKT1_HUMAN: MOD_RES 176 evidence 'PubMed:٢٠٣٣٣٢٩٧' is not a PMID "
                               "(1-10 ASCII digits); dropped)")


def test_nul_byte_is_refused(tmp_path: Path, fixtures_dir: Path) -> None:
    text = (fixtures_dir / "uniprot_sample.dat").read_text()
    path = _write(tmp_path, "nul.dat", text.replace("OS   Homo sapiens", "OS   Homo\x00sapiens",
                                                    1).encode())
    with pytest.raises(InputFormatError, match=r"nul\.dat, line 14: NUL byte at column 10"):
        list(read_uniprot(path))


def _akt1_variant(tmp_path: Path, fixtures_dir: Path, old: str, new: str) -> Path:
    text = (fixtures_dir / "uniprot_sample.dat").read_text()
    assert text.count(old) == 1
    return _write(tmp_path, "changed.dat", text.replace(old, new).encode())


def test_position_beyond_the_sequence_is_skipped_and_counted(
    tmp_path: Path, fixtures_dir: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 28: residue 999999 on the 480-aa AKT1 became a relation ("Y999999")."""
    caplog.set_level("WARNING")
    path = _akt1_variant(tmp_path, fixtures_dir, "FT   MOD_RES         176\n",
                         "FT   MOD_RES         999999\n")
    result = get_reader("kb", "uniprot").read(path)
    ids = [r.record_id for r in result]
    assert len(ids) == 9  # the fixture's 10 catalysed relations, less TNK2 on 176
    assert not [i for i in ids if ":176:" in i or ":999999:" in i]
    [issue] = result.issues
    assert issue.summary() == (
        "1 feature(s) with an unknown position or one beyond the sequence skipped (first: "
        "record AKT1_HUMAN: MOD_RES 999999 (Phosphotyrosine) is beyond the end of the "
        "480-residue sequence; the feature is skipped)")
    assert f"{path}, record AKT1_HUMAN: MOD_RES 999999" in caplog.text


def test_position_beyond_the_sequence_is_skipped_without_catalyst_too(
    tmp_path: Path, fixtures_dir: Path,
) -> None:
    path = _akt1_variant(tmp_path, fixtures_dir, "FT   MOD_RES         14\n",
                         "FT   MOD_RES         481\n")  # N6-acetyllysine, no catalyst
    result = get_reader("kb", "uniprot").read(path, include_without_catalyst=True)
    assert len(list(result)) == 11 and result.stats.count(IssueKind.POSITION_OUTSIDE) == 1


@pytest.mark.parametrize("note", ["Phosphotyrosine; by ", "Phosphotyrosine; by",
                                  "Phosphotyrosine; by ,"])
def test_by_without_a_catalyst_is_counted(tmp_path: Path, fixtures_dir: Path,
                                          note: str) -> None:
    """Issue 28: '"; by "' with no catalyst was dropped without a word."""
    path = _akt1_variant(tmp_path, fixtures_dir, '/note="Phosphotyrosine; by TNK2"',
                         f'/note="{note}"')
    result = get_reader("kb", "uniprot").read(path)
    assert not [r for r in result if ":176:" in r.record_id]
    [issue] = result.issues
    assert issue.summary() == (
        "1 feature(s) whose 'by' names no catalyst (first: record AKT1_HUMAN: MOD_RES 176 "
        "(Phosphotyrosine) has 'by' but no catalyst after it; no relation without "
        "include_without_catalyst)")
    kept = get_reader("kb", "uniprot").read(path, include_without_catalyst=True)
    [empty] = [r for r in kept if ":176:" in r.record_id]
    assert empty.slots["catalyst"] == () and "note" not in empty.attributes
    assert kept.stats.count(IssueKind.NO_CATALYST) == 1


def test_parse_note_keeps_an_empty_by_apart_from_other_notes() -> None:
    assert parse_note("Phosphoserine; by ; in vitro") == ("Phosphoserine", ("",), ("in vitro",))
