"""Generic TSV + column-mapping TOML reader (the no-code path for any KB)."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pytest

from kb_sources.errors import InputFormatError, SchemaError
from kb_sources.generic_tsv import load_mapping, read_generic_tsv
from kb_sources.registry import get_reader
from kb_sources.schema import load_schema
from kb_sources.types import Entity

HEADER = "interaction_id\tdrug_name\ttarget_symbols\tpmids\n"
MINIMAL_MAPPING = """
schema = "{schema}"
record_id = "interaction_id"
pmids = "pmids"
[slots.drug]
column = "drug_name"
[slots.target]
column = "target_symbols"
separator = "|"
"""


@pytest.fixture
def user_schema(tmp_path: Path, fixtures_dir: Path) -> Path:
    """The fixture schema copied next to mappings written in tmp_path."""
    path = tmp_path / "drug_target_schema.toml"
    path.write_text((fixtures_dir / "drug_target_schema.toml").read_text())
    return path


def _files(tmp_path: Path, rows: str, mapping: str = MINIMAL_MAPPING, *,
           name: str = "kb.tsv") -> tuple[Path, Path]:
    data = tmp_path / name
    data.write_text(rows)
    mapping_path = tmp_path / "mapping.toml"
    mapping_path.write_text(mapping.replace("{schema}", "drug_target_schema.toml"))
    return data, mapping_path


# ---------------------------------------------------------------------- hand-made fixture files


def test_user_schema_and_mapping(fixtures_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    result = get_reader("kb", "tsv").read(fixtures_dir / "generic_sample.tsv",
                                          mapping=fixtures_dir / "mapping_sample.toml")
    relations = list(result)
    assert [r.record_id for r in relations] == ["DT0001", "DT0002", "DT0003", "DT0004", "DT0006"]
    lapatinib = relations[0]
    assert (lapatinib.schema, lapatinib.source) == ("drug_target", "mydrugdb")
    assert lapatinib.slots["drug"] == (Entity("Lapatinib", "drug", "DB01259",
                                              ("Tykerb", "GW572016")),)
    assert lapatinib.slots["target"] == (Entity("EGFR", "gene", "1956"),
                                         Entity("ERBB2", "gene", "2064"))
    assert lapatinib.pmids == ("17192538", "16236737")
    assert lapatinib.attributes == {"action": "inhibitor"}
    assert relations[1].slot_text("target") == "ABL1 + KIT + PDGFRA"
    assert relations[2].pmids == ("20818844",)  # "PMID:" prefix dropped
    assert relations[3].pmids == () and relations[3].slots["drug"][0].synonyms == ()
    assert relations[4].slots["target"] == ()  # answer unknown: kept for browsing
    summary = ("1 row(s) with an empty query slot skipped (first: line 6: a query slot (drug) "
               "is empty; row skipped)")
    assert [issue.summary() for issue in result.issues] == [summary]
    assert ("generic_sample.tsv, line 6: a query slot (drug) is empty; row skipped (further "
            "cases are counted)") in caplog.text
    schema = load_schema(fixtures_dir / "drug_target_schema.toml")
    for rel in relations:
        schema.validate_relation(rel)


def test_registry_entry_reads_with_mapping_option(fixtures_dir: Path) -> None:
    spec = get_reader("kb", "tsv")
    assert "mapping" in spec.options
    relations = list(spec.read(fixtures_dir / "generic_sample.tsv",
                               mapping=fixtures_dir / "mapping_sample.toml", source="other"))
    assert len(relations) == 5 and {r.source for r in relations} == {"other"}


def test_inline_schema_table_and_named_delimiter(tmp_path: Path) -> None:
    inline = """
record_id = "id"
[schema]
name = "gene_disease_x"
answer = "disease"
templates = ["Diseases of {gene}?"]
slots = [{name = "gene", type = "gene", query = true}, {name = "disease", type = "disease"}]
[slots]
gene = "g"
disease = "d"
"""
    data, mapping = _files(tmp_path, "id,g,d\n1,BRAF,melanoma\n", inline.replace(
        'record_id = "id"', 'record_id = "id"\ndelimiter = "comma"'))
    (rel,) = read_generic_tsv(data, mapping=mapping)
    assert rel.schema == "gene_disease_x" and rel.source == "mapping"
    assert rel.slots == {"gene": (Entity("BRAF", "gene"),),
                         "disease": (Entity("melanoma", "disease"),)}
    assert load_mapping(mapping).delimiter == ","


def test_real_uniprot_mod_res_table_as_ptm(tmp_path: Path, data_dir: Path) -> None:
    """The no-code path over a real table: mod_res_features.tsv mapped onto the built-in PTM."""
    mapping = tmp_path / "modres.toml"
    mapping.write_text("""
schema = "ptm"                       # built-in, case-insensitive
source = "uniprot-table"
record_id = ["accession", "position", "modification"]
pmids = { column = "pubmed_ids", separator = ";" }
[slots.substrate]
column = "gene"
id_column = "accession"
[slots.ptm]
column = "modification"
[slots.residue]
column = "position"
[slots.catalyst]
column = "catalyst"
separator = " and "
[attributes]
organism = "organism"
""")
    relations = list(read_generic_tsv(data_dir / "uniprot_sample" / "mod_res_features.tsv",
                                      mapping=mapping))
    assert len(relations) == 34
    assert sum(1 for r in relations if r.slots["catalyst"]) == 18
    assert sum(1 for r in relations if r.slots["catalyst"] and r.pmids) == 15
    brca2 = next(r for r in relations if r.record_id == "P51587:3291:Phosphoserine")
    assert brca2.schema == "PTM"
    assert brca2.slots["catalyst"] == (Entity("CDK1", "gene"), Entity("CDK2", "gene"))
    assert brca2.slots["substrate"] == (Entity("BRCA2", "gene", "P51587"),)
    assert brca2.pmids == ("15800615",)


# --------------------------------------------------------------------------- mapping validation


def test_missing_column_names_column_and_mapping_file(tmp_path: Path, user_schema: Path) -> None:
    data, mapping = _files(tmp_path, "interaction_id\tdrug\ttarget_symbols\tpmids\n1\tx\ty\t\n")
    with pytest.raises(InputFormatError,
                       match=r"kb\.tsv, line 1: missing column\(s\) 'drug_name'.*correct the "
                             r"column name\(s\) in the mapping file .*mapping\.toml"):
        list(read_generic_tsv(data, mapping=mapping))


def test_wrong_delimiter(tmp_path: Path, user_schema: Path) -> None:
    data, mapping = _files(tmp_path, HEADER.replace("\t", ",") + "1,Imatinib,ABL1,\n")
    with pytest.raises(InputFormatError,
                       match=r"kb\.tsv, line 1: missing column.*the header looks "
                             r"comma-separated; save the file tab-separated"):
        list(read_generic_tsv(data, mapping=mapping))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("[slots.target]", "[slots.targets]"),
         r"mapping\.toml: slot\(s\) targets are not in schema 'drug_target' "
         r"\(slots: drug, target\)"),
        (('[slots.drug]\ncolumn = "drug_name"\n', ""),
         r"mapping\.toml: query slot\(s\) drug of schema 'drug_target' need a column"),
        (('column = "drug_name"', 'colum = "drug_name"'),
         r"mapping\.toml \[slots\.drug\]: needs column"),
        (('separator = "|"', 'separator = "|"\nid_colum = "x"'),
         r"mapping\.toml \[slots\.target\]: unknown key\(s\) id_colum\. Allowed keys:"),
        (('record_id = "interaction_id"', 'record_id = 3'),
         r"mapping\.toml: record_id must name the column"),
        (('pmids = "pmids"', 'pmid = "pmids"'),
         r"mapping\.toml: unknown key\(s\) pmid\. Allowed keys: attributes, delimiter"),
        (('schema = "{schema}"', 'schema = "drug_targets"'),
         r"mapping\.toml: Unknown schema 'drug_targets'\. Available options: PO, PTM.*"
         r"Or give a path to a schema TOML file"),
        (('schema = "{schema}"', 'schema = "missing.toml"'),
         r"missing\.toml: schema file not found"),
        (('record_id', 'delimiter = "::"\nrecord_id'),
         r"mapping\.toml: delimiter '::' must be one character"),
    ],
)
def test_invalid_mapping(tmp_path: Path, user_schema: Path, change: tuple[str, str],
                         message: str) -> None:
    data, mapping = _files(tmp_path, HEADER + "1\tImatinib\tABL1\t\n",
                           MINIMAL_MAPPING.replace(*change))
    with pytest.raises(SchemaError, match=message):
        list(read_generic_tsv(data, mapping=mapping))


def test_mapping_file_not_found_or_not_toml(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"nope\.toml: mapping file not found"):
        load_mapping(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("schema = [unclosed\n")
    with pytest.raises(SchemaError, match=r"bad\.toml: not a valid UTF-8 TOML file"):
        load_mapping(bad)


# ------------------------------------------------------------------------------ malformed rows


def test_ids_not_parallel_to_entities(tmp_path: Path, user_schema: Path) -> None:
    mapping = MINIMAL_MAPPING.replace('separator = "|"', 'separator = "|"\nid_column = "ids"')
    data, mapping_path = _files(
        tmp_path, "interaction_id\tdrug_name\ttarget_symbols\tids\tpmids\n"
        "1\tLapatinib\tEGFR|ERBB2\t1956\t\n", mapping)
    with pytest.raises(InputFormatError,
                       match=r"kb\.tsv, line 2: slot 'target': 2 value\(s\) in column "
                             r"'target_symbols' but 1 id\(s\) in column 'ids'"):
        list(read_generic_tsv(data, mapping=mapping_path))


def test_duplicate_record_id(tmp_path: Path, user_schema: Path) -> None:
    data, mapping = _files(tmp_path, HEADER + "1\tImatinib\tABL1\t\n1\tImatinib\tKIT\t\n")
    with pytest.raises(InputFormatError,
                       match=r"kb\.tsv, line 3: record id '1' repeats line 2 with different "
                             r"content.*set record_id in "):
        list(read_generic_tsv(data, mapping=mapping))


def test_bad_pmid(tmp_path: Path, user_schema: Path) -> None:
    data, mapping = _files(tmp_path, HEADER + "1\tImatinib\tABL1\tdoi:10.1/x\n")
    with pytest.raises(InputFormatError,
                       match=r"kb\.tsv, line 2: PMID 'doi:10\.1/x' in column 'pmids' is not a "
                             r"number"):
        list(read_generic_tsv(data, mapping=mapping))


def test_empty_file(tmp_path: Path, user_schema: Path) -> None:
    data, mapping = _files(tmp_path, "")
    with pytest.raises(InputFormatError, match=r"kb\.tsv: file is empty"):
        list(read_generic_tsv(data, mapping=mapping))


def test_truncated_gzip(tmp_path: Path, user_schema: Path) -> None:
    rows = HEADER + "".join(f"{i}\tdrug{i}\tGENE{i}\t{i}\n" for i in range(5000))
    data, mapping = _files(tmp_path, "", name="kb.tsv.gz")
    blob = gzip.compress(rows.encode())
    data.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InputFormatError, match=r"kb\.tsv\.gz: compressed data is truncated"):
        list(read_generic_tsv(data, mapping=mapping))


def test_bad_utf8(tmp_path: Path, user_schema: Path) -> None:
    data, mapping = _files(tmp_path, "")
    data.write_bytes(HEADER.encode() + b"1\tCaf\xe9ine\tADORA1\t\n")
    with pytest.raises(InputFormatError, match=r"kb\.tsv, line 2: invalid UTF-8 byte b'\\xe9'"):
        list(read_generic_tsv(data, mapping=mapping))


def test_absurdly_long_field(tmp_path: Path, user_schema: Path) -> None:
    data, mapping = _files(tmp_path, HEADER + "1\tImatinib\t" + "A" * 300_000 + "\t\n")
    with pytest.raises(InputFormatError,
                       match=r"kb\.tsv, line 2: field 'target_symbols' is 300,000 characters"):
        list(read_generic_tsv(data, mapping=mapping))


def test_row_with_too_many_fields(tmp_path: Path, user_schema: Path) -> None:
    data, mapping = _files(tmp_path, HEADER + "1\tImatinib\tABL1\t\textra\n")
    with pytest.raises(InputFormatError, match=r"kb\.tsv, line 2: row has 5 fields but the "
                                               r"header has 4"):
        list(read_generic_tsv(data, mapping=mapping))


# ------------------------------------------ issue 12: inputs that crashed or slipped through

def test_no_mapping_is_one_clear_error(tmp_path: Path) -> None:
    data, _ = _files(tmp_path, HEADER + "1\tImatinib\tABL1\t\n")
    message = (r"kb\.tsv: reader 'tsv' needs a column-mapping TOML that says which column fills "
               r"which slot, and none was given. Pass it with --mapping FILE \(kbcurate import "
               r"kb tsv FILE --mapping MAPPING\.toml\)")
    with pytest.raises(SchemaError, match=message):
        read_generic_tsv(data)  # raised at once, before any row is read
    with pytest.raises(SchemaError, match=message):
        get_reader("kb", "tsv").read(data)


@pytest.mark.parametrize("pmid", ["١٧١٩٢٥٣٨", "²³", "１２３"])
def test_pmids_in_other_scripts_are_refused(tmp_path: Path, user_schema: Path, pmid: str) -> None:
    data, mapping = _files(tmp_path, HEADER + f"1\tImatinib\tABL1\t11287972;{pmid}\n")
    with pytest.raises(InputFormatError, match=rf"kb\.tsv, line 2: PMID '{pmid}' in column "
                       r"'pmids' is not a number \(1-10 ASCII digits\)"):
        list(read_generic_tsv(data, mapping=mapping))


def test_identical_repeated_row_is_skipped_and_counted(tmp_path: Path, user_schema: Path) -> None:
    row = "1\tImatinib\tABL1\t11287972\n"
    data, mapping = _files(tmp_path, HEADER + row + "2\tNilotinib\tABL1\t\n" + row)
    result = get_reader("kb", "tsv").read(data, mapping=mapping)
    assert [r.record_id for r in result] == ["1", "2"]
    assert [i.summary() for i in result.issues] == [
        "1 identical repeated record(s) skipped (first: line 4: record id '1' repeats line 2 "
        "unchanged; the repeat is skipped)"]


def test_mapping_path_that_is_a_folder(tmp_path: Path) -> None:
    data, _ = _files(tmp_path, HEADER + "1\tImatinib\tABL1\t\n")
    with pytest.raises(SchemaError, match=rf"{tmp_path}: cannot read the mapping file \(Is a "
                       r"directory\); expected a readable TOML file"):
        read_generic_tsv(data, mapping=tmp_path)
