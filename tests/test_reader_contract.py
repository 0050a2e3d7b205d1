"""Contract tests over every registered reader (kb_sources.registry).

Each reader: reads its hand-made fixture into Relations/Documents that fit the schemas, gives the
same result twice, has unique record ids, and turns every kind of bad input into one
InputFormatError naming the file.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from kb_sources.errors import InputFormatError
from kb_sources.registry import ReaderSpec, readers
from kb_sources.schema import builtin_schemas, load_schemas
from kb_sources.types import Document, Relation

FIXTURES = Path(__file__).parent / "fixtures"

#: reader (kind, name) -> (fixture file, options)
FIXTURE_FOR: dict[tuple[str, str], tuple[str, dict[str, str]]] = {
    ("kb", "civic"): ("civic_v1_sample.tsv", {}),
    ("kb", "oncokb"): ("oncokb_actionable_sample.tsv", {}),
    ("kb", "uniprot"): ("uniprot_sample.dat", {}),
    ("kb", "pubtator"): ("pubtator_sample.txt", {}),
    ("kb", "tsv"): ("generic_sample.tsv", {"mapping": str(FIXTURES / "mapping_sample.toml")}),
    ("docs", "pubmed-xml"): ("pubmed_sample.xml", {}),
    ("docs", "medline"): ("medline_sample.txt", {}),
    ("docs", "pubtator"): ("pubtator_sample.txt", {}),
    ("docs", "jsonl"): ("docs_sample.jsonl", {}),
}

ALL = readers("kb") + readers("docs")


def _id(spec: ReaderSpec) -> str:
    return f"{spec.kind}:{spec.name}"


def _read(spec: ReaderSpec, path: Path) -> list[Relation | Document]:
    _, options = FIXTURE_FOR[(spec.kind, spec.name)]
    return list(spec.read(path, **options))


def test_every_reader_has_a_fixture():
    assert {(s.kind, s.name) for s in ALL} == set(FIXTURE_FOR)


@pytest.mark.parametrize("spec", ALL, ids=_id)
def test_reads_fixture_into_valid_items(spec: ReaderSpec):
    name, _ = FIXTURE_FOR[(spec.kind, spec.name)]
    items = _read(spec, FIXTURES / name)
    assert items, f"{spec.name} read nothing from {name}"
    schemas = {**builtin_schemas(), **load_schemas()}
    from kb_sources.schema import load_schema
    schemas["drug_target"] = load_schema(FIXTURES / "drug_target_schema.toml")
    rels = [i for i in items if isinstance(i, Relation)]
    docs = [i for i in items if isinstance(i, Document)]
    assert len(rels) + len(docs) == len(items)
    if spec.kind == "docs":
        assert not rels and all(d.doc_id and (d.title or d.abstract) for d in docs)
    else:
        assert rels
    for rel in rels:
        schemas[rel.schema].validate_relation(rel)
        assert all(p.isdigit() for p in rel.pmids), rel
    keys = [(r.source, r.record_id) for r in rels]
    assert len(keys) == len(set(keys)), "record ids must be unique within a file"
    for doc in docs:
        for ann in doc.annotations:
            assert doc.text[ann.start:ann.end] == ann.text
    assert _read(spec, FIXTURES / name) == items  # deterministic


def _bad_inputs(tmp_path: Path, fixture: Path) -> dict[str, Path]:
    good = fixture.read_bytes()
    files = {
        "empty": b"",
        # one letter of the last record's text replaced by a byte that is not UTF-8
        "bad_utf8": good[: good.rindex(b"e")] + b"\xff" + good[good.rindex(b"e") + 1:],
    }
    out = {}
    for label, data in files.items():
        out[label] = tmp_path / f"{label}{fixture.suffix}"
        out[label].write_bytes(data)
    truncated = gzip.compress(good * 20)
    out["truncated_gzip"] = tmp_path / f"truncated{fixture.suffix}.gz"
    out["truncated_gzip"].write_bytes(truncated[: len(truncated) // 2])
    return out


@pytest.mark.parametrize("spec", ALL, ids=_id)
@pytest.mark.parametrize("case", ["empty", "bad_utf8", "truncated_gzip"])
def test_bad_input_is_one_clear_error(spec: ReaderSpec, case: str, tmp_path: Path):
    name, _ = FIXTURE_FOR[(spec.kind, spec.name)]
    path = _bad_inputs(tmp_path, FIXTURES / name)[case]
    with pytest.raises(InputFormatError) as info:
        _read(spec, path)
    message = str(info.value)
    assert str(path) in message
    expected = {"empty": "empty", "bad_utf8": "UTF-8", "truncated_gzip": "truncated"}[case]
    assert expected.lower() in message.lower(), message


@pytest.mark.parametrize("spec", ALL, ids=_id)
def test_missing_file_names_path(spec: ReaderSpec, tmp_path: Path):
    with pytest.raises(InputFormatError, match="file not found"):
        _read(spec, tmp_path / "missing.txt")
