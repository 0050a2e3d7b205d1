"""Tests of the citation-edge reader (kb_sources.citations)."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from kb_sources.citations import read_citation_edges
from kb_sources.errors import InputFormatError

DIABETES = Path("citations/pubmed_diabetes_cites.tsv.gz")
XML_EDGES = Path("citations/xml_sample_citation_edges.tsv.gz")


def _write(tmp_path: Path, text: str | bytes, name: str = "bad.tsv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_sample_with_extra_column_and_blank_line(fixtures_dir: Path) -> None:
    assert list(read_citation_edges(fixtures_dir / "citations_sample.tsv")) == [
        ("90000001", "21639808"), ("90000001", "12068308"), ("90000021", "21639808")]


def test_two_column_layout(tmp_path: Path) -> None:
    path = _write(tmp_path, "citing_pmid\tcited_pmid\n1\t2\n 3 \t4\n", "edges.tsv")
    assert list(read_citation_edges(path)) == [("1", "2"), ("3", "4")]


def test_real_pubmed_diabetes_graph(data_dir: Path) -> None:
    edges = list(read_citation_edges(data_dir / DIABETES))
    assert len(edges) == 44_338
    assert edges[0] == ("19127292", "17363749")
    assert len({p for edge in edges for p in edge}) == 19_717


def test_real_xml_sample_edges(data_dir: Path) -> None:
    edges = list(read_citation_edges(data_dir / XML_EDGES))
    assert len(edges) == 4_022
    assert edges[0] == ("27797938", "2657958")
    assert len({citing for citing, _ in edges}) == 87
    assert Counter(citing for citing, _ in edges)["29963580"] == 49  # PubMed ReferenceList


# --- malformed input -------------------------------------------------------------------------

def test_non_numeric_pmid_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "citing_pmid\tcited_pmid\n1\t2\npaper:3\t4\n")
    with pytest.raises(InputFormatError, match=r"bad\.tsv, line 3: citing_pmid 'paper:3' is not "
                       "a PMID.*Fix: strip prefixes"):
        list(read_citation_edges(path))


def test_missing_cited_value(tmp_path: Path) -> None:
    path = _write(tmp_path, "citing_pmid\tcited_pmid\n1\n")
    with pytest.raises(InputFormatError, match=r"bad\.tsv, line 2: cited_pmid '' is not a PMID"):
        list(read_citation_edges(path))


def test_header_is_required(tmp_path: Path) -> None:
    path = _write(tmp_path, "19127292\t17363749\n")
    with pytest.raises(InputFormatError, match=r"bad\.tsv, line 1: missing column\(s\) "
                       "'citing_pmid', 'cited_pmid'"):
        list(read_citation_edges(path))


def test_bad_utf8_empty_truncated_and_long(tmp_path: Path, fixtures_dir: Path) -> None:
    with pytest.raises(InputFormatError, match=r"bad\.tsv, line 2: invalid UTF-8"):
        list(read_citation_edges(_write(tmp_path, b"citing_pmid\tcited_pmid\n1\t\xff2\n")))
    with pytest.raises(InputFormatError, match=r"empty\.tsv: file is empty"):
        list(read_citation_edges(_write(tmp_path, b"", "empty.tsv")))
    data = gzip.compress((fixtures_dir / "citations_sample.tsv").read_bytes() * 200)
    with pytest.raises(InputFormatError, match=r"cut\.tsv\.gz: compressed data is truncated"):
        list(read_citation_edges(_write(tmp_path, data[: len(data) // 2], "cut.tsv.gz")))
    long_row = "citing_pmid\tcited_pmid\n1\t" + "9" * 300_000 + "\n"
    with pytest.raises(InputFormatError, match=r"long\.tsv, line 2: field 'cited_pmid' is "
                       "300,000 characters long"):
        list(read_citation_edges(_write(tmp_path, long_row, "long.tsv")))
