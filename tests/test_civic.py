"""Tests of the CIViC evidence reader (kb_sources.civic)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from kb_sources.civic import (
    V1,
    V2,
    detect_layout,
    parse_molecular_profile,
    read_civic,
    split_drugs,
    therapy_groups,
)
from kb_sources.errors import CurationError, InputFormatError
from kb_sources.registry import get_reader
from kb_sources.schema import builtin_schemas
from kb_sources.types import Relation

CIVIC_2021 = Path("civic/01-Aug-2021-ClinicalEvidenceSummaries.tsv.gz")
CIVIC_NIGHTLY = Path("civic/nightly-2021-02-25-ClinicalEvidenceSummaries.tsv.gz")
ASCO_EIDS = {"EID7066", "EID7272", "EID7299", "EID7300", "EID7355", "EID7446", "EID7601",
             "EID7642"}


def _by_id(relations: list[Relation]) -> dict[str, Relation]:
    by_id = {r.record_id: r for r in relations}
    assert len(by_id) == len(relations), "record ids must be unique"
    return by_id


@pytest.fixture(scope="module")
def v1(fixtures_dir: Path) -> dict[str, Relation]:
    return _by_id(list(read_civic(fixtures_dir / "civic_v1_sample.tsv")))


@pytest.fixture(scope="module")
def v2(fixtures_dir: Path) -> dict[str, Relation]:
    return _by_id(list(read_civic(fixtures_dir / "civic_v2_sample.tsv")))


@pytest.fixture(scope="module")
def civic_2021(data_dir: Path) -> list[Relation]:
    return list(read_civic(data_dir / CIVIC_2021))


# --- fixture files ---------------------------------------------------------------------------

def test_v1_sample_keeps_only_predictive_evidence_with_drugs(v1: dict[str, Relation]) -> None:
    assert sorted(v1) == sorted([
        "EID15", "EID1425", "EID229:Gefitinib", "EID229:Erlotinib", "EID300:Imatinib",
        "EID300:Nilotinib", "EID1192", "EID7066",
    ])
    assert {r.schema for r in v1.values()} == {"PO"}
    assert {r.source for r in v1.values()} == {"civic"}


def test_single_drug_relation_has_entrez_id_and_pmid(v1: dict[str, Relation]) -> None:
    rel = v1["EID15"]
    assert rel.slots["gene"][0].text == "PDGFRA"
    assert rel.slots["gene"][0].id == "5156"
    assert rel.slots["gene"][0].key == "gene:5156"
    assert rel.slot_text("variant") == "D842V"
    assert rel.slots["treatment"][0].type == "drug"
    assert rel.slot_text("treatment") == "Imatinib"
    assert rel.pmids == ("15928335",)
    assert rel.attributes == {
        "disease": "Gastrointestinal Stromal Tumor", "evidence_level": "B",
        "significance": "Resistance", "evidence_type": "Predictive", "source_type": "PubMed",
        "citation_id": "15928335", "evidence_direction": "Supports", "rating": "4",
        "evidence_status": "accepted",
    }


def test_combination_is_one_relation_holding_every_drug(v1: dict[str, Relation]) -> None:
    rel = v1["EID1425"]
    assert [e.text for e in rel.slots["treatment"]] == ["Dabrafenib", "Trametinib"]
    assert rel.slot_text("treatment") == "Dabrafenib + Trametinib"
    assert rel.attributes["interaction"] == "combination"


def test_substitutes_and_untyped_drug_lists_give_one_relation_per_drug(
    v1: dict[str, Relation],
) -> None:
    gef, erl = v1["EID229:Gefitinib"], v1["EID229:Erlotinib"]
    assert (gef.slot_text("treatment"), erl.slot_text("treatment")) == ("Gefitinib", "Erlotinib")
    assert gef.pmids == erl.pmids == ("15118073",)
    assert gef.attributes["interaction"] == "substitutes"
    assert v1["EID300:Nilotinib"].slot_text("treatment") == "Nilotinib"
    assert "interaction" not in v1["EID300:Imatinib"].attributes


def test_sequential_is_one_relation_and_keeps_its_interaction(v1: dict[str, Relation]) -> None:
    rel = v1["EID1192"]
    assert [e.text for e in rel.slots["treatment"]] == ["Crizotinib", "2,4-pyrimidinediamine"]
    assert rel.attributes["interaction"] == "sequential"


def test_asco_abstract_is_kept_without_pmids(v1: dict[str, Relation]) -> None:
    rel = v1["EID7066"]
    assert rel.pmids == ()
    assert rel.slot_text("variant") == "RET FUSIONS"
    assert rel.attributes["source_type"] == "ASCO"
    assert rel.attributes["citation_id"] == "161573"
    assert rel.attributes["asco_abstract_id"] == "102"


def test_v1_and_v2_layouts_give_the_same_relation(
    v1: dict[str, Relation], v2: dict[str, Relation]
) -> None:
    assert set(v1) <= set(v2)
    for record_id, old in v1.items():
        new = v2[record_id]
        # v2 exports carry no Entrez id: the gene entity differs only by its id.
        assert [e.text for e in new.slots["gene"]] == [e.text for e in old.slots["gene"]]
        assert {e.id for e in new.slots["gene"]} == {""}
        assert new.slots["variant"] == old.slots["variant"]
        assert new.slots["treatment"] == old.slots["treatment"]
        assert (new.pmids, new.attributes) == (old.pmids, old.attributes)


def test_v2_compound_profile_fills_several_variants(v2: dict[str, Relation]) -> None:
    rel = v2["EID6951"]
    assert rel.slot_text("gene") == "EGFR"
    assert [e.text for e in rel.slots["variant"]] == ["L858R", "T790M"]
    assert rel.attributes["molecular_profile"] == "EGFR L858R AND EGFR T790M"
    assert rel.pmids == ("25923549",)
    negated = v2["EID11002"]
    assert [e.text for e in negated.slots["variant"]] == ["L858R"]
    assert negated.attributes["evidence_status"] == "submitted"


def test_v2_ash_abstract_is_marked_non_pubmed(v2: dict[str, Relation]) -> None:
    rel = v2["EID10999"]
    assert rel.pmids == ()
    assert (rel.attributes["source_type"], rel.attributes["citation_id"]) == ("ASH", "1234")


def test_relations_fit_the_po_schema(v1: dict[str, Relation], v2: dict[str, Relation]) -> None:
    schema = builtin_schemas()["PO"]
    rels = [*v1.values(), *v2.values()]
    assert rels and {r.schema for r in rels} == {"PO"}
    for rel in rels:
        schema.validate_relation(rel)  # raises SchemaError on an unknown or empty query slot
        assert rel.slots["treatment"] and all(e.type == "drug" for e in rel.slots["treatment"])


def test_detect_layout(fixtures_dir: Path) -> None:
    assert detect_layout(fixtures_dir / "civic_v1_sample.tsv") is V1
    assert detect_layout(fixtures_dir / "civic_v2_sample.tsv") is V2


def test_registry_entry_reads_civic(fixtures_dir: Path) -> None:
    relations = list(get_reader("kb", "civic").read(fixtures_dir / "civic_v1_sample.tsv"))
    assert len(relations) == 8


@pytest.mark.parametrize(("profile", "genes", "variants"), [
    ("BRAF V600E", ("BRAF",), ("V600E",)),
    ("EGFR Exon 19 Deletion", ("EGFR",), ("Exon 19 Deletion",)),
    ("BCR::ABL1 Fusion AND ABL1 T315I", ("BCR::ABL1", "ABL1"), ("Fusion", "T315I")),
    ("(KRAS G12C OR KRAS G12D) AND NOT TP53 Mutation", ("KRAS",), ("G12C", "G12D")),
])
def test_parse_molecular_profile(profile: str, genes: tuple, variants: tuple) -> None:
    assert parse_molecular_profile(profile) == (genes, variants)


def test_parse_molecular_profile_without_variant() -> None:
    with pytest.raises(ValueError, match="'BRAF' has no variant"):
        parse_molecular_profile("BRAF")


def test_split_drugs_keeps_commas_inside_chemical_names() -> None:
    assert split_drugs("Selumetinib,Gefitinib,HER2 Inhibitor CP-724,714") == (
        "Selumetinib", "Gefitinib", "HER2 Inhibitor CP-724,714")
    assert split_drugs("Pertuzumab,9F7-F11, Imatinib,Imatinib") == (
        "Pertuzumab", "9F7-F11", "Imatinib")
    assert split_drugs("") == ()


def test_therapy_groups() -> None:
    assert therapy_groups(("A", "B"), "Combination") == [("A", "B")]
    assert therapy_groups(("A", "B"), "") == [("A",), ("B",)]
    assert therapy_groups((), "combination") == []


def test_options_are_refused(fixtures_dir: Path) -> None:
    with pytest.raises(CurationError, match="Reader kb 'civic' does not take option[(]s[)] "
                       "mapping. Available options: none"):
        get_reader("kb", "civic").read(fixtures_dir / "civic_v1_sample.tsv", mapping="x.toml")


# --- real data ---------------------------------------------------------------------------------

def test_civic_2021_counts(civic_2021: list[Relation]) -> None:
    # 2,331 Predictive rows with drugs: 2,704 relations after splitting substitutes.
    assert len(civic_2021) == 2704
    assert sum(1 for r in civic_2021 if r.pmids) == 2696
    assert len({p for r in civic_2021 for p in r.pmids}) == 1094
    assert len({r.record_id for r in civic_2021}) == 2704


def test_civic_2021_asco_rows_are_marked(civic_2021: list[Relation]) -> None:
    asco = [r for r in civic_2021 if r.attributes["source_type"] == "ASCO"]
    assert {r.record_id for r in asco} == ASCO_EIDS
    assert all(r.pmids == () and r.attributes["citation_id"] for r in asco)
    by_id = _by_id(civic_2021)
    assert by_id["EID7355"].slot_text("treatment") == "Vemurafenib + Irinotecan + Cetuximab"
    assert by_id["EID7355"].attributes["asco_abstract_id"] == "3505"


def test_civic_2021_known_items(civic_2021: list[Relation]) -> None:
    by_id = _by_id(civic_2021)
    pdgfra = by_id["EID15"]
    assert (pdgfra.slot_text("gene"), pdgfra.slot_text("variant")) == ("PDGFRA", "D842V")
    assert pdgfra.slot_text("treatment") == "Imatinib"
    assert pdgfra.pmids == ("15928335",)
    assert pdgfra.attributes["significance"] == "Resistance"
    braf = by_id["EID1409"]
    assert (braf.slots["gene"][0].id, braf.slot_text("variant")) == ("673", "V600E")
    assert braf.slot_text("treatment") == "Vemurafenib"
    assert braf.pmids == ("21639808",)
    assert by_id["EID1192"].slot_text("treatment") == "2,4-pyrimidinediamine"
    assert "EID1153:HER2 Inhibitor CP-724,714" in by_id


def test_civic_nightly_2021_reads(data_dir: Path) -> None:
    relations = list(read_civic(data_dir / CIVIC_NIGHTLY))
    assert len(relations) == 2719
    assert sum(1 for r in relations if not r.pmids) == 10


# --- bad input ---------------------------------------------------------------------------------

def _sample_lines(fixtures_dir: Path) -> list[str]:
    return (fixtures_dir / "civic_v1_sample.tsv").read_text(encoding="utf-8").splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _set(line: str, header: str, column: str, value: str) -> str:
    fields = line.split("\t")
    fields[header.split("\t").index(column)] = value
    return "\t".join(fields)


def _read_error(path: Path, problem: str) -> None:
    with pytest.raises(InputFormatError, match=re.escape(str(path)) + ".*" + problem):
        list(read_civic(path))


def test_missing_column(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = [line.split("\t") for line in _sample_lines(fixtures_dir)]
    idx = lines[0].index("drugs")
    path = _write(tmp_path / "no_drugs.tsv", ["\t".join(f[:idx] + f[idx + 1:]) for f in lines])
    _read_error(path, "line 1: missing column\\(s\\) 'drugs'")


def test_header_of_neither_layout_names_both(tmp_path: Path) -> None:
    path = _write(tmp_path / "other.tsv", ["pmid\ttitle", "1\tx"])
    with pytest.raises(InputFormatError, match="neither CIViC layout") as info:
        list(read_civic(path))
    message = str(info.value)
    assert str(path) in message
    assert "v1 columns gene, variant" in message and "v2 columns molecular_profile" in message


def test_wrong_delimiter(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = [line.replace("\t", ",") for line in _sample_lines(fixtures_dir)]
    _read_error(_write(tmp_path / "comma.csv", lines), "missing column.*looks comma-separated")


def test_truncated_gzip(tmp_path: Path, fixtures_dir: Path) -> None:
    blob = gzip.compress(("\n".join(_sample_lines(fixtures_dir) * 20) + "\n").encode())
    path = tmp_path / "cut.tsv.gz"
    path.write_bytes(blob[: len(blob) * 2 // 3])
    _read_error(path, "compressed data is truncated or corrupt")


def test_bad_utf8_byte(tmp_path: Path, fixtures_dir: Path) -> None:
    data = "\n".join(_sample_lines(fixtures_dir)).encode().replace(b"Imatinib", b"Imat\xefnib", 1)
    path = tmp_path / "latin1.tsv"
    path.write_bytes(data)
    _read_error(path, "line 3: invalid UTF-8 byte")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.tsv"
    path.write_bytes(b"")
    _read_error(path, "file is empty")


def test_duplicate_header(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[0] = lines[0].replace("doid", "disease")
    _read_error(_write(tmp_path / "dup.tsv", lines), "duplicate column 'disease'")


def test_absurdly_long_field(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[2] = _set(lines[2], lines[0], "evidence_statement", "x" * 2_000_000)
    _read_error(_write(tmp_path / "huge.tsv", lines),
                "line 3: line is longer than 1,000,000 bytes")


def test_long_field_over_max_field_chars(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[2] = _set(lines[2], lines[0], "evidence_statement", "x" * 300_000)
    _read_error(_write(tmp_path / "long.tsv", lines),
                "line 3: field 'evidence_statement' is 300,000 characters long")


def test_row_without_evidence_id(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[3] = _set(lines[3], lines[0], "evidence_id", "")
    _read_error(_write(tmp_path / "no_eid.tsv", lines), "line 4: row has no evidence_id.*Fix:")


def test_row_without_variant(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[2] = _set(lines[2], lines[0], "variant", "")
    _read_error(_write(tmp_path / "no_variant.tsv", lines),
                "line 3, record EID15: row has no variant.*Fix: fill in")


def test_v2_profile_without_variant(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = (fixtures_dir / "civic_v2_sample.tsv").read_text(encoding="utf-8").splitlines()
    lines[2] = _set(lines[2], lines[0], "molecular_profile", "PDGFRA")
    _read_error(_write(tmp_path / "no_mp_variant.tsv", lines),
                "line 3, record EID15: molecular_profile 'PDGFRA' has no variant")


def test_pubmed_citation_that_is_not_a_pmid(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[2] = _set(lines[2], lines[0], "citation_id", "PMC123")
    _read_error(_write(tmp_path / "pmc.tsv", lines), "PubMed citation_id 'PMC123' is not a PMID")


def test_identical_evidence_repeat_is_skipped_and_counted(tmp_path: Path,
                                                          fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    path = _write(tmp_path / "twice.tsv", [*lines, lines[2]])  # EID15 again, unchanged
    result = get_reader("kb", "civic").read(path)
    assert [r.record_id for r in result] == [r.record_id for r in read_civic(
        fixtures_dir / "civic_v1_sample.tsv")]
    [issue] = result.issues
    assert issue.summary() == (f"1 identical repeated record(s) skipped (first: line "
                               f"{len(lines) + 1}: evidence id '15' repeats line 3 unchanged; "
                               "the repeat is skipped)")


def test_evidence_repeat_with_different_content_is_refused(tmp_path: Path,
                                                           fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    changed = _set(lines[2], lines[0], "drugs", "Sunitinib")
    _read_error(_write(tmp_path / "twice.tsv", [*lines, changed]),
                f"line {len(lines) + 1}: evidence id '15' repeats line 3 with different content. "
                "Expected each evidence id once per file. Fix: keep one row per evidence id")


@pytest.mark.parametrize(("column", "value", "problem"), [
    ("citation_id", "١٥٩٢٨٣٣٥", "line 3, record EID15: PubMed citation_id '١٥٩٢٨٣٣٥' is not a "
     "PMID. Expected 1-10 ASCII digits"),
    ("citation_id", "²³", "line 3, record EID15: PubMed citation_id '²³' is not a PMID"),
    ("evidence_id", "1²", "line 3: evidence_id '1²' is not a number. Expected a numeric "
     "evidence_id \\(ASCII digits\\)"),
    ("evidence_statement", "No\x00response", "line 3: NUL byte at column"),
])
def test_non_ascii_digits_and_nul_are_refused(tmp_path: Path, fixtures_dir: Path, column: str,
                                              value: str, problem: str) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[2] = _set(lines[2], lines[0], column, value)
    _read_error(_write(tmp_path / "bad.tsv", lines), problem)


@pytest.mark.parametrize(("column", "value", "accepted"), [
    ("evidence_level", "Z", "A, B, C, D, E"),
    ("clinical_significance", "Tastes Great", "Sensitivity/Response, Resistance"),
    ("drug_interaction_type", "Bogus", "Combination, Sequential, Substitutes"),
])
def test_value_outside_the_civic_vocabulary_skips_the_row_and_is_counted(
    tmp_path: Path, fixtures_dir: Path, column: str, value: str, accepted: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 28: level Z, significance 'Tastes Great', interaction 'Bogus' were kept silently."""
    caplog.set_level("WARNING")
    lines = _sample_lines(fixtures_dir)
    lines[2] = _set(lines[2], lines[0], column, value)  # EID15, PDGFRA D842V Imatinib
    result = get_reader("kb", "civic").read(_write(tmp_path / "vocab.tsv", lines))
    ids = [r.record_id for r in result]
    expected = [r.record_id for r in read_civic(fixtures_dir / "civic_v1_sample.tsv")]
    assert "EID15" in expected and ids == [i for i in expected if i != "EID15"]
    [issue] = result.issues
    assert issue.count == 1
    assert issue.first.startswith(f"line 3, record EID15: {column} {value!r} is not a CIViC "
                                  f"value (accepted: ")
    assert accepted in issue.first and issue.first.endswith("; the row is skipped")
    assert issue.summary().startswith("1 row(s) with a value outside the format's vocabulary "
                                      "skipped (first: line 3, record EID15")
    assert f"vocab.tsv, line 3, record EID15: {column} {value!r}" in caplog.text


def test_v2_value_outside_the_vocabulary_names_the_v2_column(tmp_path: Path,
                                                            fixtures_dir: Path) -> None:
    lines = (fixtures_dir / "civic_v2_sample.tsv").read_text(encoding="utf-8").splitlines()
    row = next(i for i, line in enumerate(lines) if "\tPredictive\t" in line)
    lines[row] = _set(lines[row], lines[0], "therapy_interaction_type", "Bogus")
    result = get_reader("kb", "civic").read(_write(tmp_path / "v2.tsv", lines))
    relations = list(result)
    [issue] = result.issues
    assert issue.count == 1 and f"line {row + 1}, record EID" in issue.first
    assert "therapy_interaction_type 'Bogus' is not a CIViC value" in issue.first
    assert len(relations) < len(list(read_civic(fixtures_dir / "civic_v2_sample.tsv")))


def test_known_values_are_accepted_whatever_their_case(tmp_path: Path,
                                                       fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[2] = _set(lines[2], lines[0], "evidence_level", "b")
    lines[2] = _set(lines[2], lines[0], "clinical_significance", "N/A")
    result = get_reader("kb", "civic").read(_write(tmp_path / "case.tsv", lines))
    assert "EID15" in {r.record_id for r in result} and result.issues == ()
