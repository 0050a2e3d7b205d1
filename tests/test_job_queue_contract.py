"""One contract for every job queue: the ``jobs`` table (SQLite workspace) and procrastinate
(PostgreSQL workspace, in the throwaway server of tests/pg_server.py, which must start).

Workers run in this process (``job_queue(ws).work(ws, wait=False)``: the in-process form of
``kbcurate worker --burst``) or, where one must die, in a short subprocess. The table queue's
jobs are submitted without a worker process of their own (``start=False``) so that its ``work``
runs them; on procrastinate, submitting defers them. Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from curation.access.users import PermissionDenied, Role, User
from curation.jobs import distributed
from curation.jobs.queue import (
    JobStatus,
    cancel_job,
    get_job,
    list_jobs,
    submit_job,
)
from curation.jobs.queues import job_queue
from curation.store.errors import WorkspaceError
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError, UnknownNameError
from tests.job_probe import RUNS, register_probe

ROOT = Path(__file__).resolve().parents[1]
ADMIN = User("root", Role.ADMIN)
CURATOR = User("cur", Role.CURATOR)
ANNOTATOR = User("ann", Role.ANNOTATOR)


@pytest.fixture(params=["table", "procrastinate"])
def ws(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh workspace whose job queue is the parameter, with the probe kind registered."""
    url = request.getfixturevalue("pg_url") if request.param == "procrastinate" else None
    register_probe(monkeypatch)
    RUNS.clear()
    workspace = Workspace.init(tmp_path / "ws", store_url=url)
    assert job_queue(workspace).name == request.param
    yield workspace
    workspace.close()


def submit(ws: Workspace, kind: str, params: dict, user: User | None = ADMIN):
    return submit_job(ws, kind, params, user=user, start=job_queue(ws).name == "procrastinate")


def work(ws: Workspace, concurrency: int = 1) -> None:
    """Run every queued job in this process, then return (a worker with its own connection)."""
    with Workspace.open(ws.root) as own:
        job_queue(own).work(own, concurrency=concurrency, wait=False)


def queued_status(ws: Workspace, job_id: int) -> str | None:
    """procrastinate's status of the job (None on the table queue, which has no such record)."""
    queue = job_queue(ws)
    if queue.name != "procrastinate":
        return None
    found = queue.broker.find(job_id)
    return found.status if found else "absent"


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


# -- the contract -------------------------------------------------------------------------------
def test_a_job_runs_to_success_with_progress_and_result(ws):
    job = submit(ws, "selftest", {"steps": 3})
    assert (job.status, job.progress, job.created_by) == (JobStatus.QUEUED, 0.0, "root")
    work(ws)
    done = get_job(ws, job.id)
    assert done.status is JobStatus.DONE, done.error
    assert (done.progress, done.message) == (1.0, "step 3 of 3")
    assert done.result == {"steps": 3, "pid": os.getpid()} and done.pid == os.getpid()
    assert [j.id for j in list_jobs(ws)] == [job.id]
    assert queued_status(ws, job.id) in (None, "succeeded")


def test_a_failing_job_is_recorded_failed(ws):
    job = submit(ws, "selftest", {"steps": "three"})
    work(ws)
    failed = get_job(ws, job.id)
    assert failed.status is JobStatus.FAILED and failed.error.startswith("TypeError: ")
    assert queued_status(ws, job.id) in (None, "failed")  # procrastinate's record agrees


def test_permissions_are_checked_as_before(ws):
    with pytest.raises(PermissionDenied,
                       match="Starting a job of kind .evaluate. needs the admin role"):
        submit(ws, "evaluate", {}, user=CURATOR)
    with pytest.raises(PermissionDenied):
        submit(ws, "selftest", {}, user=None)
    assert list_jobs(ws) == []
    job = submit(ws, "index", {"retriever": "bm25"}, user=ANNOTATOR)
    with pytest.raises(PermissionDenied, match=r"needs its owner \(ann\) or the admin role; "
                       r"cur \(curator\) may not do it"):
        cancel_job(ws, job.id, user=CURATOR)
    with pytest.raises(PermissionDenied, match="no user was given"):
        cancel_job(ws, job.id, user=None)
    assert get_job(ws, job.id).status is JobStatus.QUEUED
    cancelled = cancel_job(ws, job.id, user=ANNOTATOR)
    assert (cancelled.status, cancelled.error) == (JobStatus.CANCELLED, "cancelled by ann")


def test_unknown_kinds_and_parameters_are_refused(ws):
    with pytest.raises(UnknownNameError, match="Available options: activate, cross_scores, "
                       "evaluate, index, measure_defaults, "
                       "probe, pubmed_search, rank, retrain, selftest, simulate, train, watch$"):
        submit(ws, "train-everything", {})
    with pytest.raises(CurationError, match=r"Job kind 'selftest' got unknown parameter\(s\) "
                       "epochs. Available options: steps"):
        submit(ws, "selftest", {"steps": 1, "epochs": 3})
    assert list_jobs(ws) == []
    assert queued_status(ws, 1) in (None, "absent")  # nothing was handed to a queue


def test_a_cancelled_queued_job_never_runs(ws):
    job = submit(ws, "probe", {"steps": 1})
    cancelled = cancel_job(ws, job.id, user=ADMIN)
    assert (cancelled.status, cancelled.error) == (JobStatus.CANCELLED, "cancelled by root")
    assert queued_status(ws, job.id) in (None, "cancelled")
    work(ws)
    assert RUNS == []
    assert get_job(ws, job.id).status is JobStatus.CANCELLED


def test_a_running_job_stops_at_its_next_progress_report_when_cancelled(ws):
    job = submit(ws, "probe", {"steps": 200, "pause": 0.05})
    worker = threading.Thread(target=work, args=(ws,))
    worker.start()
    wait_until(lambda: get_job(ws, job.id).progress > 0, "the job reports progress")
    assert get_job(ws, job.id).status is JobStatus.RUNNING
    assert cancel_job(ws, job.id, user=ADMIN).status is JobStatus.CANCELLED
    worker.join(timeout=30)
    assert not worker.is_alive()
    stopped = get_job(ws, job.id)
    assert (stopped.status, stopped.error) == (JobStatus.CANCELLED, "cancelled by root")
    assert 0 < stopped.progress < 0.5 and RUNS == []
    assert queued_status(ws, job.id) in (None, "aborted", "succeeded")


def test_two_workers_never_run_the_same_job(ws):
    ids = [submit(ws, "probe", {"steps": 2, "pause": 0.02}).id for _ in range(8)]
    workers = [threading.Thread(target=work, args=(ws, 2)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert not any(w.is_alive() for w in workers)
    assert sorted(RUNS) == ids  # every job ran, and ran once
    assert {get_job(ws, i).status for i in ids} == {JobStatus.DONE}
    assert {queued_status(ws, i) for i in ids} <= {None, "succeeded"}


def test_a_worker_that_dies_is_reported_failed_with_the_reason(ws, monkeypatch):
    monkeypatch.setattr(distributed, "STALLED_AFTER_S", 1.0)
    name = job_queue(ws).name
    job = submit(ws, "probe", {"steps": 600, "pause": 0.05})
    argv = ["table", str(ws.root), str(job.id)] if name == "table" else [name, str(ws.root)]
    proc = subprocess.Popen([sys.executable, "-m", "tests.job_probe", *argv], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: get_job(ws, job.id).progress > 0, "the worker runs the job", 60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    wait_until(lambda: get_job(ws, job.id).finished, "the dead worker is noticed", 30)
    failed = get_job(ws, job.id)
    assert failed.status is JobStatus.FAILED and failed.error.endswith("Start the job again")
    if name == "table":
        assert f"the worker process (pid {proc.pid}) stopped unexpectedly" in failed.error
    else:
        assert "sent no heartbeat for 1 s: it stopped or lost the database" in failed.error
        assert queued_status(ws, job.id) == "failed"  # written off there too, not run again
    assert RUNS == []


def test_the_worker_command_runs_the_queue(ws, capsys):
    from curation.cli.main import main

    ids = [submit(ws, "selftest", {"steps": 2}).id for _ in range(2)]
    assert main(["worker", "-w", str(ws.root), "--burst", "--concurrency", "2"]) == 0
    name = job_queue(ws).name
    assert capsys.readouterr().out == (f"worker for {ws.root} ({name} job queue, concurrency "
                                       "2)\n")
    assert [get_job(ws, i).status for i in ids] == [JobStatus.DONE, JobStatus.DONE]
    assert [get_job(ws, i).result["steps"] for i in ids] == [2, 2]


# -- procrastinate only: setting, errors, schema --------------------------------------------------
@pytest.fixture
def pg_ws(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch):
    register_probe(monkeypatch)
    RUNS.clear()
    workspace = Workspace.init(tmp_path / "ws", store_url=pg_url)
    yield workspace
    workspace.close()


def set_store_line(ws: Workspace, line: str) -> Path:
    path = ws.root / "store.toml"
    path.write_text(path.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    return path


def test_the_jobs_setting_chooses_the_queue(pg_ws):
    path = set_store_line(pg_ws, 'jobs = "table"')
    assert job_queue(pg_ws).name == "table"
    path.write_text(path.read_text().replace('"table"', '"celery"'), encoding="utf-8")
    with pytest.raises(WorkspaceError, match=rf"jobs in {path} is 'celery'. Available "
                       "options: table, procrastinate"):
        job_queue(pg_ws)


def test_an_abort_through_procrastinate_stops_the_job_and_says_so(pg_ws):
    job = submit(pg_ws, "probe", {"steps": 200, "pause": 0.05})
    worker = threading.Thread(target=work, args=(pg_ws,))
    worker.start()
    wait_until(lambda: get_job(pg_ws, job.id).progress > 0, "the job reports progress")
    broker = job_queue(pg_ws).broker
    assert broker.cancel(broker.find(job.id).id)  # procrastinate's own cancel, abort=True
    worker.join(timeout=30)
    stopped = get_job(pg_ws, job.id)
    assert stopped.status is JobStatus.CANCELLED
    assert stopped.error == "stopped through the job queue (user_request)"
    assert queued_status(pg_ws, job.id) == "aborted" and RUNS == []


def test_a_missing_extra_names_the_install_command(pg_ws, monkeypatch):
    monkeypatch.setattr("curation.store.pg_jobs._IMPORT_ERROR",
                        ImportError("No module named 'procrastinate'"))
    with pytest.raises(WorkspaceError, match=r"pip install 'kbcurate\[postgresql\]' \(or put "
                       'jobs = "table" in WS/store.toml'):
        submit(pg_ws, "selftest", {})
    assert list_jobs(pg_ws) == []  # refused before anything was stored


def test_a_server_that_cannot_be_reached_names_the_setting(pg_ws, pg_cluster):
    path = pg_ws.root / "store.toml"
    path.write_text(f'url = "{pg_cluster.url("no_such_db")}"\n', encoding="utf-8")
    with pytest.raises(WorkspaceError, match=rf"set in url in {path}: .*no_such_db.* does not "
                       "exist.* Check that the PostgreSQL server runs and that the URL is right"):
        submit(pg_ws, "selftest", {})
    failed = list_jobs(pg_ws)  # its row (in the open connection) records why
    assert [j.status for j in failed] == [JobStatus.FAILED]
    assert failed[0].error.startswith("not handed to the job queue: Job queue of the workspace")


def test_reads_and_cancels_keep_working_while_the_queue_cannot_be_asked(pg_ws, pg_cluster,
                                                                       caplog):
    job = submit(pg_ws, "selftest", {})
    path = pg_ws.root / "store.toml"
    path.write_text(f'url = "{pg_cluster.url("no_such_db")}"\n', encoding="utf-8")
    assert get_job(pg_ws, job.id).status is JobStatus.QUEUED  # shown as it is
    assert f"job {job.id}: cannot ask the job queue about its worker" in caplog.text
    assert cancel_job(pg_ws, job.id, user=ADMIN).status is JobStatus.CANCELLED
    assert f"job {job.id}: cancelled, but the job queue could not be told" in caplog.text


def test_the_worker_command_names_the_setting_when_the_server_is_down(pg_ws, pg_cluster,
                                                                      capsys):
    from curation.cli.main import main

    path = pg_ws.root / "store.toml"
    path.write_text(f'url = "{pg_cluster.url("no_such_db")}"\n', encoding="utf-8")
    assert main(["worker", "-w", str(pg_ws.root), "--burst"]) == 2
    err = capsys.readouterr().err
    assert f"set in url in {path}" in err and "no_such_db" in err and err.count("\n") == 1




def test_procrastinate_lives_in_its_own_schema_created_once(pg_ws, monkeypatch):
    from curation.store import pg_jobs

    tables = pg_ws.conn.table_names()
    monkeypatch.setattr(pg_jobs, "_SCHEMA_READY", set())
    broker = job_queue(pg_ws).broker
    threads = [threading.Thread(target=broker.ensure_schema) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert pg_jobs._SCHEMA_READY == {broker.url}
    assert pg_ws.conn.table_names() == tables  # the workspace's tables are untouched
    found = pg_ws.conn.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname = ? AND "
                               "tablename = 'procrastinate_jobs'", (pg_jobs.PG_SCHEMA,))
    assert found.fetchone()[0] == 1
    assert broker.queue == "kbcurate-" + broker.where.rsplit("/", 1)[1]


def test_a_failed_job_is_failed_in_procrastinate_too_with_one_log_line(pg_ws):
    job = submit(pg_ws, "selftest", {"steps": "three"})
    run = subprocess.run([sys.executable, "-m", "curation.cli.main", "worker", "-w",
                          str(pg_ws.root), "--burst"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert get_job(pg_ws, job.id).status is JobStatus.FAILED
    assert queued_status(pg_ws, job.id) == "failed"
    assert ("ended with status: Error" in run.stderr
            and f"(kbcurate job {job.id} (selftest) failed: TypeError: " in run.stderr)
    assert "procrastinate/worker.py" not in run.stderr  # no traceback of the worker's plumbing
