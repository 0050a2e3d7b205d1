"""Tests of the OncoKB variant-list reader (kb_sources.oncokb).

OncoKB data is licence-restricted: the real files are read from the shared data folder, never
copied into the repository; the fixtures here are hand-written.
"""

from __future__ import annotations

import gzip
import logging
import re
from pathlib import Path

import pytest

from kb_sources.errors import CurationError, InputFormatError
from kb_sources.oncokb import (
    OncokbFile,
    detect_layout,
    drug_groups,
    parse_pmids,
    read_oncokb,
    split_pmids,
)
from kb_sources.read_stats import IssueKind
from kb_sources.registry import get_reader
from kb_sources.schema import builtin_schemas
from kb_sources.types import Relation

ACTIONABLE_2019 = Path("oncokb/allActionableVariants_2019.txt.gz")
ANNOTATED_2017 = Path("oncokb/allAnnotatedVariants_2017.txt.gz")
NSCLC = "Non-Small Cell Lung Cancer"


def _by_id(relations: list[Relation]) -> dict[str, Relation]:
    by_id = {r.record_id: r for r in relations}
    assert len(by_id) == len(relations), "record ids must be unique"
    return by_id


@pytest.fixture(scope="module")
def actionable(fixtures_dir: Path) -> dict[str, Relation]:
    return _by_id(list(read_oncokb(fixtures_dir / "oncokb_actionable_sample.tsv")))


@pytest.fixture(scope="module")
def annotated(fixtures_dir: Path) -> dict[str, Relation]:
    return _by_id(list(read_oncokb(fixtures_dir / "oncokb_annotated_sample.tsv")))


# --- fixture files ---------------------------------------------------------------------------

def test_actionable_sample_gives_one_relation_per_drug_group(
    actionable: dict[str, Relation],
) -> None:
    assert sorted(actionable) == sorted([
        f"EGFR:T790M:{NSCLC}:1:Osimertinib",
        f"EGFR:L858R:{NSCLC}:1:Erlotinib",
        f"EGFR:L858R:{NSCLC}:1:Gefitinib",
        f"EGFR:L858R:{NSCLC}:1:Afatinib",
        "BRAF:V600E:Melanoma:1:Vemurafenib",
        "BRAF:V600E:Melanoma:1:Dabrafenib + Trametinib",
        "BRAF:V600E:Melanoma:1:Encorafenib + Binimetinib",
        "BRAF:V600E:Colorectal Cancer:2A:Encorafenib + Binimetinib + Cetuximab",
        "KRAS:Oncogenic Mutations:Colorectal Cancer:R1:Cetuximab",
        "KRAS:Oncogenic Mutations:Colorectal Cancer:R1:Panitumumab",
        f"ALK:Fusions:{NSCLC}:1:Alectinib",
        f"ALK:Fusions:{NSCLC}:1:Crizotinib",
    ])
    assert {(r.schema, r.source) for r in actionable.values()} == {("PO", "oncokb")}


def test_actionable_relation_slots_pmids_and_attributes(actionable: dict[str, Relation]) -> None:
    rel = actionable[f"EGFR:T790M:{NSCLC}:1:Osimertinib"]
    gene = rel.slots["gene"][0]
    assert (gene.text, gene.type, gene.id) == ("EGFR", "gene", "1956")
    assert rel.slot_text("variant") == "T790M"
    assert rel.slot_text("treatment") == "Osimertinib"
    assert rel.pmids == ("25923549", "27959700")
    assert rel.attributes == {"cancer_type": NSCLC, "level": "1", "protein_change": "T790M"}


def test_plus_is_a_combination_in_one_treatment_slot(actionable: dict[str, Relation]) -> None:
    rel = actionable["BRAF:V600E:Colorectal Cancer:2A:Encorafenib + Binimetinib + Cetuximab"]
    assert [e.text for e in rel.slots["treatment"]] == ["Encorafenib", "Binimetinib", "Cetuximab"]
    assert {e.type for e in rel.slots["treatment"]} == {"drug"}
    assert rel.attributes["abstracts"] == "Kopetz et al. Abstract# LBA-006, ESMO GI 2019"
    alternatives = [r for r in actionable.values() if r.record_id.startswith("BRAF:V600E:Melanoma")]
    assert [len(r.slots["treatment"]) for r in alternatives] == [1, 2, 2]
    assert {r.pmids for r in alternatives} == {("21639808", "25265492", "29573941")}


def test_pmids_keep_only_digits_without_repeats(actionable: dict[str, Relation]) -> None:
    rel = actionable["KRAS:Oncogenic Mutations:Colorectal Cancer:R1:Cetuximab"]
    assert rel.pmids == ("18316791",)


def test_annotated_sample_gives_partial_relations(annotated: dict[str, Relation]) -> None:
    assert list(annotated) == ["BRAF:V600E", "TP53:R175H", "KRAS:G12C",
                               "EGFR:Truncating Mutations", "PIK3CA:H1047R"]
    rel = annotated["BRAF:V600E"]
    assert set(rel.slots) == {"gene", "variant"}
    assert rel.slot_text("treatment") == ""
    assert rel.pmids == ("12068308", "15035987")
    assert rel.attributes == {"oncogenicity": "Oncogenic", "mutation_effect": "Gain-of-function"}
    assert annotated["KRAS:G12C"].pmids == ("24256730",)
    assert annotated["EGFR:Truncating Mutations"].pmids == ()
    assert annotated["PIK3CA:H1047R"].attributes["abstracts"].startswith("Example et al.")


def test_relations_fit_the_po_schema(
    actionable: dict[str, Relation], annotated: dict[str, Relation]
) -> None:
    schema = builtin_schemas()["PO"]
    rels = [*actionable.values(), *annotated.values()]
    assert rels and {r.schema for r in rels} == {"PO"}
    for rel in rels:
        schema.validate_relation(rel)  # raises SchemaError on an unknown or empty query slot
    assert all(r.slots.get("treatment") for r in actionable.values())
    assert not any(r.slots.get("treatment") for r in annotated.values())


def test_detect_layout(fixtures_dir: Path, tmp_path: Path) -> None:
    assert detect_layout(fixtures_dir / "oncokb_actionable_sample.tsv").kind is \
        OncokbFile.ACTIONABLE
    layout = detect_layout(fixtures_dir / "oncokb_annotated_sample.tsv")
    assert (layout.kind, layout.gene_column) == (OncokbFile.ANNOTATED, "Gene")
    newer = tmp_path / "newer.tsv"
    newer.write_text("Hugo Symbol\tAlteration\tCancer Type\tLevel\tDrugs(s)\tPMIDs for drug\n"
                     "BRAF\tV600E\tMelanoma\t1\tVemurafenib\t21639808\n", encoding="utf-8")
    assert detect_layout(newer).gene_column == "Hugo Symbol"
    [rel] = read_oncokb(newer)
    assert rel.record_id == "BRAF:V600E:Melanoma:1:Vemurafenib"


def test_registry_entry_reads_oncokb(fixtures_dir: Path) -> None:
    relations = list(get_reader("kb", "oncokb").read(fixtures_dir / "oncokb_annotated_sample.tsv"))
    assert len(relations) == 5


def test_drug_groups() -> None:
    assert drug_groups("Vemurafenib, Dabrafenib + Trametinib") == (
        ("Vemurafenib",), ("Dabrafenib", "Trametinib"))
    assert drug_groups("A, A, , B+C") == (("A",), ("B", "C"))
    assert drug_groups("") == ()


def test_parse_pmids() -> None:
    assert parse_pmids("24478319, 26051236,23816963, 24478319") == (
        "24478319", "26051236", "23816963")
    assert parse_pmids("PMID pending, , 12") == ("12",)
    assert split_pmids("24478319, abc;-5, ١٢٣, ²³, 24478319") == (
        ("24478319",), ("abc;-5", "١٢٣", "²³"))


def test_options_are_refused(fixtures_dir: Path) -> None:
    with pytest.raises(CurationError, match="Reader kb 'oncokb' does not take option[(]s[)] "
                       "mapping. Available options: none"):
        get_reader("kb", "oncokb").read(fixtures_dir / "oncokb_annotated_sample.tsv",
                                        mapping="x.toml")


# --- real data (local copies only; never in the repository) ----------------------------------

def test_actionable_2019(data_dir: Path) -> None:
    relations = _by_id(list(read_oncokb(data_dir / ACTIONABLE_2019)))
    # 188 rows, 348 drug groups; two rows list no PMID.
    assert len(relations) == 348
    assert sum(1 for r in relations.values() if r.pmids) == 346
    assert sum(1 for r in relations.values() if len(r.slots["treatment"]) > 1) == 17
    osimertinib = relations[f"EGFR:T790M:{NSCLC}:1:Osimertinib"]
    assert osimertinib.slots["gene"][0].id == "1956"
    assert osimertinib.pmids == ("25923549", "30059262", "27751847", "29151359")
    resistance = relations[f"EGFR:T790M:{NSCLC}:R1:Erlotinib"]
    assert resistance.pmids == ("24478319", "26051236", "23816963")
    assert resistance.attributes["abstracts"].startswith("Yang et al. Abstract# O03.05")
    combo = relations["BRAF:V600E:Melanoma:1:Dabrafenib + Trametinib"]
    assert [e.text for e in combo.slots["treatment"]] == ["Dabrafenib", "Trametinib"]


def test_annotated_2017(data_dir: Path) -> None:
    relations = _by_id(list(read_oncokb(data_dir / ANNOTATED_2017)))
    assert len(relations) == 3701
    assert sum(1 for r in relations.values() if r.pmids) == 3685
    assert all("treatment" not in r.slots for r in relations.values())
    cbl = relations["CBL:L399V"]
    assert cbl.pmids == ("26676746",)
    assert cbl.attributes == {"oncogenicity": "Likely Oncogenic",
                              "mutation_effect": "Loss-of-function"}


# --- bad input ---------------------------------------------------------------------------------

def _sample_lines(fixtures_dir: Path, name: str = "oncokb_actionable_sample.tsv") -> list[str]:
    return (fixtures_dir / name).read_text(encoding="utf-8").splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _read_error(path: Path, problem: str) -> None:
    with pytest.raises(InputFormatError, match=re.escape(str(path)) + ".*" + problem):
        list(read_oncokb(path))


def test_missing_column(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = [line.split("\t") for line in _sample_lines(fixtures_dir)]
    idx = lines[0].index("Level")
    path = _write(tmp_path / "no_level.tsv", ["\t".join(f[:idx] + f[idx + 1:]) for f in lines])
    _read_error(path, "line 1: missing column\\(s\\) 'Level'.*allActionableVariants header")


def test_header_of_neither_file_names_both(tmp_path: Path) -> None:
    path = _write(tmp_path / "other.tsv", ["gene\tvariant\tdrugs", "BRAF\tV600E\tx"])
    with pytest.raises(InputFormatError, match="neither OncoKB file") as info:
        list(read_oncokb(path))
    message = str(info.value)
    assert str(path) in message
    assert "allActionableVariants columns Gene, Alteration, Cancer Type" in message
    assert "allAnnotatedVariants columns Gene, Alteration, Oncogenicity" in message


def test_wrong_delimiter(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = [line.replace("\t", ",") for line in _sample_lines(fixtures_dir)]
    _read_error(_write(tmp_path / "comma.csv", lines), "missing column.*looks comma-separated")


def test_truncated_gzip(tmp_path: Path, fixtures_dir: Path) -> None:
    blob = gzip.compress(("\n".join(_sample_lines(fixtures_dir) * 30) + "\n").encode())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(blob[: len(blob) * 2 // 3])
    _read_error(path, "compressed data is truncated or corrupt")


def test_bad_utf8_byte(tmp_path: Path, fixtures_dir: Path) -> None:
    text = "\n".join(_sample_lines(fixtures_dir, "oncokb_annotated_sample.tsv"))
    path = tmp_path / "latin1.txt"
    path.write_bytes(text.encode().replace(b"R175H", b"R175H\xe9", 1))
    _read_error(path, "line 3: invalid UTF-8 byte b'\\\\xe9'")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    _read_error(path, "file is empty")


def test_blank_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "blank.txt"
    path.write_text("\n  \n\n", encoding="utf-8")
    _read_error(path, "file has no content")


def test_duplicate_header(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir, "oncokb_annotated_sample.tsv")
    lines[0] = lines[0].replace("Abstracts for Mutation Effect", "Oncogenicity")
    _read_error(_write(tmp_path / "dup.txt", lines), "duplicate column 'Oncogenicity'")


def test_absurdly_long_field(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    lines[1] += "x" * 2_000_000
    _read_error(_write(tmp_path / "huge.txt", lines),
                "line 2: line is longer than 1,000,000 bytes")


def test_row_with_more_fields_than_header(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir, "oncokb_annotated_sample.tsv")
    lines[2] += "\textra\tfields"
    _read_error(_write(tmp_path / "extra.txt", lines),
                "line 3: row has 8 fields but the header has 6")


def test_row_without_gene(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir, "oncokb_annotated_sample.tsv")
    lines[3] = "\t" + lines[3].split("\t", 1)[1]
    _read_error(_write(tmp_path / "no_gene.txt", lines), "line 4: row has no 'Gene'.*Fix:")


def test_non_pmid_items_are_dropped_warned_and_counted(tmp_path: Path, fixtures_dir: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    lines = _sample_lines(fixtures_dir, "oncokb_annotated_sample.tsv")
    column = lines[0].split("\t").index("PMIDs for Mutation Effect")
    fields = lines[1].split("\t")
    fields[column] = "12068308, abc;-5, ١٢٣٤٥, 15035987"
    lines[1] = "\t".join(fields)
    path = _write(tmp_path / "pmids.txt", lines)
    result = get_reader("kb", "oncokb").read(path)
    assert next(result).pmids == ("12068308", "15035987")
    list(result)
    [issue] = result.issues
    first = ("line 2: 'abc;-5' in column 'PMIDs for Mutation Effect' is not a PMID (1-10 ASCII "
             "digits); dropped")
    assert (issue.count, issue.first) == (2, first)
    assert issue.summary() == f"2 non-PMID item(s) dropped from PMID lists (first: {first})"
    assert f"{path}, {first} (further cases are counted)" in caplog.text
    assert f"{path}: {issue.summary()}" in caplog.text


def test_level_outside_the_oncokb_levels_skips_the_row_and_is_counted(
    tmp_path: Path, fixtures_dir: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 28: level '99' was kept silently (and made part of the record id)."""
    caplog.set_level(logging.WARNING)
    lines = _sample_lines(fixtures_dir)
    column = lines[0].split("\t").index("Level")
    fields = lines[1].split("\t")
    gene, alteration, old = fields[3], fields[4], fields[column]
    fields[column] = "99"
    lines[1] = "\t".join(fields)
    path = _write(tmp_path / "level.txt", lines)
    result = get_reader("kb", "oncokb").read(path)
    relations = list(result)
    expected = list(read_oncokb(fixtures_dir / "oncokb_actionable_sample.tsv"))
    skipped = [r for r in expected if r.record_id.startswith(f"{gene}:{alteration}:")
               and r.attributes["level"] == old and r.attributes["cancer_type"] == fields[6]]
    assert skipped and len(relations) == len(expected) - len(skipped)
    assert not any(r.attributes["level"] == "99" for r in relations)
    [issue] = [i for i in result.issues if i.kind is IssueKind.UNKNOWN_VALUE]
    assert issue.count == 1
    assert issue.first.startswith("line 2: Level '99' is not an OncoKB level (accepted: 1, 2, "
                                  "2A, 2B, 3, 3A, 3B, 4, R1, R2")
    assert issue.first.endswith("; the row is skipped")
    assert issue.summary().startswith("1 row(s) with a value outside the format's vocabulary")
    assert f"{path}, line 2: Level '99'" in caplog.text


def test_every_level_of_the_2019_file_is_accepted(tmp_path: Path, fixtures_dir: Path) -> None:
    lines = _sample_lines(fixtures_dir)
    column = lines[0].split("\t").index("Level")
    rows = []
    for level in ("1", "2A", "3A", "4", "R1", "R2", "r2"):
        fields = lines[1].split("\t")
        fields[column] = level
        rows.append("\t".join(fields))
    result = get_reader("kb", "oncokb").read(_write(tmp_path / "levels.txt", [lines[0], *rows]))
    assert {r.attributes["level"] for r in result} == {"1", "2A", "3A", "4", "R1", "R2", "r2"}
    assert result.stats.count(IssueKind.UNKNOWN_VALUE) == 0
