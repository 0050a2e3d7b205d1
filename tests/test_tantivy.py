"""The Tantivy lexical retriever (retrievers/tantivy_index.py, issue 37): an optional extra.

The default install leaves tantivy out: then the registry does not list it and asking for it
names the extra. Where it is installed (``pip install 'kbcurate[scale]'``), the retriever contract
suite (tests/test_retriever_contract.py) runs against it like every registered retriever, and the
tests below check what is Tantivy's own: the project's tokens (variants whole), rankings close to
bm25s', saves as hard links, a loaded index that ``add`` never changes on disk.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from retrievers import RetrieverError, build_retriever, load_retriever
from retrievers.registry import retriever_names

INSTALLED = find_spec("tantivy") is not None
needs_tantivy = pytest.mark.skipif(not INSTALLED, reason="tantivy is an optional extra "
                                   "(pip install 'kbcurate[scale]')")
CORPUS = [
    ("d1", "BRAF p.V600E mutation in melanoma responds to vemurafenib"),
    ("d2", "BRAF V600K melanoma treated with dabrafenib and trametinib"),
    ("d3", "EGFR L858R lung cancer responds to erlotinib"),
    ("d4", "EML4-ALK fusion lung cancer treated with crizotinib"),
    ("d5", "TNF-α signalling in rheumatoid arthritis"),
]


def test_registered_only_where_installed_and_otherwise_names_the_extra():
    assert ("tantivy" in retriever_names()) is INSTALLED
    if not INSTALLED:
        with pytest.raises(RetrieverError, match=r"pip install 'kbcurate\[scale\]'"):
            build_retriever("tantivy")


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    from retrievers.tantivy_index import import_tantivy

    monkeypatch.setitem(sys.modules, "tantivy", None)  # import fails as if not installed
    with pytest.raises(RetrieverError, match=r"needs the tantivy package.*kbcurate\[scale\]"):
        import_tantivy()


@needs_tantivy
def test_biomedical_tokens_stay_whole():
    r = build_retriever("tantivy")
    r.index(CORPUS, progress=False)
    assert r.search("V600E", k=5)[0].doc_id == "d1"  # p.V600E is also indexed as V600E
    assert [h.doc_id for h in r.search("EML4 ALK", k=5)] == ["d4"]
    assert [h.doc_id for h in r.search("TNF-alpha", k=5)] == ["d5"]
    assert r.search("the and of", k=5) == []  # stopwords only


@needs_tantivy
def test_rankings_agree_with_bm25s():
    queries = ["BRAF melanoma", "lung cancer erlotinib", "crizotinib fusion", "vemurafenib"]
    tantivy, bm25 = build_retriever("tantivy"), build_retriever("bm25")
    for r in (tantivy, bm25):
        r.index(CORPUS, progress=False)
    for q in queries:
        assert [h.doc_id for h in tantivy.search(q, k=3)] == \
            [h.doc_id for h in bm25.search(q, k=3)], q


@needs_tantivy
def test_save_hard_links_and_add_after_load_leaves_the_save_unchanged(tmp_path: Path):
    r = build_retriever("tantivy", work_dir=str(tmp_path / "work"))
    r.index(CORPUS, progress=False)
    saved = r.save(tmp_path / "saved")
    files = {p.name: p.stat() for p in (saved / "tantivy").iterdir()}
    assert any(s.st_nlink > 1 for s in files.values())  # linked to the working index
    loaded = load_retriever(saved)
    loaded.add([("d6", "KRAS G12C sotorasib")], progress=False)
    assert loaded.search("sotorasib", k=2)[0].doc_id == "d6"
    after = {p.name: p.stat().st_mtime_ns for p in (saved / "tantivy").iterdir()
             if not p.name.startswith(".tantivy")}
    assert after == {n: s.st_mtime_ns for n, s in files.items() if not n.startswith(".tantivy")}
    assert load_retriever(saved).search("sotorasib", k=2) == []


@needs_tantivy
def test_bad_writer_settings_say_how_to_fix():
    with pytest.raises(RetrieverError, match="heap_mb of at least 15 per thread"):
        build_retriever("tantivy", heap_mb=10, threads=2)
