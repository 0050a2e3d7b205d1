"""Background jobs (indexing, evaluation, later training) that survive a page refresh.

A job is a row in the workspace's ``jobs`` table. :func:`submit_job` checks the user's role on the
server side, stores the job as ``queued`` and starts a worker *process* (``python -m
curation.jobs.worker WS JOB_ID``), so long work never runs in the Streamlit script thread and keeps
going when the page reloads. The worker reports progress into the row; any page reads it back with
:func:`get_job`. A job whose worker died is reported as failed.

Job kinds are registered in :data:`JOB_KINDS` as ``module:function``; the function is called as
``fn(ctx: JobContext, **params) -> dict`` and its result dict is stored as JSON.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from curation.access.users import User, require_admin
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import CurationError, UnknownNameError

logger = logging.getLogger(__name__)


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class JobKind:
    """A registered kind of background job."""

    name: str
    target: str
    description: str
    admin_only: bool = True

    def load(self) -> Callable[..., dict[str, Any]]:
        module, func = self.target.split(":")
        return getattr(importlib.import_module(module), func)


JOB_KINDS: dict[str, JobKind] = {
    kind.name: kind for kind in (
        JobKind("evaluate", "curation.evaluation.runner:run_evaluation",
                "evaluate retrievers on a schema's held-out queries"),
        JobKind("index", "curation.search.indexing:run_index_job",
                "build or update a retriever index over the workspace documents",
                admin_only=False),
        JobKind("train", "curation.training.jobs:run_training",
                "train a dense retriever on a schema's KB into a new model version"),
        JobKind("selftest", "curation.jobs.queue:selftest",
                "check that background workers start and report progress"),
    )
}


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    status: JobStatus
    progress: float
    message: str
    params: dict[str, Any]
    result: dict[str, Any]
    error: str
    created_by: str
    created_at: str
    updated_at: str
    pid: int | None

    @property
    def finished(self) -> bool:
        return self.status in (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


class JobContext:
    """Handed to a job function: progress reporting and cancellation checks."""

    def __init__(self, ws: Workspace, job_id: int) -> None:
        self.ws = ws
        self.job_id = job_id

    def progress(self, fraction: float, message: str = "") -> None:
        """Record progress (0..1) and a short message; raises when the job was cancelled."""
        with self.ws.transaction():
            self.ws.conn.execute(
                "UPDATE jobs SET progress = ?, message = ?, updated_at = ? WHERE id = ?",
                (min(max(fraction, 0.0), 1.0), message, utcnow(), self.job_id))
        if self.cancelled():
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def cancelled(self) -> bool:
        row = self.ws.conn.execute("SELECT status FROM jobs WHERE id = ?",
                                   (self.job_id,)).fetchone()
        return row is not None and row[0] == JobStatus.CANCELLED


class JobCancelled(CurationError):
    """Raised inside a job when a user cancelled it."""


def submit_job(
    ws: Workspace, kind: str, params: dict[str, Any], *, user: User | None,
    start: bool = True,
) -> Job:
    """Queue a job and start its worker process.

    Raises:
        UnknownNameError: Unknown job kind.
        PermissionDenied: An admin-only job requested by a non-admin (checked here, server side).
    """
    if kind not in JOB_KINDS:
        raise UnknownNameError("job kind", kind, JOB_KINDS)
    spec = JOB_KINDS[kind]
    if spec.admin_only:
        require_admin(user, f"Starting a job of kind {kind!r}")
    now = utcnow()
    with ws.transaction():
        job_id = int(ws.conn.execute(
            "INSERT INTO jobs(kind, status, params, created_by, created_at, updated_at) "
            "VALUES (?, 'queued', ?, ?, ?, ?)",
            (kind, json.dumps(params, sort_keys=True), user.name if user else "", now,
             now)).lastrowid)
        ws.audit(user.name if user else "", "submit", "job", str(job_id), after=params)
    if start:
        with open(_log_path(ws, job_id), "ab") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                [sys.executable, "-m", "curation.jobs.worker", str(ws.root), str(job_id)],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        with ws.transaction():
            ws.conn.execute("UPDATE jobs SET pid = ? WHERE id = ?", (proc.pid, job_id))
    return get_job(ws, job_id)


def _log_path(ws: Workspace, job_id: int) -> Path:
    folder = ws.root / "cache" / "jobs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"job-{job_id}.log"


def get_job(ws: Workspace, job_id: int) -> Job:
    """The job's current state (a running job whose worker died is marked failed)."""
    row = ws.conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        raise CurationError(f"No job with id {job_id}")
    job = _job(row)
    if job.status is JobStatus.RUNNING and job.pid and not _alive(job.pid):
        _finish(ws, job_id, JobStatus.FAILED, error="the worker process stopped unexpectedly; "
                f"see {_log_path(ws, job_id)}")
        return get_job(ws, job_id)
    return job


def wait_for_job(ws: Workspace, job_id: int, timeout: float = 60.0,
                 poll: float = 0.2) -> Job:
    """Block until the job is done, failed or cancelled (scripts and tests; never the UI).

    Raises:
        CurationError: The job is still unfinished after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        job = get_job(ws, job_id)
        if job.finished:
            return job
        if time.monotonic() >= deadline:
            raise CurationError(f"Job {job_id} is still {job.status.value} after {timeout:g} s "
                                f"({job.message or 'no progress message'})")
        time.sleep(poll)


def list_jobs(ws: Workspace, kind: str | None = None, limit: int = 50) -> list[Job]:
    """Most recent jobs first."""
    sql, params = "SELECT id FROM jobs", []
    if kind:
        sql += " WHERE kind = ?"
        params.append(kind)
    ids = [r[0] for r in ws.conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))]
    return [get_job(ws, i) for i in ids]


def cancel_job(ws: Workspace, job_id: int, *, user: User | None) -> Job:
    """Ask a queued or running job to stop (it stops at its next progress report)."""
    job = get_job(ws, job_id)
    if JOB_KINDS[job.kind].admin_only or (user and user.name != job.created_by):
        require_admin(user, f"Cancelling job {job_id}")
    if not job.finished:
        _finish(ws, job_id, JobStatus.CANCELLED, error="cancelled by " + (user.name if user
                                                                         else "?"))
    return get_job(ws, job_id)


def run_job(ws: Workspace, job_id: int) -> Job:
    """Execute a queued job in this process (what the worker does)."""
    job = get_job(ws, job_id)
    if job.status is not JobStatus.QUEUED:
        raise CurationError(f"Job {job_id} is {job.status.value}, not queued")
    with ws.transaction():
        ws.conn.execute("UPDATE jobs SET status = 'running', pid = ?, updated_at = ? WHERE id = ?",
                        (os.getpid(), utcnow(), job_id))
    try:
        result = JOB_KINDS[job.kind].load()(JobContext(ws, job_id), **job.params)
    except JobCancelled:
        return get_job(ws, job_id)
    except Exception as exc:  # noqa: BLE001 - any failure is recorded on the job
        logger.exception("job %d failed", job_id)
        _finish(ws, job_id, JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return get_job(ws, job_id)
    _finish(ws, job_id, JobStatus.DONE, result=result)
    return get_job(ws, job_id)


def _finish(ws: Workspace, job_id: int, status: JobStatus, *, error: str = "",
            result: dict[str, Any] | None = None) -> None:
    with ws.transaction():
        ws.conn.execute(
            "UPDATE jobs SET status = ?, error = ?, result = ?, updated_at = ?, "
            "progress = CASE WHEN ? = 'done' THEN 1.0 ELSE progress END WHERE id = ?",
            (status.value, error, json.dumps(result or {}, default=str), utcnow(),
             status.value, job_id))


def _job(row: Any) -> Job:
    data = dict(row)
    data["status"] = JobStatus(data["status"])
    data["params"] = json.loads(data["params"])
    data["result"] = json.loads(data["result"])
    return Job(**data)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of this process counts as dead
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def selftest(ctx: JobContext, steps: int = 3) -> dict[str, Any]:
    """A diagnostic job: reports ``steps`` progress updates and returns the worker's pid."""
    for i in range(steps):
        ctx.progress((i + 1) / steps, f"step {i + 1} of {steps}")
    return {"steps": steps, "pid": os.getpid()}
