"""Index saves are all-or-nothing: a failed or killed save leaves the previous index readable,
leftovers of dead saves are cleaned on the next load, and a reader never mixes two saves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from curation.search.indexing import CORPUS_FILE, get_index, index_folder, saved_fingerprint
from curation.store.importer import import_file
from retrievers import RetrieverError
from retrievers.bm25 import BM25Retriever
from retrievers.registry import load_retriever
from retrievers.saved import MANIFEST, OLD_TAG, TMP_TAG, replace_folder

OLD_DOCS = [("d1", "BRAF V600E melanoma"), ("d2", "KRAS G12C lung cancer")]
NEW_DOCS = [("n1", "EGFR T790M osimertinib"), ("n2", "BRAF V600E dabrafenib")]
FIXTURES = Path(__file__).parent / "fixtures"


def bm25(docs) -> BM25Retriever:
    r = BM25Retriever.from_options()
    r.index(docs, progress=False)
    return r


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith("."))


def fail_midway(folder: Path) -> dict:
    (folder / "vocab.json").write_text("[", encoding="utf-8")  # a half-written file
    raise KeyboardInterrupt("killed while saving")


def test_a_save_that_fails_midway_keeps_the_previous_index(tmp_path, monkeypatch):
    folder = tmp_path / "idx"
    bm25(OLD_DOCS).save(folder)
    monkeypatch.setattr(BM25Retriever, "_save", lambda self, f: fail_midway(f))
    with pytest.raises(KeyboardInterrupt):
        bm25(NEW_DOCS).save(folder)
    loaded = load_retriever(folder)
    assert loaded.doc_ids == ["d1", "d2"]
    assert [h.doc_id for h in loaded.search("BRAF", 5)] == ["d1"]
    assert hidden(folder) == []  # the temporary folder went with the failure


def test_a_save_replaces_the_folder_and_leaves_nothing_behind(tmp_path):
    folder = tmp_path / "idx"
    bm25(OLD_DOCS).save(folder)
    bm25(NEW_DOCS).save(folder)
    assert load_retriever(folder).doc_ids == ["n1", "n2"]
    assert hidden(folder) == []


def make_leftover(folder: Path, tag: str, pid: int, docs=None) -> Path:
    path = folder.parent / f".{folder.name}{tag}{pid}-0badcafe"
    if docs is not None:
        bm25(docs).save(path)
    else:
        path.mkdir()
        (path / "ids.json").write_text('["n1"]', encoding="utf-8")
    return path


def test_a_save_killed_between_its_renames_is_restored_on_load(tmp_path):
    folder = tmp_path / "idx"
    pid = dead_pid()
    make_leftover(folder, OLD_TAG, pid, OLD_DOCS)  # the previous index, moved aside
    make_leftover(folder, TMP_TAG, pid)  # the unfinished new one
    loaded = load_retriever(folder)
    assert loaded.doc_ids == ["d1", "d2"]
    assert (folder / MANIFEST).is_file() and hidden(folder) == []


def test_leftovers_of_dead_saves_are_removed_when_the_index_is_complete(tmp_path):
    folder = tmp_path / "idx"
    bm25(NEW_DOCS).save(folder)
    pid = dead_pid()
    make_leftover(folder, OLD_TAG, pid, OLD_DOCS)
    make_leftover(folder, TMP_TAG, pid)
    assert load_retriever(folder).doc_ids == ["n1", "n2"]
    assert hidden(folder) == []


def test_a_live_saves_folders_are_left_alone_and_read_where_they_lie(tmp_path):
    folder = tmp_path / "idx"
    aside = make_leftover(folder, OLD_TAG, 1, OLD_DOCS)  # pid 1 never dies: a swap under way
    tmp = make_leftover(folder, TMP_TAG, 1)
    assert load_retriever(folder).doc_ids == ["d1", "d2"]
    assert not folder.exists() and aside.is_dir() and tmp.is_dir()


def test_a_half_written_folder_gives_a_clear_error(tmp_path):
    folder = tmp_path / "idx"
    folder.mkdir()
    (folder / "ids.json").write_text('["d1"]', encoding="utf-8")
    with pytest.raises(RetrieverError, match=r"idx holds an unfinished save \(ids.json but no "
                       r"retriever.json\): the process writing it stopped part-way"):
        load_retriever(folder)


def test_a_load_that_overlaps_a_new_save_reads_the_new_one(tmp_path, monkeypatch):
    folder = tmp_path / "idx"
    bm25(OLD_DOCS).save(folder)
    original = BM25Retriever._load.__func__
    calls = []

    def load_while_saving(cls, path, manifest):
        calls.append(path)
        if len(calls) == 1:  # a writer swaps in a new index while this reader is mid-way
            bm25(NEW_DOCS).save(folder)
        return original(cls, path, manifest)

    monkeypatch.setattr(BM25Retriever, "_load", classmethod(load_while_saving))
    assert BM25Retriever.load(folder).doc_ids == ["n1", "n2"]
    assert len(calls) == 2


def test_replace_folder_keeps_the_old_content_when_the_block_raises(tmp_path):
    folder = tmp_path / "plain"
    with replace_folder(folder) as tmp:
        (tmp / "a.txt").write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError, match="boom"), replace_folder(folder) as tmp:
        (tmp / "a.txt").write_text("new", encoding="utf-8")
        raise RuntimeError("boom")
    assert (folder / "a.txt").read_text(encoding="utf-8") == "old"
    assert hidden(folder) == []


def test_get_index_keeps_the_old_index_when_a_rebuild_dies(tmp_workspace, monkeypatch):
    import_file(tmp_workspace, "docs", "jsonl", FIXTURES / "docs_sample.jsonl", progress=False)
    built = get_index(tmp_workspace, "bm25", progress=False)
    folder = index_folder(tmp_workspace, "bm25", {})
    fingerprint = saved_fingerprint(folder)
    monkeypatch.setattr(BM25Retriever, "_save", lambda self, f: fail_midway(f))
    with pytest.raises(KeyboardInterrupt):
        get_index(tmp_workspace, "bm25", progress=False, rebuild=True)
    assert saved_fingerprint(folder) == fingerprint and (folder / CORPUS_FILE).is_file()
    assert load_retriever(folder).doc_ids == built.doc_ids and len(built) == 3
    assert hidden(folder) == []


def test_a_background_round_loads_the_saved_index_as_it_is_while_documents_arrive(
        tmp_workspace):
    """Stress (issue 35 follow-up): ranker rounds every few labels during a 60k import rebuilt
    BM25 each time and replaced it under the readers ("replaced 3 times while loading"). With
    ``stale_ok`` a saved index is loaded as it is; without one it is built; a plain call still
    refreshes it."""
    from curation.store.importer import import_items
    from kb_sources.types import Document

    import_file(tmp_workspace, "docs", "jsonl", FIXTURES / "docs_sample.jsonl", progress=False)
    folder = index_folder(tmp_workspace, "bm25", {})
    assert saved_fingerprint(folder) is None
    first = get_index(tmp_workspace, "bm25", progress=False, stale_ok=True)  # none: built
    fingerprint = saved_fingerprint(folder)
    assert fingerprint is not None and len(first) == 3
    import_items(tmp_workspace, [Document("n1", "EGFR T790M", "osimertinib", "test")],
                 reader="test", path="t", progress=False)
    stale = get_index(tmp_workspace, "bm25", progress=False, stale_ok=True)
    assert len(stale) == 3 and saved_fingerprint(folder) == fingerprint  # not rebuilt
    fresh = get_index(tmp_workspace, "bm25", progress=False)
    assert len(fresh) == 4 and saved_fingerprint(folder) != fingerprint
