"""Issue 36 item 8: stopping ``kbcurate demo`` (TERM) left its job worker encoding, and a
cancelled index build stopped only at its next progress report, a minute later. A cancel now
signals the job's own worker process group, which stops at once and records the job cancelled;
``kbcurate demo`` cancels the jobs it started when it stops."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curation.access.users import Role, User
from curation.cli import commands
from curation.cli.main import main
from curation.jobs.kinds import SYSTEM_USER
from curation.jobs.queue import (
    JobStatus,
    cancel_job,
    get_job,
    newest_job_id,
    stop_jobs_after,
    submit_job,
)
from curation.jobs.queues import TABLE_QUEUE
from curation.store.jobs import Jobs
from curation.store.workspace import Workspace
from tests.job_probe import register_probe

ROOT = Path(__file__).resolve().parents[1]
ADMIN = User("boss", Role.ADMIN)


def _wait_until(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.1)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    register_probe(monkeypatch)
    with Workspace.init(tmp_path / "ws") as w:
        yield w


def _start_worker(ws: Workspace, job_id: int) -> subprocess.Popen:
    """The table queue's worker, as TableQueue.start runs it (its own session), knowing the
    probe kind."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.job_probe", "table", str(ws.root),
                             str(job_id)], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_until(lambda: get_job(ws, job_id).status is JobStatus.RUNNING, "the worker claims it")
    return proc


def test_a_cancel_stops_a_worker_between_its_progress_reports(ws):
    # one step of 10 minutes: without the signal the worker would only notice at its end
    job = submit_job(ws, "probe", {"steps": 1, "pause": 600}, user=ADMIN, start=False)
    proc = _start_worker(ws, job.id)
    try:
        cancelled = cancel_job(ws, job.id, user=ADMIN)
        assert cancelled.status is JobStatus.CANCELLED
        assert proc.wait(timeout=30) == 1  # stopped within seconds, not after 600 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    final = get_job(ws, job.id)
    assert final.status is JobStatus.CANCELLED and final.error == "cancelled by boss"


def test_a_stop_signal_alone_records_the_job_cancelled(ws):
    job = submit_job(ws, "probe", {"steps": 1, "pause": 600}, user=ADMIN, start=False)
    proc = _start_worker(ws, job.id)
    try:
        os.killpg(proc.pid, 15)
        assert proc.wait(timeout=30) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    final = get_job(ws, job.id)
    assert (final.status, final.error) == (JobStatus.CANCELLED, "stopped by SIGTERM")


def test_a_job_run_inside_this_process_is_never_signalled(ws, monkeypatch):
    """A job run by ``kbcurate worker`` or a test records that process's pid: a cancel must not
    signal it (it would stop every job of that worker, or the test run)."""
    job = submit_job(ws, "selftest", {"steps": 1}, user=ADMIN, start=False)
    Jobs(ws).claim(job.id, os.getpid())
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: sent.append((pid, sig)))
    TABLE_QUEUE.stop(ws, get_job(ws, job.id))
    assert sent == []


def test_stop_jobs_after_cancels_only_the_newer_unfinished_jobs(ws):
    old = submit_job(ws, "selftest", {"steps": 1}, user=ADMIN, start=False)
    mark = newest_job_id(ws)
    assert mark == old.id
    new = [submit_job(ws, "selftest", {"steps": 1}, user=SYSTEM_USER, start=False)
           for _ in range(2)]
    assert stop_jobs_after(ws, mark, user=SYSTEM_USER) == [new[1].id, new[0].id]
    assert get_job(ws, old.id).status is JobStatus.QUEUED
    assert {get_job(ws, j.id).status for j in new} == {JobStatus.CANCELLED}


def test_the_demo_stops_its_jobs_when_the_app_stops(tmp_path, monkeypatch, capsys):
    started: list[int] = []

    def fake_build(root, data_dir, progress, rank):
        Workspace.init(root).close()
        return "demo ready"

    def fake_index(root):
        with Workspace.open(root) as ws:
            started.append(submit_job(ws, "selftest", {"steps": 1}, user=SYSTEM_USER,
                                      start=False).id)

    def fake_serve(args):
        raise KeyboardInterrupt  # Ctrl+C / TERM ends the app

    monkeypatch.setattr("curation.cli.demo.build_demo_workspace", fake_build)
    monkeypatch.setattr(commands, "_start_dense_index", fake_index)
    monkeypatch.setattr(commands, "cmd_serve", fake_serve)
    assert main(["demo", "-w", str(tmp_path / "demo"), "--quiet"]) == 130
    with Workspace.open(tmp_path / "demo") as ws:
        assert get_job(ws, started[0]).status is JobStatus.CANCELLED
    assert f"stopped 1 background job(s) of this demo: {started[0]}" in capsys.readouterr().err
