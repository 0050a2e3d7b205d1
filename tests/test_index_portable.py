"""A copied or moved workspace keeps its indexes (issue 14, bug 10): index keys hold no absolute
path, and a saved index built elsewhere is pointed at the new place when it is loaded."""

from __future__ import annotations

import json
import shutil

from curation.search.indexing import (
    get_index,
    index_folder,
    index_ready,
    portable,
    with_workspace_defaults,
)
from curation.store.workspace import Workspace
from curation.training.imports import import_checkpoint
from tests.loop_fixtures import make_loop_workspace


def test_moved_workspace_reuses_its_dense_index(tmp_path, tiny_model_path, caplog):
    first = Workspace.init(tmp_path / "a" / "ws")
    make_loop_workspace(first)
    version = import_checkpoint(first, str(tiny_model_path), schema="disease_gene",
                                name="tiny", max_seq_length=32, actor="root")
    options = {"model": version.id}
    built = get_index(first, "dense", options, progress=False)
    before = [(h.doc_id, round(h.score, 5)) for h in built.search("BRAF melanoma", 5)]
    folder_name = index_folder(first, "dense",
                               with_workspace_defaults(first, "dense", options)).name
    first.close()
    shutil.move(str(tmp_path / "a" / "ws"), str(tmp_path / "b"))
    shutil.rmtree(tmp_path / "a")  # nothing of the old place is left

    with Workspace.open(tmp_path / "b") as ws:
        assert index_ready(ws, "dense", options)
        caplog.set_level("INFO", logger="curation.search.indexing")
        loaded = get_index(ws, "dense", options, progress=False)
        assert not [r for r in caplog.records if "building" in r.getMessage()]
        assert any("rebasing" in r.getMessage() for r in caplog.records)
        after = [(h.doc_id, round(h.score, 5)) for h in loaded.search("BRAF melanoma", 5)]
        assert after == before
        saved = (ws.root / "indexes" / folder_name / "retriever.json").read_text()
        assert str(tmp_path / "a") not in saved and str(ws.root) in saved
        marker = json.loads((ws.root / "indexes" / folder_name / "corpus.json").read_text())
        assert marker["workspace"] == str(ws.root)


def test_index_keys_are_relative_to_the_workspace(tmp_workspace):
    ws = tmp_workspace
    opts = {"cache_dir": str(ws.root / "cache" / "embeddings"), "model": "/opt/models/x",
            "dense": {"model": str(ws.root / "models" / "v@1" / "model")}}
    assert portable(ws, opts) == {"cache_dir": "$WS/cache/embeddings", "model": "/opt/models/x",
                                  "dense": {"model": "$WS/models/v@1/model"}}
    assert portable(ws, {"model": str(ws.root) + "-other/m"}) == {
        "model": str(ws.root) + "-other/m"}  # a sibling folder is not inside the workspace
