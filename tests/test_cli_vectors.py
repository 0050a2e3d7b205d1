"""``kbcurate vector-store`` and ``kbcurate encode-bulk``: the workspace setting picks the store of
dense indexes (FAISS unchanged by default), and a bulk encode saves the index ``index`` loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation.search.indexing import check_index_params
from curation.search.vector_settings import namespace, set_store_setting, store_options
from curation.store.importer import import_file
from kb_sources.errors import CurationError
from retrievers.vector_store import URL_ENV


@pytest.fixture
def ws(tmp_workspace, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(URL_ENV, raising=False)
    import_file(tmp_workspace, "docs", "jsonl", fixtures_dir / "docs_sample.jsonl",
                progress=False)
    return tmp_workspace


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    from curation.cli.main import main

    assert main(list(args)) == 0
    return capsys.readouterr().out


def saved_index(out: str) -> tuple[Path, dict]:
    folder = Path(out.rsplit(" in ", 1)[1].strip())
    return folder, json.loads((folder / "retriever.json").read_text(encoding="utf-8"))


def test_the_setting_defaults_to_faiss_and_is_audited(ws, capsys) -> None:
    root = str(ws.root)
    assert run(capsys, "vector-store", "-w", root) == 'vector_store: {"kind": "faiss"}\n'
    assert store_options(ws) is None  # FAISS: dense options (and index folders) unchanged
    out = run(capsys, "vector-store", "qdrant", "--exact", "--hnsw-m", "16", "-w", root)
    assert out == 'vector_store: {"exact": true, "hnsw_m": 16, "kind": "qdrant"}\n'
    assert store_options(ws) == {"kind": "qdrant", "exact": True, "hnsw_m": 16,
                                 "path": str(ws.root / "indexes" / "qdrant"),
                                 "namespace": namespace(ws)}
    row = ws.audit_log("setting", 1)[0]
    assert row.actor == "cli" and row.object_id == "vector_store"


def test_settings_the_workspace_owns_are_refused(ws) -> None:
    with pytest.raises(CurationError, match="path is chosen by the workspace"):
        set_store_setting(ws, "qdrant", actor="t", path="/elsewhere")
    with pytest.raises(CurationError, match="Unknown vector store 'milvus'"):
        set_store_setting(ws, "milvus", actor="t")
    with pytest.raises(CurationError, match="only an admin changes"):
        check_index_params(ws, {"retriever": "dense",
                                "options": {"vector_store": {"kind": "qdrant", "path": "/etc"}}})


def test_index_goes_to_qdrant_when_the_workspace_says_so(ws, tiny_model_path, capsys) -> None:
    root, model = str(ws.root), str(tiny_model_path)
    run(capsys, "vector-store", "qdrant", "-w", root)
    out = run(capsys, "index", "-w", root, "-q", "--model", model)
    assert out.startswith("dense index of 3 documents (dense:")
    folder, manifest = saved_index(out)
    assert manifest["vector_store"]["path"] == str(ws.root / "indexes" / "qdrant")
    assert manifest["collection"].startswith(namespace(ws) + "__")
    assert not (folder / "faiss").exists()
    assert run(capsys, "index", "-w", root, "-q", "--model", model) == out  # loaded again


@pytest.mark.parametrize("kind", ["faiss", "qdrant"])
def test_encode_bulk_saves_the_index_that_index_loads(ws, tiny_model_path, capsys,
                                                      kind: str) -> None:
    root, model = str(ws.root), str(tiny_model_path)
    run(capsys, "vector-store", kind, "-w", root)
    out = run(capsys, "encode-bulk", "-w", root, "-q", "--model", model, "--engine", "local",
              "--shard-size", "2")
    assert out.startswith("dense index of 3 documents (dense:")
    assert "2 of 2 shards encoded (0 done before) by local" in out
    assert list((ws.root / "cache" / "bulk").iterdir()) == []  # the run's manifest is gone
    loaded = run(capsys, "index", "-w", root, "-q", "--model", model)
    folder, manifest = saved_index(loaded)
    assert loaded.startswith("dense index of 3 documents")
    assert ("collection" in manifest) == (kind == "qdrant")
    assert (folder / "faiss" / "index.faiss").is_file() == (kind == "faiss")
