"""Issue 28, security third pass: model files, workspace files and read-only workspaces."""

from __future__ import annotations

import pickle

import pytest

from curation.training import imports
from kb_sources.errors import CurationError


def _never_load(*args, **kwargs):
    raise AssertionError("the checkpoint was loaded before its files were checked")


@pytest.fixture
def no_loading(monkeypatch):
    import retrievers.encoder

    monkeypatch.setattr(retrievers.encoder, "load_sentence_transformer", _never_load)


# -- item 5: pickle checkpoints are refused before anything loads them --------------------------
@pytest.mark.parametrize(("name", "content"), [
    ("pytorch_model.bin", pickle.dumps({"weights": [1, 2, 3]}, protocol=2)),
    ("model.ckpt", pickle.dumps([0.5], protocol=4)),
    ("weights.pth", b"PK\x03\x04archive/data.pkl"),  # torch's zip format
    ("model.safetensors", pickle.dumps({"x": 1}, protocol=5)),  # pickle under another name
])
def test_import_refuses_pickle_files_before_loading(tmp_workspace, tmp_path, no_loading,
                                                    name, content):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / name).write_bytes(content)
    with pytest.raises(CurationError, match=rf"{name}.*pickle.*safetensors") as caught:
        imports.import_checkpoint(tmp_workspace, str(folder), schema="PO", actor="admin")
    assert "save_pretrained(..., safe_serialization=True)" in str(caught.value)
    assert tmp_workspace.conn.execute("SELECT COUNT(*) FROM models").fetchone()[0] == 0


# -- item 13: oversized config and tokenizer files are refused ---------------------------------
@pytest.mark.parametrize(("name", "size", "limit"), [
    ("config.json", 2 * 1024 * 1024, "1 MiB"),
    ("1_Pooling/config.json", 2 * 1024 * 1024, "1 MiB"),
    ("tokenizer.json", 65 * 1024 * 1024, "64 MiB"),
    ("vocab.txt", 65 * 1024 * 1024, "64 MiB"),
])
def test_import_refuses_oversized_config_and_tokenizer(tmp_workspace, tmp_path, no_loading,
                                                       name, size, limit):
    folder = tmp_path / "big"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    with open(folder / name, "wb") as fh:  # sparse: the size without the disk use
        fh.truncate(size)
    with pytest.raises(CurationError, match=rf"{name} is {size / 2**20:.1f} MiB.*limit {limit}"):
        imports.import_checkpoint(tmp_workspace, str(folder), schema="PO", actor="admin")
