"""Issue 42 item 3 (the job part): every job has an end, and asking again for work an unfinished
job does says who runs it.

A hostile server trickling bytes held a ``pubmed_search`` job "running" at 0% for ten minutes
with a live heartbeat, and a second curator asking for the same search was silently handed that
job. Now a job still running after its kind's limit is failed with a clear error (so
:func:`get_job` reports it failed and the same work can be asked for again), its own worker
process is stopped even inside a blocking read, and a repeated request is told "already running
since HH:MM UTC (started by X, N% done)".
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from curation.access.users import Role, User
from curation.jobs import kinds
from curation.jobs.kinds import JobKind
from curation.jobs.queue import (
    JobStatus,
    duplicate_note,
    get_job,
    job_state_note,
    run_job,
    submit_job,
)
from curation.jobs.watchdog import OVERRUN_EXIT
from curation.store.jobs import Jobs
from curation.store.workspace import Workspace
from tests import stuck_job

ROOT = Path(__file__).resolve().parents[1]
ADMIN, ADA = User("root", Role.ADMIN), User("ada", Role.ADMIN)
GATE = threading.Event()


def wait_at_the_gate(ctx, key: str = "a") -> dict:
    """Report 25%, wait for :data:`GATE` (a blocking call), then report again."""
    ctx.progress(0.25, "waiting at the gate")
    GATE.wait(30)
    ctx.progress(0.5, "through the gate")
    return {"through": True}


SLOW = JobKind("slow", f"{__name__}:wait_at_the_gate", "test kind: waits for the gate",
               params=("key",), unique_by=("key",), max_seconds=0.5)


def overrun(kind: str, took: str) -> str:
    env = f"KBCURATE_JOB_MAX_MINUTES_{kind.upper()}"
    return (f"stopped after {took}: longer than the longest a {kind} job may run ({took}); it "
            "was most likely waiting on a server that answers too slowly, or hung. Start it "
            f"again; to allow longer runs, set {env}=MINUTES in the environment of the app "
            "and of the job workers")


def wait_until(check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


@pytest.fixture
def trickle_port() -> Iterator[int]:
    """A loopback server that sends one byte every 0.1 s to whoever connects, for ever."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def feed(conn: socket.socket) -> None:
        with conn:
            while not stop.wait(0.1):
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=feed, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def start_worker(ws: Workspace, job_id: int, *extra: str) -> subprocess.Popen:
    """The table queue's worker process for ``job_id`` (its own session), knowing the stuck
    kinds."""
    return subprocess.Popen([sys.executable, "-m", "tests.stuck_job", str(ws.root), str(job_id),
                             *extra], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_a_job_past_its_time_is_failed_and_the_same_work_can_be_asked_again(tmp_workspace,
                                                                            monkeypatch):
    monkeypatch.setattr(kinds, "JOB_KINDS", kinds.job_kind_registry([SLOW]))
    GATE.clear()
    job = submit_job(tmp_workspace, "slow", {"key": "a"}, user=ADMIN, start=False)
    ended = []

    def worker() -> None:
        with Workspace.open(tmp_workspace.root) as own:
            ended.append(run_job(own, job.id))

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        wait_until(lambda: get_job(tmp_workspace, job.id).status is JobStatus.FAILED,
                   "the job is failed by its time limit")
        failed = get_job(tmp_workspace, job.id)
        assert (failed.error, failed.progress) == (overrun("slow", "0.5 s"), 0.25)
        again = submit_job(tmp_workspace, "slow", {"key": "a"}, user=ADA, start=False)
        assert again.id != job.id and not again.joined  # a new job, not the stuck one
        assert duplicate_note(again) == ""
    finally:
        GATE.set()
        thread.join(30)
    (done,) = ended  # its code stopped at its next progress report; the row stays failed
    assert (done.status, done.error) == (JobStatus.FAILED, overrun("slow", "0.5 s"))


def test_a_worker_stuck_in_a_trickling_read_is_failed_and_ends(tmp_workspace, monkeypatch,
                                                                trickle_port):
    """The issue's case: no progress report, a live heartbeat, a read that never ends."""
    stuck_job.register(monkeypatch)
    job = submit_job(tmp_workspace, "stuck", {"port": trickle_port}, user=ADMIN, start=False)
    proc = start_worker(tmp_workspace, job.id)
    try:
        assert proc.wait(timeout=30) == 1  # SIGTERM interrupted the read at once
    finally:
        proc.kill()
        proc.wait()
    failed = get_job(tmp_workspace, job.id)
    assert (failed.status, failed.error) == (JobStatus.FAILED, overrun("stuck", "1 s"))
    log = proc.stderr.read().decode()
    assert f"job {job.id} (stuck): stopped after 1 s: longer than the longest" in log
    again = submit_job(tmp_workspace, "stuck", {"port": trickle_port}, user=ADMIN, start=False)
    assert again.id != job.id and again.status is JobStatus.QUEUED


def test_a_worker_deaf_to_its_stop_signal_ends_after_the_grace(tmp_workspace, monkeypatch,
                                                               trickle_port):
    stuck_job.register(monkeypatch)
    job = submit_job(tmp_workspace, "stubborn", {"port": trickle_port}, user=ADMIN,
                     start=False)
    proc = start_worker(tmp_workspace, job.id, "0.5")  # 0.5 s of grace after SIGTERM
    try:
        assert proc.wait(timeout=30) == OVERRUN_EXIT
    finally:
        proc.kill()
        proc.wait()
    assert "the worker did not stop within 0.5 s of SIGTERM; ending the worker process" in \
        proc.stderr.read().decode()
    failed = get_job(tmp_workspace, job.id)
    assert (failed.status, failed.error) == (JobStatus.FAILED, overrun("stubborn", "1 s"))


def test_asking_again_says_since_when_by_whom_and_how_far(tmp_workspace, monkeypatch):
    monkeypatch.setattr(kinds, "JOB_KINDS", kinds.job_kind_registry([SLOW]))
    first = submit_job(tmp_workspace, "slow", {"key": "b"}, user=ADMIN, start=False)
    queued = submit_job(tmp_workspace, "slow", {"key": "b"}, user=ADA, start=False)
    assert queued.id == first.id and queued.joined and not first.joined
    assert queued == first  # the flag is not part of the record
    at = datetime.fromisoformat(first.created_at)
    hhmm = at.strftime("%H:%M")
    assert duplicate_note(queued, now=at) == (
        f"already queued since {hhmm} UTC (started by root, waiting for a worker)")
    assert duplicate_note(first, now=at) == ""  # this request queued it
    Jobs(tmp_workspace).claim(first.id, os.getpid())
    Jobs(tmp_workspace).record_progress(first.id, 0.35, "halfway there")
    running = submit_job(tmp_workspace, "slow", {"key": "b"}, user=ADA, start=False)
    assert running.id == first.id and running.joined
    assert duplicate_note(running, now=at) == (
        f"already running since {hhmm} UTC (started by root, 35% done)")
    assert job_state_note(running, now=at + timedelta(days=1)) == (
        f"running since {at:%Y-%m-%d %H:%M} UTC (started by root, 35% done)")


def test_the_pubmed_panel_tells_a_second_curator_who_runs_the_search(tmp_path, monkeypatch):
    """bob's page shows the search form; alice's search of the same relation starts meanwhile;
    bob's click is told whose search runs, since when and how far it got."""
    from app_helpers import APP, add_users, build_app_workspace, shown, sign_in
    from streamlit.testing.v1 import AppTest

    from curation.pubmed.jobs import submit_pubmed_search

    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator", bob="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    monkeypatch.setenv("NCBI_EMAIL", "lab@lab.org")
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "bob")
    at.text_input(key="rel_search").set_value("BRAF").run()
    assert at.button(key="pubmed_search")
    with Workspace.open(root) as ws:
        job = submit_pubmed_search(ws, ws.schemas()["PO"], {"gene": "BRAF", "variant": "V600E"},
                                   user=User("alice", Role.CURATOR), start=False)
        Jobs(ws).claim(job.id, os.getpid())  # its worker: alive, 40% done
        Jobs(ws).record_progress(job.id, 0.4, "fetched 80 of 200")
    at.button(key="pubmed_search").click().run()
    assert not at.exception
    hhmm = datetime.fromisoformat(job.created_at).strftime("%H:%M")
    assert [shown(i.value) for i in at.info if "not started twice" in i.value] == [
        f"This relation's PubMed search (job {job.id}) is already running since {hhmm} UTC "
        "(started by alice, 40% done); it was not started twice: its results show here when "
        "it ends."]
    with Workspace.open(root) as ws:
        assert Jobs(ws).ids("pubmed_search", 10) == [job.id]
