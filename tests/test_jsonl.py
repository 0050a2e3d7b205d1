"""Tests of the JSON Lines document reader (kb_sources.jsonl)."""

from __future__ import annotations

import gzip
import json
import logging
import time
from collections import Counter
from pathlib import Path

import pytest

from kb_sources.errors import InputFormatError
from kb_sources.jsonl import read_jsonl
from kb_sources.registry import get_reader

POOL = Path("abstract_pool/abstract_pool.jsonl.gz")
logger = logging.getLogger(__name__)


def _write(tmp_path: Path, *lines: str | dict, name: str = "bad.jsonl") -> Path:
    path = tmp_path / name
    text = "\n".join(json.dumps(x) if isinstance(x, dict) else x for x in lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = {"pmid": "1", "title": "T", "abstract": "A"}


def test_sample_fields(fixtures_dir: Path) -> None:
    first, second, third = read_jsonl(fixtures_dir / "docs_sample.jsonl")
    assert first.doc_id == "90000021"
    assert first.title == "KRAS G12C inhibitors."
    assert first.abstract == "Sotorasib targets KRAS G12C."
    assert (first.journal, first.year, first.source) == ("Hypothetical oncology", 2021, "hand-made")
    assert first.mesh == ("Humans", "Proto-Oncogene Proteins p21(ras)")
    assert first.references == ("21639808", "12068308")  # integers accepted as PMIDs
    assert (second.doc_id, second.title, second.year, second.source) == (
        "90000022", "", 2018, "jsonl")  # integer pmid, year as a string, default source
    assert (third.doc_id, third.abstract) == ("NCT00000001", "")  # doc_id, null abstract


def test_registry_gzip_and_source_option(fixtures_dir: Path, tmp_path: Path) -> None:
    path = fixtures_dir / "docs_sample.jsonl"
    gz = tmp_path / "docs.jsonl.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert list(read_jsonl(gz)) == list(get_reader("docs", "jsonl").read(path))
    assert [d.source for d in read_jsonl(path, source="mine")] == ["hand-made", "mine", "mine"]


def test_real_abstract_pool_loads_fast(data_dir: Path) -> None:
    start = time.perf_counter()
    docs = list(read_jsonl(data_dir / POOL))
    elapsed = time.perf_counter() - start
    logger.info("read %d pool documents in %.2f s", len(docs), elapsed)
    assert len(docs) == 12_393
    assert len({d.doc_id for d in docs}) == 12_393
    assert Counter(d.source for d in docs) == {
        "bc6pm": 5509, "hoc": 1848, "bc5cdr": 1296, "pubmedqa": 1000, "ncbi_disease": 677,
        "seth": 627, "biored": 600, "medline_sample": 526, "tmvar": 303,
        "biopython_entrez_sample": 7,
    }
    assert sum(bool(d.title) for d in docs) == 8918
    assert docs[0].doc_id == "9685346"
    assert docs[0].title.startswith("The molecular basis of Rieger syndrome.")
    assert elapsed < 10, f"reading the pool took {elapsed:.1f} s (measured ~0.2 s)"


# --- malformed input -------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "message"), [
    ('{"pmid": "1", "title": "T"', r"line 2: invalid JSON at column 27: Expecting ',' delimiter"),
    ("[1, 2]", r"line 2: line holds a JSON list, not an object"),
    ({"title": "T"}, r"line 2: no 'pmid' and 'doc_id' is None.*Fix: add an id"),
    ({"pmid": "PMID:7", "title": "T"}, r"line 2: 'pmid' is 'PMID:7'.*use 'doc_id'"),
    ({"pmid": True, "title": "T"}, r"line 2: 'pmid' is True"),
    ({"pmid": "7", "title": ["T"]}, r"line 2: 'title' is a list. Expected a string"),
    ({"pmid": "7", "title": "T", "mesh": "Humans"}, r"line 2: 'mesh' is \"Humans\". Expected a "
     "list of strings"),
    ({"pmid": "7", "title": "T", "references": ["doi:10.1/x"]}, r"line 2: 'references' holds "
     "'doi:10.1/x'. Expected PMIDs"),
    ({"pmid": "7", "title": "T", "year": "2019a"}, r"line 2: 'year' is '2019a'. Expected a "
     "4-digit year"),
    ({"pmid": "7", "title": " ", "abstract": None}, r"line 2: record 7 has neither title nor "
     "abstract"),
])
def test_bad_records_name_file_and_line(tmp_path: Path, line: str | dict, message: str) -> None:
    path = _write(tmp_path, GOOD, line)
    docs = read_jsonl(path)
    assert next(docs).doc_id == "1"
    with pytest.raises(InputFormatError, match=r"bad\.jsonl, " + message):
        next(docs)


def test_bad_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"pmid": "1", "title": "Caf\xe9"}\n')
    with pytest.raises(InputFormatError, match=r"bad\.jsonl, line 1: invalid UTF-8 byte b'\\xe9'"):
        list(read_jsonl(path))


def test_truncated_gzip(fixtures_dir: Path, tmp_path: Path) -> None:
    data = gzip.compress((fixtures_dir / "docs_sample.jsonl").read_bytes() * 20)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFormatError, match=r"cut\.jsonl\.gz: compressed data is truncated"):
        list(read_jsonl(path))


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(InputFormatError, match=r"empty\.jsonl: file is empty"):
        list(read_jsonl(path))


def test_absurdly_long_line(tmp_path: Path) -> None:
    path = _write(tmp_path, {"pmid": "1", "abstract": "x" * 1_200_000})
    with pytest.raises(InputFormatError,
                       match=r"bad\.jsonl, line 1: line is longer than 1,000,000 bytes"):
        list(read_jsonl(path))


def test_absurdly_long_field(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD, {"pmid": "2", "abstract": "x" * 300_000})
    with pytest.raises(InputFormatError, match=r"bad\.jsonl, line 2, record 2: field 'abstract' "
                       "is 300,000 characters long"):
        list(read_jsonl(path))


# ------------------------------------------ issue 12: inputs that crashed or slipped through

@pytest.mark.parametrize(("line", "message"), [
    ('{"pmid": "7", "mesh": ' + "[" * 3000 + "]" * 3000 + "}",
     r"line 2: JSON arrays/objects are nested too deeply to parse. Expected a flat JSON object"),
    ('{"pmid": ' + "9" * 5000 + ', "title": "T"}',
     r"line 2: a JSON number cannot be converted \(Exceeds the limit \(4300 digits\)"),
    ('{"pmid": "7", "title": "a\\ud800b"}',
     r"line 2, record 7: field 'title' holds a lone surrogate \(U\+D800\) at character 2. "
     "Expected text without NUL characters or unpaired UTF-16 surrogates"),
    ('{"pmid": "7", "title": "T", "journal": "J\\u0000"}',
     r"line 2, record 7: field 'journal' holds a NUL character \(U\+0000\) at character 2"),
    ('{"pmid": "7", "title": "T", "mesh": ["Hu\\u0000mans"]}',
     r"line 2, record 7: field 'mesh' holds a NUL character"),
    ({"doc_id": "X![px](http://host/p.png)[clickme](javascript:alert(1))", "title": "T"},
     r"line 2: document id 'X'\.\.\. has '!' EXCLAMATION MARK \(U\+0021\) at position 2. "
     r"Expected a PMID \(ASCII digits\) or an id of 1-64 characters from A-Z a-z 0-9 \. _ : -"),
    ({"doc_id": "doc 1", "title": "T"}, r"line 2: document id 'doc'\.\.\. has SPACE"),
    ({"pmid": "٧", "title": "T"}, r"line 2: 'pmid' is '٧'. Expected 1-10 ASCII digits"),
    ({"pmid": 12345678901, "title": "T"}, r"line 2: 'pmid' is 12345678901. Expected 1-10"),
    ({"pmid": "7", "title": "T", "references": ["²³"]},
     r"line 2: 'references' holds '²³'. Expected PMIDs \(1-10 ASCII digits\)"),
])
def test_input_that_crashed_or_slipped_through(tmp_path: Path, line: str | dict,
                                               message: str) -> None:
    path = _write(tmp_path, GOOD, line)
    with pytest.raises(InputFormatError, match=r"bad\.jsonl, " + message):
        list(read_jsonl(path))


def test_identical_repeat_is_skipped_and_counted(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    path = _write(tmp_path, GOOD, {"pmid": 2, "title": "T"}, {"pmid": "1", "title": "T",
                                                              "abstract": "A"})
    result = get_reader("docs", "jsonl").read(path)
    assert [d.doc_id for d in result] == ["1", "2"]
    [issue] = result.issues
    assert issue.summary() == ("1 identical repeated record(s) skipped (first: line 3: document "
                               "id '1' repeats line 1 unchanged; the repeat is skipped)")
    assert (f"{path}, line 3: document id '1' repeats line 1 unchanged; the repeat is skipped "
            "(further cases are counted)") in caplog.text


def test_repeat_with_different_content_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD, {"pmid": "2", "title": "T"}, {**GOOD, "title": "Other"})
    with pytest.raises(InputFormatError,
                       match=r"bad\.jsonl, line 3: document id '1' repeats line 1 with different "
                             r"content. Expected each document id once per file. Fix: keep one "
                             r"line per document"):
        list(read_jsonl(path))


def test_utf16_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(GOOD).encode("utf-16-le"))
    with pytest.raises(InputFormatError, match=r"bad\.jsonl, line 1: NUL byte at column 2. "
                       r"Expected UTF-8 text without NUL bytes. Fix: the file may be UTF-16"):
        list(read_jsonl(path))
