"""Contract tests over every registered reader (kb_sources.registry).

Each reader: reads its hand-made fixture into Relations/Documents that fit the schemas, gives the
same result twice, has unique record ids and valid document ids, returns a ReadResult that carries
its ReadStats, refuses unknown options with the list of its own, and turns every kind of bad input
(empty, bad UTF-8, truncated gzip, NUL byte, a gzip that expands to one huge line) into one
InputFormatError naming the file. The shared checks of kb_sources.checks and kb_sources.read_stats
are tested here too, as every reader relies on them.
"""

from __future__ import annotations

import gzip
import logging
import re
import tracemalloc
import zlib
from pathlib import Path

import pytest

from kb_sources import io as kb_io
from kb_sources import pubmed_xml
from kb_sources.checks import check_doc_id, check_text, doc_id_problem, is_ascii_int, is_pmid
from kb_sources.errors import CurationError, InputFormatError
from kb_sources.read_stats import DuplicateCheck, IssueKind, ReadResult, ReadStats
from kb_sources.registry import ReaderSpec, get_reader, readers
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
        assert all(is_pmid(p) for p in rel.pmids), rel
    assert all(doc_id_problem(d.doc_id) is None for d in docs)
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
        # ... or by a NUL byte (a UTF-16 or binary file)
        "nul": good[: good.rindex(b"e")] + b"\x00" + good[good.rindex(b"e") + 1:],
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
@pytest.mark.parametrize("case", ["empty", "bad_utf8", "nul", "truncated_gzip"])
def test_bad_input_is_one_clear_error(spec: ReaderSpec, case: str, tmp_path: Path):
    name, _ = FIXTURE_FOR[(spec.kind, spec.name)]
    path = _bad_inputs(tmp_path, FIXTURES / name)[case]
    with pytest.raises(InputFormatError) as info:
        _read(spec, path)
    message = str(info.value)
    assert str(path) in message
    expected = {"empty": "empty", "bad_utf8": "UTF-8", "truncated_gzip": "truncated",
                "nul": "NUL byte"}[case]
    assert expected in message.replace(str(path), ""), message


@pytest.mark.parametrize("spec", ALL, ids=_id)
def test_missing_file_names_path(spec: ReaderSpec, tmp_path: Path):
    with pytest.raises(InputFormatError, match="file not found"):
        _read(spec, tmp_path / "missing.txt")


@pytest.mark.parametrize("spec", ALL, ids=_id)
def test_read_returns_result_with_stats(spec: ReaderSpec):
    name, options = FIXTURE_FOR[(spec.kind, spec.name)]
    result = spec.read(FIXTURES / name, **options)
    assert isinstance(result, ReadResult) and isinstance(result.stats, ReadStats)
    assert list(result) and result.issues == result.stats.issues


@pytest.mark.parametrize("spec", ALL, ids=_id)
def test_unknown_option_lists_the_readers_options(spec: ReaderSpec):
    name, _ = FIXTURE_FOR[(spec.kind, spec.name)]
    available = ", ".join(spec.options) or "none"
    with pytest.raises(CurationError, match=rf"Reader {spec.kind} '{spec.name}' does not take "
                       rf"option\(s\) colour. Available options: {available}$"):
        spec.read(FIXTURES / name, colour="red")


def _huge_line_gzip(path: Path, prefix: bytes, size: int) -> Path:
    """A gzip whose first line is ``prefix`` + ``size`` bytes of "a" (compresses ~1000:1)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as fh:
        fh.write(packer.compress(prefix))
        for _ in range(size // (1 << 20)):
            fh.write(packer.compress(b"a" * (1 << 20)))
        fh.write(packer.compress(b"\n") + packer.flush())
    return path


@pytest.mark.parametrize("spec", [s for s in ALL if s.name != "pubmed-xml"], ids=_id)
def test_huge_line_is_refused_without_reading_it(spec: ReaderSpec, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch):
    # 8 MB line, 100 kB limit: the reader must stop at the limit, not hold the line in memory
    # (a 1 MB gzip of a 1 GB line used 2.2 GB before the line-length check moved into readline)
    monkeypatch.setattr(kb_io, "MAX_LINE_BYTES", 100_000)
    name, options = FIXTURE_FOR[(spec.kind, spec.name)]
    first = (FIXTURES / name).read_bytes().split(b"\n", 1)[0]
    path = _huge_line_gzip(tmp_path / f"huge{Path(name).suffix}.gz", first, 8 << 20)
    assert path.stat().st_size < 20_000
    tracemalloc.start()
    try:
        with pytest.raises(InputFormatError, match=r"huge.*line 1: line is longer than 100,000 "
                           "bytes \\(reading stopped there\\)"):
            list(spec.read(path, **options))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"peak {peak:,} bytes"


def test_huge_xml_record_is_refused_without_reading_it(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pubmed_xml, "MAX_RECORD_BYTES", 200_000)
    prefix = (b"<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>1</PMID><Article>"
              b"<ArticleTitle>")
    path = _huge_line_gzip(tmp_path / "huge.xml.gz", prefix, 8 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(InputFormatError, match=r"huge\.xml\.gz: record #1 is longer than "
                           r"200,000 bytes \(reading stopped at byte 2\d\d,\d{3}\)"):
            list(get_reader("docs", "pubmed-xml").read(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3_000_000, f"peak {peak:,} bytes"


# --- kb_sources.checks: the id and text rules every reader uses ---------------------------------

@pytest.mark.parametrize(("value", "ok"), [
    ("12345", True), ("0", True), ("1234567890", True), ("12345678901", False), ("", False),
    ("١٢٣", False), ("１２３", False), ("²³", False), ("12 ", False), ("-5", False),
    ("+5", False), ("12a", False), ("PMID:12", False),
])
def test_pmids_are_ascii_digits_only(value: str, ok: bool):
    assert is_pmid(value) is ok


def test_isdigit_is_not_enough():
    # why kb_sources.checks uses [0-9] regexes: str.isdigit accepts other scripts, and int()
    # reads some of them and crashes on others
    assert all(v.isdigit() for v in ("١٢٣", "１２３", "²³"))
    assert int("١٢٣") == 123
    with pytest.raises(ValueError):
        int("²³")


def test_ascii_int():
    assert is_ascii_int("007") and not is_ascii_int("٣") and not is_ascii_int("²")


@pytest.mark.parametrize(("value", "problem"), [
    ("X![px](http://host/p.png)[clickme](javascript:alert(1))",
     "document id 'X'... has '!' EXCLAMATION MARK (U+0021) at position 2"),
    ("doc 1", "document id 'doc'... has SPACE (U+0020) at position 4"),
    ("10.1000/xyz", "document id '10.1000'... has '/' SOLIDUS (U+002F) at position 8"),
    ("PMC\u200b1", "document id 'PMC'... has ZERO WIDTH SPACE (U+200B) at position 4"),
    ("a" * 65, "document id is 65 characters long"),
    ("", "document id is empty"),
])
def test_unsafe_document_ids_are_refused(value: str, problem: str, tmp_path: Path):
    with pytest.raises(InputFormatError) as info:
        check_doc_id(tmp_path / "x.jsonl", value, line=3)
    assert str(info.value).startswith(f"{tmp_path / 'x.jsonl'}, line 3: {problem}. Expected a "
                                      "PMID (ASCII digits) or an id of 1-64 characters from "
                                      "A-Z a-z 0-9 . _ : -. Fix: replace")


def test_safe_document_ids_pass():
    for value in ("12345", "PMC1234567", "NCT00000001", "doc_1", "a.b:c-d", "1.00000000"):
        assert check_doc_id("x", value) == value


@pytest.mark.parametrize(("text", "problem"), [
    ("a\x00b", "field 'title' holds a NUL character (U+0000) at character 2"),
    ("ok \ud800", "field 'title' holds a lone surrogate (U+D800) at character 4"),
    ("\udfff", "field 'title' holds a lone surrogate (U+DFFF) at character 1"),
    ("x" * 200_001, "field 'title' is 200,001 characters long"),
])
def test_text_that_cannot_be_stored_is_refused(text: str, problem: str):
    with pytest.raises(InputFormatError, match=r"^f\.txt, line 2, record 7: " + re.escape(problem)):
        check_text("f.txt", "title", text, line=2, record="7")


def test_paired_surrogates_and_other_text_pass():
    for text in ("emoji \U0001f600", "48\u00a0%", "tab\tand\ttext", ""):
        assert check_text("f", "title", text) == text


# --- kb_sources.read_stats ----------------------------------------------------------------------

def test_stats_warn_once_count_all_and_summarise(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG, logger="kb_sources.read_stats")
    stats = ReadStats("f.txt")
    stats.note(IssueKind.NOT_A_PMID, "'abc' dropped", line=3)
    stats.note(IssueKind.NOT_A_PMID, "'-5' dropped", line=9)
    stats.log_summary()
    [issue] = stats.issues
    assert (issue.kind, issue.count, issue.first) == (IssueKind.NOT_A_PMID, 2,
                                                       "line 3: 'abc' dropped")
    assert issue.summary() == ("2 non-PMID item(s) dropped from PMID lists "
                               "(first: line 3: 'abc' dropped)")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["f.txt, line 3: 'abc' dropped (further cases are counted)",
                        "f.txt: " + issue.summary()]


def test_duplicate_check_skips_identical_and_refuses_different():
    stats = ReadStats("f.tsv")
    check = DuplicateCheck("f.tsv", stats, what="evidence id", fix="keep one row")
    assert not check.is_repeat("15", ("a",), line=2)
    assert check.is_repeat("15", ("a",), line=5)
    assert stats.count(IssueKind.DUPLICATE) == 1
    with pytest.raises(InputFormatError, match=r"^f\.tsv, line 7: evidence id '15' repeats line "
                       r"2 with different content. Expected each evidence id once per file. "
                       r"Fix: keep one row$"):
        check.is_repeat("15", ("b",), line=7)
