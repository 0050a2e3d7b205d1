"""Issue 28, security third pass: job submission and the table queue's liveness checks."""

from __future__ import annotations

import subprocess
import time

import pytest

from curation.access.users import Role, User
from curation.jobs.kinds import JobKind
from curation.jobs.queue import (
    JobStatus,
    get_job,
    list_jobs,
    run_job,
    submit_job,
)
from kb_sources.errors import CurationError

ADMIN = User("root", Role.ADMIN)
CURATOR = User("cur", Role.CURATOR)


# -- item 4: index jobs never take a vector-store location -----------------------------------------
@pytest.mark.parametrize(("retriever", "options", "option"), [
    ("dense", {"vector_store": {"kind": "qdrant", "url": "http://127.0.0.1:9123"}},
     "options.vector_store"),
    ("dense", {"vector_store": {"kind": "qdrant"}}, "options.vector_store"),
    ("hybrid", {"dense": {"vector_store": {"kind": "qdrant", "url": "http://x:1"}}},
     "options.dense.vector_store"),
    ("dense", {"url": "http://127.0.0.1:9123"}, "options.url"),
    ("dense", {"host": "evil.example"}, "options.host"),
    ("dense", {"model": "https://evil.example/model"}, "options.model"),
])
def test_index_jobs_refuse_vector_store_and_urls(tmp_workspace, retriever, options, option):
    with pytest.raises(CurationError, match=rf"Index job option {option}\b.*workspace setting"):
        submit_job(tmp_workspace, "index", {"retriever": retriever, "options": options},
                   user=CURATOR, start=False)
    assert list_jobs(tmp_workspace) == []


# -- item 12: the table queue's running jobs heartbeat; a silent one is failed as abandoned --------
def _running_job(ws, pid: int, idle_s: float) -> int:
    from datetime import UTC, datetime, timedelta

    job = submit_job(ws, "selftest", {"steps": 1}, user=ADMIN, start=False)
    then = (datetime.now(UTC) - timedelta(seconds=idle_s)).isoformat(timespec="seconds")
    with ws.transaction():
        ws.conn.execute("UPDATE jobs SET status = 'running', pid = ?, updated_at = ? "
                        "WHERE id = ?", (pid, then, job.id))
    return job.id


def test_a_running_job_whose_pid_was_reused_is_failed_as_abandoned(tmp_workspace):
    from curation.jobs.records import STALE_AFTER_S

    unrelated = subprocess.Popen(["sleep", "30"])  # holds the pid the worker had
    try:
        job_id = _running_job(tmp_workspace, unrelated.pid, STALE_AFTER_S + 30)
        job = get_job(tmp_workspace, job_id)
        assert job.status is JobStatus.FAILED
        assert job.error.startswith(f"the worker (pid {unrelated.pid}) sent no heartbeat for ")
        fresh = _running_job(tmp_workspace, unrelated.pid, 5)
        assert get_job(tmp_workspace, fresh).status is JobStatus.RUNNING  # heartbeat recent
    finally:
        unrelated.kill()
        unrelated.wait()


def silent_job(ctx) -> dict:
    """A job that reports no progress: only the heartbeat can keep its row fresh."""
    with ctx.ws.transaction():
        ctx.ws.conn.execute("UPDATE jobs SET updated_at = '2000-01-01T00:00:00+00:00' "
                            "WHERE id = ?", (ctx.job_id,))
    time.sleep(0.6)
    row = ctx.ws.conn.execute("SELECT updated_at FROM jobs WHERE id = ?",
                              (ctx.job_id,)).fetchone()
    return {"updated_at": row[0]}


def test_run_job_sends_heartbeats_while_the_job_runs(tmp_workspace, monkeypatch):
    from curation.jobs import kinds, watchdog

    monkeypatch.setattr(watchdog, "HEARTBEAT_S", 0.1)
    monkeypatch.setattr(kinds, "JOB_KINDS", kinds.job_kind_registry(
        [JobKind("silent", f"{__name__}:silent_job", "test kind")]))
    job = submit_job(tmp_workspace, "silent", {}, user=ADMIN, start=False)
    done = run_job(tmp_workspace, job.id)
    assert done.status is JobStatus.DONE
    assert done.result["updated_at"] > "2020"  # refreshed by the heartbeat while it slept


# -- item 14 (part): every job needs a user ------------------------------------------------------
@pytest.mark.parametrize("kind", ["index", "selftest"])
def test_a_job_without_a_user_is_refused(tmp_workspace, kind):
    from curation.access.users import PermissionDenied

    params = {"retriever": "bm25"} if kind == "index" else {}
    with pytest.raises(PermissionDenied, match=rf"Starting a job of kind '{kind}' needs a "
                       "signed-in user; internal callers pass user=SYSTEM_USER"):
        submit_job(tmp_workspace, kind, params, user=None, start=False)
    assert list_jobs(tmp_workspace) == []
