"""Background jobs (indexing, evaluation, later training) that survive a page refresh.

A job is a row in the workspace's ``jobs`` table. :func:`submit_job` checks the user's role on the
server side, stores the job as ``queued`` and hands it to the workspace's job queue
(:func:`curation.jobs.backends.job_queue`): by default a worker *process* (``python -m
curation.jobs.worker WS JOB_ID``) on this machine; on PostgreSQL, procrastinate workers on any
machine (``kbcurate worker``). Long work never runs in the Streamlit script thread and keeps going
when the page reloads. The worker reports progress into the row; any page reads it back with
:func:`get_job`, whichever queue ran it.

Job kinds are registered in :data:`JOB_KINDS` as ``module:function``; the function is called as
``fn(ctx: JobContext, **params) -> dict`` and its result dict is stored as JSON. Each kind declares
the parameter names it accepts (``params``); :func:`submit_job` refuses any other name, listing the
allowed ones, and then calls the kind's ``validator`` (``"module:function"``, called as
``fn(ws, params)``, raising :class:`CurationError`) to check the values, e.g. that every path lies
inside the workspace (:func:`curation.jobs.guards.workspace_path`). A new kind is one line::

    JobKind("retrain", "curation.training.jobs:run_retrain", "...", params=("schema", "options"),
            validator="curation.training.jobs:check_retrain_params")

Workers that stop: :func:`get_job` reports a job as failed, with the reason and the end of the
worker's log, when its worker process is gone, whether it was running or still queued (killed
before it claimed the job), and when a queued job never got a worker (no pid after
:data:`ORPHAN_AFTER_S`); on procrastinate, when its worker stopped sending heartbeats
(:mod:`curation.jobs.distributed`). Such jobs are failed, not re-queued: a worker that dies at
start-up would die again, and a failed job lets :func:`curation.search.choices.ensure_index_job`
start a fresh one.
Workers wait for a busy workspace (:func:`curation.jobs.guards.retry_busy`) instead of dying.
On the table queue :func:`run_job` sends a heartbeat (the row's ``updated_at``) every
:data:`~curation.jobs.records.HEARTBEAT_S`; a running job without one for
:data:`~curation.jobs.records.STALE_AFTER_S` is failed as abandoned even when its pid runs (reused
by another process).

Who may cancel: the job's owner (kinds open to every role) or an admin. ``user=None`` may cancel
nothing; internal callers (the CLI's demo, maintenance scripts, benchmarks) act as
:data:`SYSTEM_USER`, an admin whose name no real user can have.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from curation.access.users import PermissionDenied, User, require_admin
from curation.jobs.backends import job_queue
from curation.jobs.guards import retry_busy
from curation.jobs.kinds import JOB_KINDS, SYSTEM_USER, JobKind
from curation.jobs.records import HEARTBEAT_S, ORPHAN_AFTER_S, Job, JobStatus
from curation.jobs.records import job_from_row as _job
from curation.store.backend import open_connection
from curation.store.errors import DATABASE_ERRORS, WorkspaceBusyError, WorkspaceError
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import CurationError, UnknownNameError

__all__ = ["JOB_KINDS", "ORPHAN_AFTER_S", "SYSTEM_USER", "Job", "JobCancelled", "JobContext",
           "JobKind", "JobStatus", "cancel_job", "check_may_cancel", "get_job", "list_jobs",
           "run_job", "selftest", "submit_job", "wait_for_job"]

logger = logging.getLogger(__name__)


class JobContext:
    """Handed to a job function: progress reporting and cancellation checks."""

    def __init__(self, ws: Workspace, job_id: int) -> None:
        self.ws = ws
        self.job_id = job_id

    def progress(self, fraction: float, message: str = "") -> None:
        """Record progress (0..1) and a short message; raises when the job was cancelled.

        A busy workspace is waited out (:func:`~curation.jobs.guards.retry_busy`).
        """
        def write() -> None:
            with self.ws.transaction():
                self.ws.conn.execute(
                    "UPDATE jobs SET progress = ?, message = ?, updated_at = ? WHERE id = ?",
                    (min(max(fraction, 0.0), 1.0), message, utcnow(), self.job_id))

        retry_busy(write, f"job {self.job_id}: progress")
        if self.cancelled():
            raise JobCancelled(f"job {self.job_id} was cancelled")

    def cancelled(self) -> bool:
        row = self.ws.conn.execute("SELECT status FROM jobs WHERE id = ?",
                                   (self.job_id,)).fetchone()
        return row is not None and row[0] == JobStatus.CANCELLED


class JobCancelled(CurationError):
    """Raised inside a job when a user cancelled it."""


def submit_job(
    ws: Workspace, kind: str, params: Mapping[str, Any], *, user: User | None,
    start: bool = True,
) -> Job:
    """Queue a job and hand it to the workspace's job queue (a worker process by default).

    Args:
        ws: The workspace.
        kind: A name from :data:`JOB_KINDS`.
        params: The job's parameters: only the names its kind declares.
        user: Who submits it (:data:`SYSTEM_USER` for internal callers).
        start: Hand it to the queue (tests pass False and call :func:`run_job`).

    Raises:
        UnknownNameError: Unknown job kind.
        PermissionDenied: No user, or an admin-only job requested by a non-admin (checked
            here, server side).
        CurationError: A parameter the kind does not accept, or a bad value (its validator).
        WorkspaceError: The job queue cannot be used (procrastinate missing, server down); the
            message names the setting or the extra to install.
    """
    if kind not in JOB_KINDS:
        raise UnknownNameError("job kind", kind, JOB_KINDS)
    spec = JOB_KINDS[kind]
    if user is None:  # every job has an owner: a signed-in user or SYSTEM_USER
        raise PermissionDenied(f"Starting a job of kind {kind!r} needs a signed-in user; "
                               "internal callers pass user=SYSTEM_USER")
    if spec.admin_only:
        require_admin(user, f"Starting a job of kind {kind!r}")
    if not isinstance(params, Mapping):
        raise CurationError(f"Job parameters must be a mapping of names to values, not "
                            f"{type(params).__name__}; available options: {', '.join(spec.params)}")
    spec.check(ws, params)
    queue = job_queue(ws)
    actor = user.name
    with ws.transaction():
        job_id = int(ws.conn.execute(
            "INSERT INTO jobs(kind, status, params, created_by, created_at, updated_at) "
            "VALUES (?, 'queued', ?, ?, ?, ?)",
            (kind, json.dumps(dict(params), sort_keys=True), actor, utcnow(),
             utcnow())).lastrowid)
        ws.audit(actor, "submit", "job", str(job_id), after=dict(params))
    if start:
        queue.start(ws, job_id)
    return get_job(ws, job_id)


def get_job(ws: Workspace, job_id: int) -> Job:
    """The job's current state; a job whose worker is gone is marked failed (see the module
    docstring)."""
    row = ws.conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        raise CurationError(f"No job with id {job_id}")
    job = _job(row)
    if job.finished:
        return job
    error = job_queue(ws).worker_gone(ws, job)
    return job if error is None else _fail_abandoned(ws, job, error)


def _fail_abandoned(ws: Workspace, job: Job, error: str) -> Job:
    """Record ``job`` as failed with ``error`` unless its row changed meanwhile."""
    try:
        with ws.transaction():
            ws.conn.execute(
                "UPDATE jobs SET status = 'failed', error = ?, updated_at = ? "
                "WHERE id = ? AND status = ? AND pid IS ?",
                (error, utcnow(), job.id, job.status.value, job.pid))
    except WorkspaceBusyError as exc:  # report it now, record it on a later look
        logger.warning("job %d: could not record that its worker is gone (%s)", job.id, exc)
        return replace(job, status=JobStatus.FAILED, error=error)
    logger.warning("job %d (%s) failed: %s", job.id, job.kind, error)
    return _job(ws.conn.execute("SELECT * FROM jobs WHERE id = ?", (job.id,)).fetchone())


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
    """Ask a queued or running job to stop (it stops at its next progress report; the job
    queue is told too, e.g. procrastinate cancels or aborts its job).

    Raises:
        PermissionDenied: ``user`` is None, or neither the job's owner nor an admin (an
            admin-only kind needs an admin).
    """
    job = get_job(ws, job_id)
    user = check_may_cancel(job, user)
    if not job.finished:
        with ws.transaction():
            _set_final(ws, job_id, JobStatus.CANCELLED, error=f"cancelled by {user.name}",
                       was=(JobStatus.QUEUED, JobStatus.RUNNING))
            ws.audit(user.name, "cancel", "job", str(job_id), before=job.status.value)
        job_queue(ws).stop(ws, job)
    return get_job(ws, job_id)


def check_may_cancel(job: Job, user: User | None) -> User:
    """``user`` when they may cancel ``job``, else :class:`PermissionDenied` (server side)."""
    action = f"Cancelling job {job.id} ({job.kind})"
    if user is None:
        raise PermissionDenied(f"{action} needs its owner or an admin; no user was given "
                               "(internal callers pass user=SYSTEM_USER)")
    spec = JOB_KINDS.get(job.kind)
    if user.is_admin:
        return user
    if spec is None or spec.admin_only:
        require_admin(user, action)
    if not job.created_by or user.name != job.created_by:
        owner = job.created_by or "the system"
        raise PermissionDenied(f"{action} needs its owner ({owner}) or the admin role; "
                               f"{user.name} ({user.role.value}) may not do it")
    return user


def run_job(ws: Workspace, job_id: int, *, context: JobContext | None = None) -> Job:
    """Execute a queued job in this process (what the worker does).

    Claiming the job and recording its end wait out a busy workspace
    (:func:`~curation.jobs.guards.retry_busy`).

    Args:
        ws: The workspace.
        job_id: The queued job.
        context: What the job function gets (a queue's worker passes its own subclass);
            default a :class:`JobContext`.

    Raises:
        CurationError: The job is not queued (already claimed, cancelled or failed).
        WorkspaceBusyError: The workspace stayed busy through every retry of the claim.
    """
    job = get_job(ws, job_id)
    if job.status is not JobStatus.QUEUED:
        raise CurationError(f"Job {job_id} is {job.status.value}, not queued")
    retry_busy(lambda: _claim(ws, job_id), f"job {job_id}: mark running")
    try:
        with _heartbeat(ws, job_id):
            result = JOB_KINDS[job.kind].load()(context or JobContext(ws, job_id), **job.params)
    except JobCancelled:
        return get_job(ws, job_id)
    except Exception as exc:  # noqa: BLE001 - any failure is recorded on the job
        logger.exception("job %d failed", job_id)
        _finish(ws, job_id, JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return get_job(ws, job_id)
    _finish(ws, job_id, JobStatus.DONE, result=result)
    return get_job(ws, job_id)


@contextmanager
def _heartbeat(ws: Workspace, job_id: int) -> Iterator[None]:
    """While the block runs, touch the running job's row every :data:`HEARTBEAT_S` seconds
    (from a thread with its own connection) so that :func:`get_job` can tell a live worker from
    a dead one whose pid another process now has (table queue; procrastinate has its own)."""
    if job_queue(ws).name != "table":
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        try:
            own = Workspace(ws.root, open_connection(ws.root))
        except (*DATABASE_ERRORS, WorkspaceError) as exc:
            logger.warning("job %d: no heartbeat connection (%s)", job_id, exc)
            return
        with own:
            while not stop.wait(HEARTBEAT_S):
                try:
                    with own.transaction():
                        own.conn.execute("UPDATE jobs SET updated_at = ? WHERE id = ? AND "
                                         "status = 'running'", (utcnow(), job_id))
                except (*DATABASE_ERRORS, WorkspaceError) as exc:  # the next beat tries again
                    logger.warning("job %d: heartbeat not recorded (%s)", job_id, exc)

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _claim(ws: Workspace, job_id: int) -> None:
    """Mark the job running with this process's pid, if it is still queued."""
    with ws.transaction():
        claimed = ws.conn.execute(
            "UPDATE jobs SET status = 'running', pid = ?, updated_at = ? "
            "WHERE id = ? AND status = 'queued'", (os.getpid(), utcnow(), job_id)).rowcount
    if not claimed:
        status = ws.conn.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        raise CurationError(f"Job {job_id} is {status[0] if status else 'gone'}, not queued")


def _finish(ws: Workspace, job_id: int, status: JobStatus, *, error: str = "",
            result: dict[str, Any] | None = None) -> None:
    """Record the end of a running job (waiting out a busy workspace); a job cancelled
    meanwhile stays cancelled."""
    def write() -> None:
        with ws.transaction():
            _set_final(ws, job_id, status, error=error, result=result,
                       was=(JobStatus.RUNNING,))

    retry_busy(write, f"job {job_id}: record {status.value}")


def _set_final(ws: Workspace, job_id: int, status: JobStatus, *, error: str = "",
               result: dict[str, Any] | None = None,
               was: tuple[JobStatus, ...]) -> bool:
    """Set a final status (inside a transaction) if the job is in one of ``was``."""
    marks = ", ".join("?" * len(was))
    return bool(ws.conn.execute(
        "UPDATE jobs SET status = ?, error = ?, result = ?, updated_at = ?, "
        "progress = CASE WHEN ? = 'done' THEN 1.0 ELSE progress END "
        f"WHERE id = ? AND status IN ({marks})",
        (status.value, error, json.dumps(result or {}, default=str), utcnow(), status.value,
         job_id, *(w.value for w in was))).rowcount)


def selftest(ctx: JobContext, steps: int = 3) -> dict[str, Any]:
    """A diagnostic job: reports ``steps`` progress updates and returns the worker's pid."""
    for i in range(steps):
        ctx.progress((i + 1) / steps, f"step {i + 1} of {steps}")
    return {"steps": steps, "pid": os.getpid()}
