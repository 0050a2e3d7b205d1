"""Model registry: register, versions, activate/retire (audited), checksums, export."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from curation.access.users import PermissionDenied, Role, User
from curation.store.models import (
    Models,
    ModelStatus,
    format_models_table,
    verify_weights,
)
from kb_sources.errors import CurationError, UnknownNameError

ALICE, BOB = User("alice", Role.ADMIN), User("bob", Role.ADMIN)

MANIFEST = {"recipe_config": {"epochs": 1, "lr": 2e-5}, "train_examples": 120,
            "max_seq_length": 128, "document_format": "{title}. {abstract}"}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _register(ws, model_dir: Path, schema: str = "disease_gene", recipe: str = "edel", **kw):
    return Models(ws).register(schema=schema, recipe=recipe, base_model="tiny-bert",
                               model_dir=model_dir, manifest=kw.pop("manifest", MANIFEST),
                               created_by=kw.pop("created_by", "alice"), **kw)


def test_register_round_trip(tmp_workspace, fake_model_dir):
    v = _register(tmp_workspace, fake_model_dir, metrics={"ndcg@10": 0.41})
    assert (v.id, v.name, v.version, v.schema, v.recipe) == (
        "disease_gene-edel@1", "disease_gene-edel", 1, "disease_gene", "edel")
    assert v.status is ModelStatus.CANDIDATE
    assert v.path == tmp_workspace.root / "models" / "disease_gene-edel@1"
    assert v.model_dir == v.path / "model"
    assert v.sha256 == _sha(fake_model_dir / "model.safetensors")
    assert v.created_by == "alice" and v.metrics == {"ndcg@10": 0.41}
    copied = sorted(p.relative_to(v.model_dir).as_posix() for p in v.model_dir.rglob("*")
                    if p.is_file())
    assert copied == ["1_Pooling/config.json", "config.json", "model.safetensors"]
    assert (v.model_dir / "config.json").read_text() == '{"hidden_size": 32}\n'
    on_disk = json.loads((v.path / "manifest.json").read_text())
    assert on_disk["id"] == "disease_gene-edel@1" and on_disk["train_examples"] == 120
    assert on_disk["base_model"] == "tiny-bert" and on_disk["created_by"] == "alice"
    assert on_disk["sha256"] == v.sha256 and on_disk["metrics"] == {"ndcg@10": 0.41}
    assert on_disk["files"] == {rel: _sha(v.model_dir / rel) for rel in copied}
    assert v.manifest["files"] == on_disk["files"]
    row = tmp_workspace.conn.execute("SELECT * FROM models").fetchone()
    assert (row["status"], row["sha256"], row["path"]) == (
        "candidate", v.sha256, "models/disease_gene-edel@1")
    audit = tmp_workspace.audit_log("model")
    assert [(a.actor, a.action, a.object_id) for a in audit] == [
        ("alice", "register", "disease_gene-edel@1")]
    assert [p.name for p in (tmp_workspace.root / "models").iterdir()] == [v.id]  # no temp left
    assert tmp_workspace.stats().model_versions == ["disease_gene-edel@1"]
    assert v.to_json()["status"] == "candidate" and v.to_json()["path"] == str(v.path)


def test_versions_increment_per_name_and_list_filters(tmp_workspace, fake_model_dir):
    ids = [_register(tmp_workspace, fake_model_dir).id,
           _register(tmp_workspace, fake_model_dir).id,
           _register(tmp_workspace, fake_model_dir, recipe="ce").id,
           _register(tmp_workspace, fake_model_dir, schema="drug_gene").id,
           _register(tmp_workspace, fake_model_dir).id]
    assert ids == ["disease_gene-edel@1", "disease_gene-edel@2", "disease_gene-ce@1",
                   "drug_gene-edel@1", "disease_gene-edel@3"]
    assert [m.id for m in Models(tmp_workspace).versions()] == ids[::-1]
    models = Models(tmp_workspace)
    assert [m.id for m in models.versions(schema="drug_gene")] == ["drug_gene-edel@1"]
    Models(tmp_workspace).activate("disease_gene-edel@2", ALICE)
    assert [m.id for m in models.versions(status="active")] == ["disease_gene-edel@2"]
    assert [m.id for m in Models(tmp_workspace).versions(schema="disease_gene",
                                                         status=ModelStatus.CANDIDATE)] == [
        "disease_gene-edel@3", "disease_gene-ce@1", "disease_gene-edel@1"]
    assert Models(tmp_workspace).is_version("disease_gene-ce@1")
    assert not Models(tmp_workspace).is_version("disease_gene-ce@2")
    assert not Models(tmp_workspace).is_version("all-MiniLM-L6-v2")
    with pytest.raises(CurationError, match="Unknown model status 'live'.*candidate, active"):
        Models(tmp_workspace).versions(status="live")


def test_get_model_unknown_lists_options(tmp_workspace, fake_model_dir):
    _register(tmp_workspace, fake_model_dir)
    _register(tmp_workspace, fake_model_dir, schema="drug_gene")
    with pytest.raises(UnknownNameError, match=r"Unknown model version 'disease_gene-edel@7'\. "
                       r"Available options: disease_gene-edel@1, drug_gene-edel@1"):
        Models(tmp_workspace).get("disease_gene-edel@7")


def test_register_refuses_bad_input(tmp_workspace, fake_model_dir, tmp_path):
    pickled = tmp_path / "pickled"
    shutil.copytree(fake_model_dir, pickled)
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    where = re.escape(str(pickled))
    with pytest.raises(CurationError, match=rf"{where}: pytorch_model\.bin is a pickle-format "
                       r"file .* safe_serialization=True"):
        _register(tmp_workspace, pickled)
    (fake_model_dir / "model.safetensors").unlink()
    where = re.escape(str(fake_model_dir))
    with pytest.raises(CurationError, match=rf"{where} has no model\.safetensors; "
                       "weights must be safetensors"):
        _register(tmp_workspace, fake_model_dir)
    with pytest.raises(CurationError, match="schema 'disease/gene' cannot name a model"):
        _register(tmp_workspace, fake_model_dir, schema="disease/gene")
    with pytest.raises(CurationError, match="needs a user"):
        _register(tmp_workspace, fake_model_dir, created_by=" ")
    assert Models(tmp_workspace).versions() == []
    assert list((tmp_workspace.root / "models").iterdir()) == []


def test_failed_insert_removes_the_copied_folder(tmp_workspace, fake_model_dir):
    tmp_workspace.conn.execute(  # make the INSERT fail after the folder was renamed into place
        "CREATE TRIGGER no_models BEFORE INSERT ON models BEGIN SELECT RAISE(ABORT, 'no'); END")
    with pytest.raises(sqlite3.IntegrityError, match="no"):
        _register(tmp_workspace, fake_model_dir)
    assert list((tmp_workspace.root / "models").iterdir()) == []
    assert tmp_workspace.audit_log("model") == []


def test_activate_keeps_one_active_per_schema_and_audits(tmp_workspace, fake_model_dir):
    v1, v2 = _register(tmp_workspace, fake_model_dir), _register(tmp_workspace, fake_model_dir)
    other = _register(tmp_workspace, fake_model_dir, schema="drug_gene")
    assert Models(tmp_workspace).active("disease_gene") is None
    assert Models(tmp_workspace).activate(v1.id, ALICE, "first").status is ModelStatus.ACTIVE
    Models(tmp_workspace).activate(other.id, BOB)
    assert Models(tmp_workspace).activate(v2.id, BOB, "better ndcg").status == "active"
    assert Models(tmp_workspace).active("disease_gene").id == v2.id
    assert Models(tmp_workspace).get(v1.id).status is ModelStatus.CANDIDATE
    assert Models(tmp_workspace).active("drug_gene").id == other.id  # other schema untouched
    rows = tmp_workspace.conn.execute(
        "SELECT schema, COUNT(*) FROM models WHERE status = 'active' GROUP BY schema").fetchall()
    assert sorted(tuple(r) for r in rows) == [("disease_gene", 1), ("drug_gene", 1)]
    log = [a for a in tmp_workspace.audit_log("model") if a.action == "activate"]
    assert [(a.actor, a.object_id, a.before_value(), a.after_value())
            for a in log] == [
        ("bob", v2.id, {"previous": v1.id}, {"reason": "better ndcg"}),
        ("bob", other.id, {"previous": None}, {"reason": ""}),
        ("alice", v1.id, {"previous": None}, {"reason": "first"})]
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        tmp_workspace.conn.execute("UPDATE models SET status = 'active' WHERE version = '1' "
                                   "AND schema = 'disease_gene'")


def test_retire_and_reactivate_as_rollback(tmp_workspace, fake_model_dir):
    v1, v2 = _register(tmp_workspace, fake_model_dir), _register(tmp_workspace, fake_model_dir)
    Models(tmp_workspace).activate(v1.id, ALICE)
    retired = Models(tmp_workspace).retire(v1.id, ALICE, "drifted")
    assert retired.status is ModelStatus.RETIRED
    assert Models(tmp_workspace).active("disease_gene") is None
    entry = tmp_workspace.audit_log("model")[0]
    assert (entry.action, entry.object_id, entry.before_value(),
            entry.after_value()) == ("retire", v1.id, {"status": "active"},
                                            {"reason": "drifted"})
    Models(tmp_workspace).activate(v2.id, ALICE)
    assert Models(tmp_workspace).activate(v1.id, ALICE, "rollback").status == "active"
    assert Models(tmp_workspace).get(v2.id).status is ModelStatus.CANDIDATE


def test_update_metrics_merges_row_and_manifest(tmp_workspace, fake_model_dir):
    v = _register(tmp_workspace, fake_model_dir, metrics={"ndcg@10": 0.3, "map@10": 0.2})
    updated = Models(tmp_workspace).update_metrics(v.id, {"ndcg@10": 0.45, "recall@100": 0.9},
                                                   "carol")
    expected = {"ndcg@10": 0.45, "map@10": 0.2, "recall@100": 0.9}
    assert updated.metrics == expected
    assert json.loads((v.path / "manifest.json").read_text())["metrics"] == expected
    assert tmp_workspace.audit_log("model")[0].action == "metrics"
    table = format_models_table(Models(tmp_workspace).versions())
    assert table.splitlines()[0].split() == ["id", "status", "base", "model", "created", "NDCG@10"]
    assert table.splitlines()[1].split()[:3] == [v.id, "candidate", "tiny-bert"]
    assert table.splitlines()[1].endswith("0.450")
    # a round or an import records the test metric as test_* (corpus) or testpool_* (pool)
    pooled = Models(tmp_workspace).update_metrics(v.id, {"testpool_ndcg@10": 0.512}, "carol")
    assert format_models_table([pooled]).splitlines()[1].endswith("0.512")
    both = Models(tmp_workspace).update_metrics(v.id, {"test_ndcg@10": 0.634}, "carol")
    assert format_models_table([both]).splitlines()[1].endswith("0.634")


def test_corrupted_weights_are_refused(tmp_workspace, fake_model_dir):
    v = _register(tmp_workspace, fake_model_dir)
    verify_weights(v)
    weights = v.model_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[10] ^= 0xFF
    weights.write_bytes(bytes(data))
    message = (rf"weights of {v.id} at .*model\.safetensors do not match the checksum "
               rf"recorded at training \(expected {v.sha256}, found {_sha(weights)}\): the file "
               "was changed or corrupted; restore it or retrain")
    with pytest.raises(CurationError, match=message):
        verify_weights(v)
    with pytest.raises(CurationError, match=message):
        Models(tmp_workspace).options(v.id)
    with pytest.raises(CurationError, match=message):
        Models(tmp_workspace).activate(v.id, ALICE)
    assert Models(tmp_workspace).get(v.id).status is ModelStatus.CANDIDATE
    with pytest.raises(CurationError, match=rf"weights of {v.id} .*checksum"):
        Models(tmp_workspace).export(v.id, tmp_workspace.root / "exports", user=ALICE)


def test_changed_config_file_and_added_pickle_are_refused(tmp_workspace, fake_model_dir):
    v = _register(tmp_workspace, fake_model_dir)
    (v.model_dir / "1_Pooling" / "config.json").write_text("{}")
    with pytest.raises(CurationError, match=rf"file 1_Pooling/config.json of {v.id} .*checksum"):
        verify_weights(v)
    w = _register(tmp_workspace, fake_model_dir)
    (w.model_dir / "optimizer.pt").write_bytes(b"x")
    with pytest.raises(CurationError, match=r": optimizer\.pt is a pickle-format file"):
        verify_weights(w)


def test_model_options_and_export_load_the_same_model(tmp_workspace, tiny_model_path, tmp_path):
    from sentence_transformers import SentenceTransformer

    v = _register(tmp_workspace, tiny_model_path)
    assert Models(tmp_workspace).options(v.id) == {
        "model": str(v.model_dir), "model_version": f"{v.id}:{v.sha256[:12]}",
        "max_seq_length": 128, "document_format": "{title}. {abstract}"}
    out = Models(tmp_workspace).export(v.id, tmp_path / "export", user=ALICE)
    assert out == tmp_path / "export" / v.id
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "model"]
    assert json.loads((out / "manifest.json").read_text())["sha256"] == v.sha256
    assert _sha(out / "model" / "model.safetensors") == v.sha256
    with pytest.raises(CurationError,
                       match=rf"{re.escape(str(out))} already exists; export .* another folder"):
        Models(tmp_workspace).export(v.id, tmp_path / "export", user=ALICE)
    text = ["BRAF V600E mutation predicts response to vemurafenib in melanoma."]
    original = SentenceTransformer(str(tiny_model_path), device="cpu").encode(text)
    for folder in (v.model_dir, out / "model"):
        copy = SentenceTransformer(str(folder), device="cpu").encode(text)
        assert copy.shape == original.shape == (1, 32)
        assert copy.tolist() == original.tolist()


def test_model_state_changes_need_an_admin(tmp_workspace, fake_model_dir, tmp_path):
    v = _register(tmp_workspace, fake_model_dir)
    curator = User("carol", Role.CURATOR)
    for call in (lambda u: Models(tmp_workspace).activate(v.id, u),
                 lambda u: Models(tmp_workspace).retire(v.id, u),
                 lambda u: Models(tmp_workspace).export(v.id, tmp_path / "out", user=u)):
        for who in (curator, None, "alice"):
            with pytest.raises(PermissionDenied, match="needs the admin role"):
                call(who)
    assert Models(tmp_workspace).get(v.id).status.value == "candidate"
    assert not (tmp_path / "out").exists()
    assert Models(tmp_workspace).activate(v.id, ALICE).status.value == "active"
    row = tmp_workspace.conn.execute(
        "SELECT actor FROM audit_log WHERE action = 'activate' AND object_id = ?",
        (v.id,)).fetchone()
    assert row[0] == "alice"
