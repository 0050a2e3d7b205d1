"""Tests of the MeSH tree and headings readers (kb_sources.mesh)."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest

from kb_sources.errors import InputFormatError
from kb_sources.mesh import MeshTree, iter_mesh_entries, read_mesh_headings, read_mesh_trees

MTREES = Path("mesh_trees/mtrees2019.bin.gz")
HEADINGS = Path("abstract_pool/pmid_mesh_headings.tsv.gz")


@pytest.fixture(scope="module")
def sample(fixtures_dir: Path) -> MeshTree:
    return read_mesh_trees(fixtures_dir / "mtrees_sample.bin")


@pytest.fixture(scope="module")
def mesh2019(data_dir: Path) -> MeshTree:
    return read_mesh_trees(data_dir / MTREES)


def _write(tmp_path: Path, text: str | bytes, name: str = "bad.bin") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


# --- tree: fixture ---------------------------------------------------------------------------

def test_sample_lookups(sample: MeshTree, fixtures_dir: Path) -> None:
    assert len(sample) == 8
    assert len(list(iter_mesh_entries(fixtures_dir / "mtrees_sample.bin"))) == 10
    assert sample.tree_numbers("Breast Neoplasms") == ("C04.588.180", "C17.800.090.500")
    assert sample.number_terms["C17.800.090"] == "Breast Diseases"
    assert "Breast Neoplasms" in sample and "Female" not in sample


def test_ancestors_nearest_first_over_all_paths(sample: MeshTree) -> None:
    assert sample.ancestors("Triple Negative Breast Neoplasms") == [
        "Breast Neoplasms",  # distance 1 on both paths, listed once
        "Neoplasms by Site", "Breast Diseases",  # distance 2
        "Neoplasms", "Skin Diseases",  # distance 3
        "Skin and Connective Tissue Diseases",  # distance 4
    ]
    assert sample.ancestors("Neoplasms") == []


def test_depth_is_the_shallowest_position(sample: MeshTree) -> None:
    assert sample.depth("Neoplasms") == 1
    assert sample.depth("Anatomy Stub") == 1
    assert sample.depth("Breast Neoplasms") == 3  # C04.588.180 (3) beats C17.800.090.500 (4)
    assert sample.depth("Triple Negative Breast Neoplasms") == 4


def test_unknown_term_and_immutability(sample: MeshTree) -> None:
    with pytest.raises(KeyError, match="unknown MeSH descriptor 'Female'"):
        sample.depth("Female")
    with pytest.raises(KeyError, match="unknown MeSH descriptor"):
        sample.ancestors("Female")
    with pytest.raises(TypeError):
        sample.term_numbers["Female"] = ("Z99",)  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.term_numbers = {}  # type: ignore[misc]


# --- tree: real data -------------------------------------------------------------------------

def test_mtrees2019_counts(mesh2019: MeshTree, data_dir: Path) -> None:
    assert sum(1 for _ in iter_mesh_entries(data_dir / MTREES)) == 59_746
    assert len(mesh2019.number_terms) == 59_746
    assert len(mesh2019) == 29_349


def test_mtrees2019_breast_neoplasms(mesh2019: MeshTree) -> None:
    # from the file: Breast Neoplasms;C04.588.180 and ;C17.800.090.500
    assert mesh2019.tree_numbers("Breast Neoplasms") == ("C04.588.180", "C17.800.090.500")
    assert mesh2019.ancestors("Breast Neoplasms") == [
        "Neoplasms by Site",  # C04.588
        "Breast Diseases",  # C17.800.090
        "Neoplasms",  # C04
        "Skin Diseases",  # C17.800
        "Skin and Connective Tissue Diseases",  # C17
    ]
    assert mesh2019.depth("Breast Neoplasms") == 3
    assert mesh2019.depth("Neoplasms") == 1
    assert mesh2019.depth("Triple Negative Breast Neoplasms") == 4  # C04.588.180.788
    assert mesh2019.depth("Mammary Glands, Human") == 3  # A01.236.249 and A10.336.532
    assert mesh2019.ancestors("Mammary Glands, Human")[:2] == ["Breast", "Exocrine Glands"]
    assert mesh2019.depth("Humans") == 11  # B01.050.150.900.649.313.988.400.112.400.400
    assert "Female" not in mesh2019  # check tags have no tree number


# --- tree: malformed input -------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("Neoplasms;C04\nNeoplasms C04.588\n", r"line 2: line 'Neoplasms C04.588' is not "
     "'Term;TreeNumber'"),
    ("Neoplasms;C04\n;C05\n", r"line 2: line ';C05' is not 'Term;TreeNumber'"),
    ("Neoplasms;C4.58\n", r"line 1: tree number 'C4.58' is malformed"),
    # Arabic-Indic / fullwidth digits matched the \d of the old pattern (issue 12)
    ("Neoplasms;C04\nNeoplasms by Site;C٠٤.588\n", r"line 2: tree number 'C٠٤.588' is malformed"),
    ("Neoplasms;C０４\n", r"line 1: tree number 'C０４' is malformed"),
    ("Neoplasms;C04\nTumours;C04\n", r"line 2: tree number C04 is listed for 'Neoplasms' and "
     "'Tumours'"),
])
def test_bad_tree_lines(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputFormatError, match=r"bad\.bin, " + message + ".*Fix: use the NLM"):
        read_mesh_trees(_write(tmp_path, text))


def test_tree_bad_utf8_empty_and_truncated(tmp_path: Path, fixtures_dir: Path) -> None:
    with pytest.raises(InputFormatError, match=r"bad\.bin, line 2: invalid UTF-8"):
        read_mesh_trees(_write(tmp_path, b"Neoplasms;C04\nN\xe9oplasmes;C05\n"))
    with pytest.raises(InputFormatError, match=r"empty\.bin: file is empty"):
        read_mesh_trees(_write(tmp_path, b"", "empty.bin"))
    data = gzip.compress((fixtures_dir / "mtrees_sample.bin").read_bytes() * 50)
    with pytest.raises(InputFormatError, match=r"cut\.bin\.gz: compressed data is truncated"):
        read_mesh_trees(_write(tmp_path, data[: len(data) // 2], "cut.bin.gz"))
    with pytest.raises(InputFormatError,
                       match=r"long\.bin, line 1: line is longer than 1,000,000 bytes"):
        read_mesh_trees(_write(tmp_path, "x" * 1_000_001 + ";C04\n", "long.bin"))


# --- headings --------------------------------------------------------------------------------

def test_headings_grouped_by_pmid(tmp_path: Path) -> None:
    path = _write(tmp_path, "pmid\tdescriptor\tmajor_topic\n1\tHumans\tN\n2\tMice\tN\n"
                  "1\tNeoplasms\tY\n1\tHumans\tN\n", "headings.tsv")
    assert list(read_mesh_headings(path)) == [("1", ("Humans", "Neoplasms")), ("2", ("Mice",))]


def test_real_headings(data_dir: Path) -> None:
    headings = dict(read_mesh_headings(data_dir / HEADINGS))
    assert len(headings) == 1098
    assert sum(len(v) for v in headings.values()) == 15_923
    assert headings["17942999"][:3] == ("Acoustic Stimulation", "Adult",
                                        "Data Interpretation, Statistical")


def test_bad_headings(tmp_path: Path) -> None:
    path = _write(tmp_path, "pmid\tdescriptor\n1\tHumans\nPMID2\tMice\n", "h.tsv")
    with pytest.raises(InputFormatError, match=r"h\.tsv, line 3: pmid 'PMID2' is not a PMID"):
        list(read_mesh_headings(path))
    path = _write(tmp_path, "pmid\tdescriptor\n1\t \n", "h.tsv")
    with pytest.raises(InputFormatError, match=r"h\.tsv, line 2: empty descriptor"):
        list(read_mesh_headings(path))
    path = _write(tmp_path, "pmid,descriptor\n1,Humans\n", "h.tsv")
    with pytest.raises(InputFormatError, match=r"h\.tsv, line 1: missing column\(s\) 'pmid', "
                       "'descriptor'.*comma-separated"):
        list(read_mesh_headings(path))
