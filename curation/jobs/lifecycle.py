"""A job's life in the process that runs it, on every job queue: claim it, run its kind's
function with a :class:`JobContext` (progress, cancellation) beside a
:class:`~curation.jobs.watchdog.Watchdog` (heartbeats, time limit), record its end; and read its
current state, failing it when its worker is gone.

What differs between queues is the :class:`JobQueue` interface, implemented in
:mod:`curation.jobs.queues` (the ``jobs`` table, one worker process per job) and
:mod:`curation.jobs.distributed` (procrastinate). The functions here that may need the queue
take ``queue_of``, the workspace's queue (:func:`curation.jobs.queues.job_queue`, or a queue's
own worker passing itself), and call it only for an unfinished job: building the queue of a
PostgreSQL workspace needs procrastinate. So the queues use this module and it imports none of
them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from curation.jobs.guards import retry_busy
from curation.jobs.kinds import get_kind
from curation.jobs.watchdog import Watchdog
from curation.store.errors import WorkspaceBusyError
from curation.store.jobs import Job, Jobs, JobStatus
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)


class JobQueue(Protocol):
    """How queued jobs reach workers (the part of the job queue that differs between queues).

    Attributes:
        name: The queue's name in ``WS/store.toml`` (``jobs = ...``).
    """

    name: str

    def start(self, ws: Workspace, job_id: int) -> None:
        """Hand the newly queued job ``job_id`` to a worker."""

    def worker_gone(self, ws: Workspace, job: Job) -> str | None:
        """Why the unfinished ``job`` can never finish (its worker is gone: the error to
        record, saying where to look), or None while it still may."""

    def stop(self, ws: Workspace, job: Job) -> None:
        """Tell the worker of ``job``, just recorded as cancelled, to stop."""

    def work(self, ws: Workspace, *, concurrency: int = 1, wait: bool = True) -> None:
        """Run queued jobs in this process, ``concurrency`` at a time, until interrupted
        (``wait``) or until none is left."""


#: ``queue_of(ws)``: the job queue of the workspace ``ws``.
QueueOf = Callable[[Workspace], JobQueue]


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
            Jobs(self.ws).record_progress(self.job_id, min(max(fraction, 0.0), 1.0), message)

        retry_busy(write, f"job {self.job_id}: progress")
        if self.cancelled():
            raise JobCancelled(f"job {self.job_id} is no longer running (cancelled, or failed "
                               "by its time limit)")

    def cancelled(self) -> bool:
        """Whether the job must stop: a user cancelled it, or its row was failed meanwhile
        (it ran out of time, or was written off as abandoned)."""
        return Jobs(self.ws).status(self.job_id) in (JobStatus.CANCELLED, JobStatus.FAILED)


class JobCancelled(CurationError):
    """Raised inside a job when a user cancelled it."""


def current_job(ws: Workspace, job_id: int, queue_of: QueueOf) -> Job:
    """The job's current state; an unfinished job whose worker is gone (the queue says why)
    is recorded as failed with the reason.

    Raises:
        CurationError: No job has that id.
    """
    job = Jobs(ws).load(job_id)
    if job is None:
        raise CurationError(f"No job with id {job_id}")
    if job.finished:
        return job
    error = queue_of(ws).worker_gone(ws, job)
    return job if error is None else _fail_abandoned(ws, job, error)


def _fail_abandoned(ws: Workspace, job: Job, error: str) -> Job:
    """Record ``job`` as failed with ``error`` unless its row changed meanwhile."""
    try:
        Jobs(ws).fail_unchanged(job, error)
    except WorkspaceBusyError as exc:  # report it now, record it on a later look
        logger.warning("job %d: could not record that its worker is gone (%s)", job.id, exc)
        return replace(job, status=JobStatus.FAILED, error=error)
    logger.warning("job %d (%s) failed: %s", job.id, job.kind, error)
    return Jobs(ws).load(job.id) or replace(job, status=JobStatus.FAILED, error=error)


def execute_job(ws: Workspace, job_id: int, queue_of: QueueOf, *,
                context: JobContext | None = None, end_process: bool = False) -> Job:
    """Execute a queued job in this process (what every worker does).

    Claiming the job and recording its end wait out a busy workspace
    (:func:`~curation.jobs.guards.retry_busy`). A :class:`~curation.jobs.watchdog.Watchdog`
    sends its heartbeats (table queue) and fails it when it runs longer than its kind allows.

    Args:
        ws: The workspace.
        job_id: The queued job.
        queue_of: The workspace's job queue (see the module docstring).
        context: What the job function gets (a queue's worker passes its own subclass);
            default a :class:`JobContext`.
        end_process: This process runs only this job, in its main thread (the table queue's
            worker process): a job that overruns its time is stopped with SIGTERM, and the
            process ends if it does not stop.

    Raises:
        CurationError: The job is not queued (already claimed, cancelled or failed).
        WorkspaceBusyError: The workspace stayed busy through every retry of the claim.
    """
    job = current_job(ws, job_id, queue_of)
    if job.status is not JobStatus.QUEUED:
        raise CurationError(f"Job {job_id} is {job.status.value}, not queued")
    kind = get_kind(job.kind)
    retry_busy(lambda: _claim(ws, job_id), f"job {job_id}: mark running")
    try:
        with Watchdog(ws, job_id, kind, beats=queue_of(ws).name == "table",
                      end_process=end_process):
            result = kind.load()(context or JobContext(ws, job_id), **job.params)
    except JobCancelled as exc:  # a user's cancel (the row says so already) or a stop signal
        finish_job(ws, job_id, JobStatus.CANCELLED, error=str(exc))
        return current_job(ws, job_id, queue_of)
    except Exception as exc:  # noqa: BLE001 - any failure is recorded on the job
        logger.exception("job %d failed", job_id)
        finish_job(ws, job_id, JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return current_job(ws, job_id, queue_of)
    finish_job(ws, job_id, JobStatus.DONE, result=result)
    return current_job(ws, job_id, queue_of)


def _claim(ws: Workspace, job_id: int) -> None:
    """Mark the job running with this process's pid, if it is still queued."""
    if not Jobs(ws).claim(job_id, os.getpid()):
        status = Jobs(ws).status(job_id)
        raise CurationError(f"Job {job_id} is {status if status else 'gone'}, not queued")


def finish_job(ws: Workspace, job_id: int, status: JobStatus, *, error: str = "",
               result: dict[str, Any] | None = None) -> None:
    """Record the end of a running job (waiting out a busy workspace); a job cancelled
    meanwhile stays cancelled."""
    def write() -> None:
        Jobs(ws).set_final_status(job_id, status, error=error, result=result,
                                  was=(JobStatus.RUNNING,))

    retry_busy(write, f"job {job_id}: record {status.value}")


def record_busy(ws: Workspace, job_id: int, error: str) -> None:
    """Mark the unfinished job failed because the workspace stayed busy (one attempt)."""
    try:
        Jobs(ws).fail_unfinished(job_id, error)
    except WorkspaceBusyError:
        logger.error("job %d: could not record the failure; the app reports it from this log",
                     job_id)
