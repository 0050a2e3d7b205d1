"""Tests of the MEDLINE text reader (kb_sources.medline)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from kb_sources.errors import InputFormatError
from kb_sources.medline import mesh_descriptor, read_medline
from kb_sources.registry import get_reader


def _write(tmp_path: Path, body: str | bytes, name: str = "bad.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(body.encode() if isinstance(body, str) else body)
    return path


def test_sample_fields(fixtures_dir: Path) -> None:
    first, second = read_medline(fixtures_dir / "medline_sample.txt")
    assert first.doc_id == "90000011"
    assert first.title == ("EGFR T790M and resistance to gefitinib: a hand-made record for "
                           "testing.")
    assert first.abstract == ("BACKGROUND: Gefitinib responses end when EGFR T790M arises. "
                              "RESULTS: The mutation was found in 5 of 9 biopsies.")
    assert (first.journal, first.year, first.source) == ("Hypothetical oncology", 2015, "medline")
    assert first.mesh == ("Drug Resistance, Neoplasm", "ErbB Receptors", "Humans")
    assert (second.doc_id, second.abstract, second.year) == ("90000012", "", 1998)
    assert second.journal == "Imag Med"  # TA when there is no JT


def test_registry_and_gzip(fixtures_dir: Path, tmp_path: Path) -> None:
    path = fixtures_dir / "medline_sample.txt"
    gz = _write(tmp_path, gzip.compress(path.read_bytes()), "sample.txt.gz")
    assert list(read_medline(gz)) == list(get_reader("docs", "medline").read(path))


@pytest.mark.parametrize(("heading", "descriptor"), [
    ("*Software", "Software"),
    ("Sequence Alignment/*methods", "Sequence Alignment"),
    ("Databases, Protein", "Databases, Protein"),
    ("Neoplasms/genetics/*therapy", "Neoplasms"),
])
def test_mesh_descriptor(heading: str, descriptor: str) -> None:
    assert mesh_descriptor(heading) == descriptor


def test_real_biopython_files(data_dir: Path) -> None:
    folder = data_dir / "medline_sample"
    docs = [d for f in sorted(folder.glob("biopython_medline_pubmed_result*.txt"))
            for d in read_medline(f)]
    assert [d.doc_id for d in docs] == [
        "12230038", "16403221", "16377612", "14871861", "14630660", "23039619"]
    first = docs[0]
    assert first.title == "The Bio* toolkits--a brief overview."
    assert first.abstract.startswith("Bioinformatics research is often difficult to do with "
                                     "commercial software. The Open Source BioPerl")
    assert (first.journal, first.year) == ("Briefings in bioinformatics", 2002)
    assert first.mesh == ("Computational Biology", "Computer Systems", "Humans", "Internet",
                          "Programming Languages", "Software", "User-Computer Interface")
    assert "Information Storage and Retrieval" in docs[1].mesh
    assert all(d.title and d.abstract and d.year for d in docs)


# --- malformed input -------------------------------------------------------------------------

def test_not_medline_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "PMID- 1\nTI  - ok\n\n{\"pmid\": \"2\"}\n")
    with pytest.raises(InputFormatError, match=r"bad\.txt, line 4: not a 'TAG - value' line: "
                       r"'\{\"pmid\": \"2\"\}'.*Fix: export from PubMed"):
        list(read_medline(path))


def test_continuation_outside_record(tmp_path: Path) -> None:
    path = _write(tmp_path, "\n      dangling text\nPMID- 1\n")
    with pytest.raises(InputFormatError, match=r"line 2: continuation line outside a record"):
        list(read_medline(path))


def test_record_without_pmid_names_its_first_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "PMID- 1\nTI  - one\n\nTI  - two\nAB  - no id\n")
    with pytest.raises(InputFormatError, match=r"bad\.txt, line 4: record has no numeric PMID "
                       r"\(found ''\)"):
        list(read_medline(path))


def test_bad_utf8(tmp_path: Path) -> None:
    path = _write(tmp_path, b"PMID- 1\nTI  - Caf\xe9\n")
    with pytest.raises(InputFormatError, match=r"bad\.txt, line 2: invalid UTF-8 byte"):
        list(read_medline(path))


def test_truncated_gzip(fixtures_dir: Path, tmp_path: Path) -> None:
    data = gzip.compress((fixtures_dir / "medline_sample.txt").read_bytes() * 50)
    path = _write(tmp_path, data[: len(data) // 2], "cut.txt.gz")
    with pytest.raises(InputFormatError, match=r"cut\.txt\.gz: compressed data is truncated"):
        list(read_medline(path))


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match=r"empty\.txt: file is empty"):
        list(read_medline(_write(tmp_path, "", "empty.txt")))


def test_blank_file(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match=r"blank\.txt: file has no content"):
        list(read_medline(_write(tmp_path, "\n\n  \n", "blank.txt")))


def test_absurdly_long_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "PMID- 1\nAB  - " + "x" * 1_100_000 + "\n")
    with pytest.raises(InputFormatError,
                       match=r"bad\.txt, line 2: line is longer than 1,000,000 bytes"):
        list(read_medline(path))


def test_absurdly_long_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "PMID- 7\nAB  - " + "x" * 250_000 + "\n")
    with pytest.raises(InputFormatError, match=r"bad\.txt, line 1, record 7: field 'AB' is "
                       "250,000 characters long"):
        list(read_medline(path))


@pytest.mark.parametrize(("body", "message"), [
    ("PMID- 7\nTI  - Ti\x00tle\n", r"line 2: NUL byte at column 9. Expected UTF-8 text without "
     "NUL bytes"),
    ("PMID- ١٢٣\nTI  - Title\n", r"line 1: record has no numeric PMID \(found '١٢٣'\)"),
    ("PMID- ²³\nTI  - Title\n", r"line 1: record has no numeric PMID \(found '²³'\)"),
])
def test_nul_and_non_ascii_pmids_are_refused(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(InputFormatError, match=r"bad\.txt, " + message):
        list(read_medline(_write(tmp_path, body)))


# --- issue 28: repeated PMIDs and binary files -------------------------------------------------

def test_pmid_repeated_with_another_title_is_refused(tmp_path: Path) -> None:
    """Issue 28: the later record silently replaced the earlier one (JSONL refuses this)."""
    body = ("PMID- 90000011\nTI  - First title.\n\n"
            "PMID- 90000012\nTI  - Other.\n\n"
            "PMID- 90000011\nTI  - Another title.\n")
    with pytest.raises(InputFormatError, match=(
            r"bad\.txt, line 7: PMID '90000011' repeats line 1 with different content\. "
            r"Expected each PMID once per file\. Fix: keep one record per PMID")):
        list(read_medline(_write(tmp_path, body)))


def test_identical_repeat_is_skipped_and_counted(tmp_path: Path) -> None:
    record = "PMID- 90000011\nTI  - Same title.\nAB  - Same abstract.\n"
    result = get_reader("docs", "medline").read(_write(tmp_path, f"{record}\n{record}"))
    assert [d.doc_id for d in result] == ["90000011"]
    [issue] = result.issues
    assert issue.summary() == ("1 identical repeated record(s) skipped (first: line 5: PMID "
                               "'90000011' repeats line 1 unchanged; the repeat is skipped)")


def _random_bytes(seed: int, size: int = 3072, *, without_nul: bool = False) -> bytes:
    data = random.Random(seed).randbytes(size)
    return data.replace(b"\x00", b"\x01") if without_nul else data


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("without_nul", [False, True])
def test_random_bytes_are_not_medline(tmp_path: Path, seed: int, without_nul: bool) -> None:
    """Issue 28: 3 KB of random bytes once said "file has no content (only blank lines)"."""
    path = _write(tmp_path, _random_bytes(seed, without_nul=without_nul), "noise.bin")
    with pytest.raises(InputFormatError, match=(
            r"noise\.bin: file is not MEDLINE/PubMed data \(text or XML\): it is binary or not "
            r"decodable as UTF-8 text \(\d[\d,]* of [\d,]+ characters in its first 3,072 bytes "
            r"are control characters or not UTF-8\)\. Expected MEDLINE text")):
        list(read_medline(path))


def test_gzipped_random_bytes_are_not_medline(tmp_path: Path) -> None:
    path = _write(tmp_path, gzip.compress(_random_bytes(7, 8000)), "noise.txt.gz")
    with pytest.raises(InputFormatError, match=r"noise\.txt\.gz: file is not MEDLINE/PubMed "
                       r"data .*first 4,096 bytes"):
        list(read_medline(path))


@pytest.mark.parametrize(("body", "message"), [
    # a Latin-1 title: one bad byte among text keeps the line-level message and its fix
    (b"PMID- 1\nTI  - Caf\xe9 au lait spots in NF1.\n", r"line 2: invalid UTF-8 byte b'\\xe9'"),
    # UTF-16 keeps the NUL message that says how to convert it
    ("PMID- 1\nTI  - Title\n".encode("utf-16-le"), r"line 1: NUL byte at column 2.*UTF-16"),
])
def test_text_in_another_encoding_keeps_its_own_message(tmp_path: Path, body: bytes,
                                                        message: str) -> None:
    with pytest.raises(InputFormatError, match=r"bad\.txt, " + message):
        list(read_medline(_write(tmp_path, body)))
