"""A label references the dense model version that ranked its abstract and records how many
labels that version learned from (issue 27 item 3: typed identities; ASReview's training set)."""

from __future__ import annotations

from curation.store.connection import connect
from curation.store.labels import Labels
from curation.store.migrations import MIGRATIONS, SCHEMA_VERSION
from curation.store.models import Models
from curation.store.workspace import DB_NAME, Workspace


def _model(ws, tiny_model_path, used: list[int]):
    return Models(ws).register(schema="PO", recipe="edel", base_model="tiny",
                               model_dir=tiny_model_path,
                               manifest={"examples": {"labels": {"used": used}}}, created_by="boss")


def _label(ws, doc_id: str, model_version: str, **extra):
    return Labels(ws).record(user="alice", schema="PO", query_key="q", query_text="BRAF V600E",
                             doc_id=doc_id, grade="complete", model_version=model_version, **extra)


def test_a_label_references_the_version_named_in_its_model_version(tmp_workspace,
                                                                   tiny_model_path):
    ws = tmp_workspace
    v1 = _model(ws, tiny_model_path, used=[])
    v2 = _model(ws, tiny_model_path, used=[1, 2, 3])
    assert (v1.id, v2.id) == ("PO-edel@1", "PO-edel@2")
    rows = {r["id"]: r["name"] + "@" + r["version"]
            for r in ws.conn.execute("SELECT id, name, version FROM models")}
    by_hit = _label(ws, "1", f"dense:{v2.id}:abcdef123456+rerank")
    by_menu = _label(ws, "2", f"dense · {v1.id}")
    by_bm25 = _label(ws, "3", "bm25+rerank")
    by_ranker = _label(ws, "4", "ranked · PO-ranker@1")
    by_gone = _label(ws, "5", "PO-edel@9")
    assert rows[by_hit.model_version_id] == v2.id and by_hit.train_size == 3
    assert rows[by_menu.model_version_id] == v1.id and by_menu.train_size == 0
    assert by_bm25.model_version_id is None and by_bm25.train_size == 0
    # a ranker version lives in WS/rankers, not the models table; without its manifest the
    # count is unknown, and so is that of a version that does not exist
    assert by_ranker.model_version_id is None and by_ranker.train_size is None
    assert by_gone.model_version_id is None and by_gone.train_size is None
    assert by_gone.model_version == "PO-edel@9"  # the text is kept as written
    given = _label(ws, "6", v2.id, train_size=50)  # the simulation gives its own count
    assert given.train_size == 50 and rows[given.model_version_id] == v2.id


def test_migrating_links_older_label_rows_and_keeps_their_text(tmp_path, tiny_model_path):
    root = tmp_path / "old"
    root.mkdir()
    old = Workspace(root, connect(root / DB_NAME))
    old.migrate(MIGRATIONS[:8])
    old.conn.execute("INSERT INTO models(name, version, recipe, created_at) "
                     "VALUES ('PO-edel', '2', 'edel', 't')")
    texts = ["dense:PO-edel@2:abcdef123456", "PO-edel@2", "PO-edel@23", "bm25", ""]
    for i, text in enumerate(texts, 1):
        old.conn.execute(
            "INSERT INTO labels(created_at, user, schema, query_key, query_text, doc_id, grade, "
            "model_version) VALUES ('t', 'bob', 'PO', 'q', 'text', ?, 'partial', ?)",
            (str(i), text))
    old.close()
    with Workspace.open(root) as ws:
        assert ws.schema_version == SCHEMA_VERSION
        model_id = ws.conn.execute("SELECT id FROM models").fetchone()[0]
        rows = [tuple(r) for r in ws.conn.execute(
            "SELECT model_version, model_version_id FROM labels ORDER BY id")]
    assert rows == [("dense:PO-edel@2:abcdef123456", model_id), ("PO-edel@2", model_id),
                    ("PO-edel@23", None), ("bm25", None), ("", None)]


def test_a_dense_hit_label_names_its_registry_version(tmp_workspace, tiny_model_path):
    """The label the app stores for a dense hit is the encoder's slug of the version
    (``dense:PO-edel-2-<sha12>-<digest>``), not ``PO-edel@2``: it is found all the same."""
    from curation.store.identities import ModelVersionId
    from retrievers.encoder import Encoder, EncoderConfig

    ws = tmp_workspace
    _model(ws, tiny_model_path, used=[])
    v2 = _model(ws, tiny_model_path, used=[7, 8])
    options = Models(ws).options(v2.id)
    for backend in (("torch", "fp32"), ("openvino", "int8")):
        config = EncoderConfig(model=options["model"], model_version=options["model_version"],
                               backend=backend[0], precision=backend[1])
        hit_label = f"dense:{Encoder(config).model_id}+rerank"
        assert "@" not in hit_label
        assert ModelVersionId.find(hit_label) == ModelVersionId("PO", "edel", 2)
    label = _label(ws, "1", hit_label)
    assert label.model_version == hit_label and label.train_size == 2
    assert ws.conn.execute("SELECT name || '@' || version FROM models WHERE id = ?",
                           (label.model_version_id,)).fetchone()[0] == v2.id
    assert ModelVersionId.find("dense:all-MiniLM-L6-v2-0123456789ab") is None
