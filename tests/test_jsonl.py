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
    with pytest.raises(InputFormatError, match=r"bad\.jsonl, line 1: line is 1,200,\d+ bytes"):
        list(read_jsonl(path))


def test_absurdly_long_field(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD, {"pmid": "2", "abstract": "x" * 300_000})
    with pytest.raises(InputFormatError, match=r"bad\.jsonl, line 2, record 2: field 'abstract' "
                       "is 300,000 characters long"):
        list(read_jsonl(path))
