"""One contract for every workspace store: the embedded SQLite file and PostgreSQL.

Each test runs against both (``store`` is parametrised); PostgreSQL runs in a throwaway server
(tests/pg_server.py) that must start: a missing server fails the run, it is never skipped.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from curation.store.errors import WorkspaceReadOnlyError
from curation.store.importer import import_file, import_items
from curation.store.labels import LabelPending, Labels
from curation.store.migrations import SCHEMA_VERSION
from curation.store.relations import Relations
from curation.store.web_sessions import WebSessions
from curation.store.workspace import Workspace
from kb_sources.errors import InputFormatError
from tests.test_importer import changes_then_fail, dump, kill_an_import_half_way, seed

FIXTURES = Path(__file__).parent / "fixtures"
TABLES = {"adjudications", "annotations", "audit_log", "citations", "documents", "entities",
          "import_undo", "imports", "jobs", "labels", "mesh_tree", "meta", "models",
          "relation_pmids", "relation_slots", "relations", "source_suggestions", "synonyms",
          "web_sessions", "ranker_versions", "ranker_rounds", "baseline_files",
          "baseline_deletions", "baseline_versions", "pubmed_searches", "pubmed_hits",
          "watches", "watch_runs", "watch_hits", "cross_scores"}
Q = {"schema": "PO", "query_key": "gene=gene:673|variant=variant:v600e",
     "query_text": "Treatment for gene BRAF and variant V600E?"}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    """A fresh workspace on each store."""
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    ws = Workspace.init(tmp_path / "ws", store_url=url)
    assert ws.engine == request.param
    yield ws
    ws.close()


def label(ws: Workspace, user: str, doc: str, grade: str, **kw) -> object:
    return Labels(ws).record(user=user, doc_id=doc, grade=grade, **{**Q, **kw})


def test_init_creates_every_table_at_the_current_version(store):
    assert store.schema_version == SCHEMA_VERSION
    assert set(store.conn.table_names()) == TABLES
    store.close()
    with Workspace.open(store.root) as again:
        assert again.schema_version == SCHEMA_VERSION
        assert again.conn.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()


def test_import_of_the_fixtures_gives_the_same_counts(store):
    reports = [import_file(store, "kb", "civic", FIXTURES / "civic_v2_sample.tsv", progress=False),
               import_file(store, "docs", "jsonl", FIXTURES / "docs_sample.jsonl", progress=False),
               import_file(store, "docs", "pubtator", FIXTURES / "pubtator_sample.txt",
                           progress=False)]
    assert [r.relations_added for r in reports] == [11, 0, 0]
    stats = store.stats()
    assert (stats.documents, stats.annotations, stats.relations, stats.relations_with_pmids,
            stats.entities, stats.synonyms) == (6, 23, 11, 9, 26, 26)
    assert stats.partial_relations_by_schema == {"PO": 8}
    again = import_file(store, "kb", "civic", FIXTURES / "civic_v2_sample.tsv", progress=False)
    assert (again.relations_added, again.relations_updated) == (0, 0)
    braf = Relations(store).partial("PO", {"gene": "braf"})
    assert [p.query["gene"][0].text for p in braf] == ["BRAF"] * len(braf) and braf
    level = Relations(store).partial("PO", {"evidence_level": "b"})
    assert level and all("B" in p.attributes["evidence_level"] for p in level)


def test_reader_error_midway_leaves_nothing(store):
    seed(store)
    before = dump(store)
    with pytest.raises(InputFormatError, match="bad.tsv, line 7"):
        import_items(store, changes_then_fail(after=10), reader="kb:test", path="mem",
                     progress=False, batch_size=2)
    assert dump(store) == before


def test_killed_import_is_rolled_back_on_next_open(store):
    seed(store)
    before = dump(store)
    root = store.root
    store.close()
    kill_an_import_half_way(root)
    with Workspace.open(root, read_only=True) as peek:
        assert peek.conn.execute("SELECT status FROM imports ORDER BY id DESC").fetchone()[0] \
            == "running"
        assert peek.stats().documents > 2  # batches were committed
    with Workspace.open(root) as ws:
        assert dump(ws) == before


def test_label_relabel_undo_and_audit(store):
    first = label(store, "ann", "1", "partial")
    second = label(store, "ann", "1", "complete", note="names the drug")
    other = label(store, "bob", "2", "irrelevant", model_version="m@1", train_size=3)
    assert (first.id, second.id, other.id) == (1, 2, 3)
    rows = Labels(store).find(include_superseded=True)
    assert [(lab.id, lab.user, lab.grade.value, lab.superseded_by) for lab in rows] == [
        (3, "bob", "irrelevant", None), (2, "ann", "complete", None), (1, "ann", "partial", 2)]
    assert Labels(store).undo_last("ann").id == 2
    assert [(lab.id, lab.superseded_by) for lab in Labels(store).find(include_superseded=True)
            if lab.user == "ann"] == [(1, None)]
    assert label(store, "ann", "3", "skip").id == 4  # an undone id is never given again
    log = store.audit_log("label")
    assert [(e.action, e.object_id, e.actor) for e in log] == [
        ("label", "4", "ann"), ("undo", "2", "ann"), ("label", "3", "bob"),
        ("relabel", "2", "ann"), ("label", "1", "ann")]
    assert log[1].before_value()["grade"] == "complete"


def test_a_failed_transaction_leaves_nothing(store):
    with pytest.raises(RuntimeError, match="half-way"), store.transaction():
        store.audit("me", "test", "thing", "1")
        store.conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
        raise RuntimeError("half-way")
    assert store.audit_log() == []
    assert store.conn.execute("SELECT COUNT(*) FROM meta WHERE key = 'k'").fetchone()[0] == 0


def test_twenty_concurrent_writers_lose_no_label(store):
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with Workspace.open(store.root) as ws:
                for i in range(5):
                    Labels(ws).record(user=f"u{n}", schema="PO", query_key=f"q{n}-{i}",
                                      query_text="t", doc_id=str(i), grade="complete")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert Labels(store).pending() == []
    ids = [r[0] for r in store.conn.execute("SELECT id FROM labels ORDER BY id")]
    assert ids == list(range(1, 101))
    audited = store.conn.execute("SELECT COUNT(DISTINCT object_id) FROM audit_log "
                                 "WHERE object_type = 'label' AND action = 'label'").fetchone()
    assert audited[0] == 100


def test_a_busy_store_keeps_the_label_pending_then_saves_it(store, monkeypatch):
    monkeypatch.setattr("curation.store.labels.LABEL_LOCK_WAIT_S", 0.0)
    other = Workspace.open(store.root)
    other.conn.begin_write()  # a long import in another process
    try:
        with pytest.raises(LabelPending, match="is pending, not saved yet"):
            label(store, "ann", "21639808", "complete", note="first")
        assert store.stats().labels == 0
    finally:
        other.conn.execute("ROLLBACK")
        other.close()
    assert Labels(store).flush_pending() == 1
    assert [(lab.doc_id, lab.note) for lab in Labels(store).find()] == [("21639808", "first")]


def test_read_only_opening_reads_and_refuses_writes(store):
    label(store, "ann", "1", "complete")
    store.close()
    with Workspace.open(store.root, read_only=True) as ws:
        assert ws.stats().labels == 1
        with pytest.raises(WorkspaceReadOnlyError, match="read-only"):
            label(ws, "ann", "2", "partial")


def test_jobs_run_report_progress_and_cancel(store):
    from curation.access.users import Role, User
    from curation.jobs.queue import JobStatus, cancel_job, get_job, run_job, submit_job

    admin = User("root", Role.ADMIN)
    job = submit_job(store, "selftest", {"steps": 2}, user=admin, start=False)
    done = run_job(store, job.id)
    assert (done.status, done.progress) == (JobStatus.DONE, 1.0)
    queued = submit_job(store, "selftest", {"steps": 2}, user=admin, start=False)
    assert cancel_job(store, queued.id, user=admin).status is JobStatus.CANCELLED
    assert get_job(store, queued.id).status is JobStatus.CANCELLED


def test_worklist_stamp_and_web_sessions(store):
    from curation.access.signin import AuthMode, Session
    from curation.access.web_sessions import (
        create_web_session,
        restore_web_session,
    )
    from curation.search.worklist import data_stamp

    label(store, "ann", "1", "complete")
    assert data_stamp(store) == "1:1|0:0:0:|0:"
    cookie = create_web_session(store, Session("ann", AuthMode.USERS), ttl_s=3600)
    assert restore_web_session(store, cookie) == Session("ann", AuthMode.USERS)
    assert WebSessions(store).revoke_user("ann") == 1
    assert restore_web_session(store, cookie) is None
