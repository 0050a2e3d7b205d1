"""Jobs for many workers: the job queue of a PostgreSQL workspace, through procrastinate.

:func:`~curation.jobs.queue.submit_job` stores the job in the ``jobs`` table as on every queue
and then defers one procrastinate job carrying its id (:mod:`curation.store.pg_jobs`).
Workers, ``kbcurate worker -w WS`` on any machine that reaches the database
(:meth:`ProcrastinateQueue.work`), claim procrastinate jobs with row locks, so two workers never
run the same job, and run each with :func:`~curation.jobs.lifecycle.execute_job` in a workspace
connection of their own. The ``jobs``
row stays the record the app and the CLI read (status, progress, result, error, owner).

- **Cancel**: :func:`~curation.jobs.queue.cancel_job` records the cancel in the row, then asks
  procrastinate to cancel a waiting job or abort a running one. The job stops at its next
  progress report (:class:`QueueJobContext` also stops on an abort requested through
  procrastinate's own tools, and when the row was written off).
- **Stale workers**: a worker sends a heartbeat every :data:`HEARTBEAT_S`. :meth:`worker_gone`
  fails a running job whose worker sent none for :data:`STALLED_AFTER_S` (procrastinate's
  ``get_stalled_jobs``), and records its procrastinate job as failed too: it is not run again,
  as on the table queue. A job procrastinate finished while its row never recorded an end, and
  a queued row never handed to procrastinate within :data:`~curation.jobs.records.ORPHAN_AFTER_S`,
  fail the same way. A queued job waits for a worker however long none runs.

Every machine running workers needs the workspace folder (indexes, models, caches) at the same
path as the app's, e.g. on shared storage: job options carry absolute paths inside it.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from pathlib import Path

from curation.jobs.guards import retry_busy
from curation.jobs.lifecycle import JobContext, QueueOf, execute_job, finish_job, record_busy
from curation.jobs.records import ORPHAN_AFTER_S
from curation.store.database import StoreSettings
from curation.store.errors import WorkspaceBusyError, WorkspaceError
from curation.store.jobs import Job, Jobs, JobStatus
from curation.store.pg_jobs import UNFINISHED, PgJobBroker
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Seconds between a worker's heartbeats.
HEARTBEAT_S = 10.0
#: A running job whose worker sent no heartbeat for this long is failed (3 missed heartbeats).
STALLED_AFTER_S = 30.0


class ProcrastinateQueue:
    """The job queue on the workspace's PostgreSQL server (see the module docstring).

    Args:
        settings: The workspace's store setting (its URL; named in errors).

    Raises:
        WorkspaceError: procrastinate is not installed (names the extra).
    """

    name = "procrastinate"

    def __init__(self, settings: StoreSettings) -> None:
        self.broker = PgJobBroker(settings.url, settings.setting)

    def start(self, ws: Workspace, job_id: int) -> None:
        """Defer the job to procrastinate; when that fails the row is failed with the reason
        before the error is raised."""
        try:
            queued_id = self.broker.defer(job_id)
        except CurationError as exc:
            try:
                Jobs(ws).fail_queued(job_id, f"not handed to the job queue: {exc}")
            except WorkspaceError as again:  # the orphan check fails it later
                logger.warning("job %d: could not record the failure (%s)", job_id, again)
            raise
        logger.info("job %d: queued as procrastinate job %d on %s", job_id, queued_id,
                    self.broker.queue)

    def worker_gone(self, ws: Workspace, job: Job) -> str | None:
        """Why the unfinished ``job`` can never finish, from procrastinate's record of it
        (None, with a warning logged, while the queue cannot be asked: the row is shown as
        it is)."""
        try:
            queued = self.broker.find(job.id, stalled_after_s=STALLED_AFTER_S)
        except WorkspaceError as exc:
            logger.warning("job %d: cannot ask the job queue about its worker (%s)", job.id, exc)
            return None
        if queued is None:
            if job.status is JobStatus.QUEUED and job.idle_s > ORPHAN_AFTER_S:
                return (f"it was not handed to the job queue within {ORPHAN_AFTER_S:g} s (the "
                        "process that submitted it stopped?). Start the job again")
            return None  # waiting to be handed over, or run in-process by run_job
        if queued.stalled:
            try:
                self.broker.fail(queued.id)
            except WorkspaceError as exc:  # the row is failed anyway; a worker skips it
                logger.warning("job %d: could not fail procrastinate job %d (%s)", job.id,
                               queued.id, exc)
            worker = f"procrastinate worker {queued.worker_id}" if queued.worker_id else \
                "its procrastinate worker"
            return (f"the worker running it ({worker}) sent no heartbeat for "
                    f"{STALLED_AFTER_S:g} s: it stopped or lost the database; see that "
                    "worker's log. Start the job again")
        if queued.status not in UNFINISHED:
            return (f"the job queue recorded it as {queued.status} (procrastinate job "
                    f"{queued.id}) but its worker never recorded its end; see the worker's "
                    "log. Start the job again")
        return None

    def stop(self, ws: Workspace, job: Job) -> None:
        """Cancel the waiting procrastinate job, or ask its worker to abort it (the row is
        cancelled already: when the queue cannot be reached, the job still stops at its next
        progress report, or is skipped by the worker that claims it)."""
        try:
            queued = self.broker.find(job.id)
            if queued is not None and queued.status in UNFINISHED:
                self.broker.cancel(queued.id)
        except WorkspaceError as exc:
            logger.warning("job %d: cancelled, but the job queue could not be told (%s)",
                           job.id, exc)

    def work(self, ws: Workspace, *, concurrency: int = 1, wait: bool = True) -> None:
        """Serve the workspace's queue in this process (``kbcurate worker``)."""
        root = ws.root

        def runner(job_id: int, abort_reason: Callable[[], str | None]) -> None:
            run_claimed(root, job_id, abort_reason, lambda _ws: self)

        quiet = _NoTracebackForJobFailed()
        procrastinate_log = logging.getLogger("procrastinate.worker")
        procrastinate_log.addFilter(quiet)
        try:
            self.broker.run_worker(runner, concurrency=concurrency, wait=wait,
                                   name=f"kbcurate@{socket.gethostname()}",
                                   heartbeat_s=HEARTBEAT_S, stalled_after_s=STALLED_AFTER_S)
        finally:
            procrastinate_log.removeFilter(quiet)


class QueueJobContext(JobContext):
    """The job context of a procrastinate worker: the job also stops when procrastinate asks
    it to abort, and when its row is no longer running (cancelled, or written off)."""

    def __init__(self, ws: Workspace, job_id: int,
                 abort_reason: Callable[[], str | None]) -> None:
        super().__init__(ws, job_id)
        self._abort_reason = abort_reason

    def cancelled(self) -> bool:
        if Jobs(self.ws).status(self.job_id) != JobStatus.RUNNING:
            return True
        reason = self._abort_reason()
        if reason is None:
            return False
        finish_job(self.ws, self.job_id, JobStatus.CANCELLED,
                   error=f"stopped through the job queue ({reason})")
        return True


class JobFailed(Exception):  # noqa: N818 - read in procrastinate's log as "JobFailed: ..."
    """Raised to procrastinate after kbcurate recorded the job failed, so that procrastinate's
    own record says "failed" too (it had said "succeeded": the failure was caught and stored
    in kbcurate's ``jobs`` row, and the task returned normally)."""


class _NoTracebackForJobFailed(logging.Filter):
    """procrastinate logs a failed task with its traceback; for :class:`JobFailed` that is only
    the worker's own plumbing (the job's error was logged when it happened), so the record
    keeps one line: procrastinate's message and the job's error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], JobFailed):
            record.msg, record.args = f"{record.getMessage()} ({record.exc_info[1]})", ()
            record.exc_info, record.exc_text = None, None
        return True


def run_claimed(root: Path, job_id: int, abort_reason: Callable[[], str | None],
                queue_of: QueueOf) -> None:
    """Run kbcurate job ``job_id``, claimed by a procrastinate worker, in the workspace at
    ``root`` (a connection of its own); a job no longer queued is skipped with a log line.

    Args:
        root: The workspace folder.
        job_id: The kbcurate job.
        abort_reason: procrastinate's abort request (None while there is none).
        queue_of: The workspace's job queue (the worker's own :class:`ProcrastinateQueue`).

    Raises:
        JobFailed: The job ran and failed (its error is already in kbcurate's ``jobs`` row).
    """
    ws = retry_busy(lambda: Workspace.open(root), f"job {job_id}: open the workspace")
    with ws:
        try:
            job = execute_job(ws, job_id, queue_of,
                              context=QueueJobContext(ws, job_id, abort_reason))
        except WorkspaceBusyError as exc:
            logger.error("job %d: %s", job_id, exc)
            record_busy(ws, job_id, str(exc))
            raise
        except CurationError as exc:  # cancelled or written off before this worker got it
            logger.warning("job %d: not run (%s)", job_id, exc)
            return
    logger.info("job %d (%s): %s", job_id, job.kind, job.status.value)
    if job.status is JobStatus.FAILED:
        raise JobFailed(f"kbcurate job {job_id} ({job.kind}) failed: {job.error}")
