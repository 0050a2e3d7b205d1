"""The watchdog beside a running job: its heartbeat and its time limit.

While :func:`curation.jobs.lifecycle.execute_job` runs a job's function, a :class:`Watchdog`
thread with a workspace connection of its own

- touches the job's row every :data:`~curation.jobs.records.HEARTBEAT_S` seconds on the table
  queue, so that :func:`~curation.jobs.lifecycle.current_job` can tell a live worker from a
  dead one whose pid another process now has (procrastinate keeps its own heartbeats);
- ends the job when it runs longer than its kind allows
  (:meth:`curation.jobs.kinds.JobKind.max_run_s`): the row is failed with
  :func:`overrun_error`, so :func:`~curation.jobs.queue.get_job` reports it failed at once and
  the next request for the same work queues a new job. The job's code stops at its next
  progress report (its row is no longer running). A job stuck inside a blocking call (a server
  that trickles one byte at a time keeps a socket read and the heartbeat alive for ever) never
  reports progress again: when the job has a worker process of its own (``end_process``, the
  table queue's ``python -m curation.jobs.worker``), its main thread gets SIGTERM (which
  interrupts a blocking read; the worker turns it into
  :class:`~curation.jobs.worker.WorkerStopped`), and a process still running
  :data:`OVERRUN_GRACE_S` later ends itself. A worker serving many jobs (``kbcurate worker``,
  procrastinate) is never ended for one of them.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from types import TracebackType

from curation.jobs.kinds import JobKind, duration
from curation.jobs.records import HEARTBEAT_S
from curation.store.database import open_connection
from curation.store.errors import DATABASE_ERRORS, WorkspaceError
from curation.store.jobs import Jobs, JobStatus
from curation.store.workspace import Workspace

logger = logging.getLogger(__name__)

#: Seconds a job's own worker process gets to stop after SIGTERM, once its job ran out of time,
#: before the process ends itself (exit status :data:`OVERRUN_EXIT`).
OVERRUN_GRACE_S = 30.0
#: Seconds before another try to record an overrun (the workspace was busy, or unreachable).
RETRY_S = 5.0
#: The exit status of a worker process that ended itself after its job's overrun.
OVERRUN_EXIT = 3


def overrun_error(kind: JobKind, limit_s: float) -> str:
    """The error recorded on a job of ``kind`` that ran longer than ``limit_s`` seconds."""
    took = duration(limit_s)
    return (f"stopped after {took}: longer than the longest a {kind.name} job may run ({took}); "
            "it was most likely waiting on a server that answers too slowly, or hung. Start it "
            f"again; to allow longer runs, set {kind.max_minutes_env}=MINUTES in the "
            "environment of the app and of the job workers")


class Watchdog:
    """The heartbeat and time limit of one running job (module docstring); a context manager
    around the call of the job's function.

    Args:
        ws: The workspace (its folder: the watchdog opens a connection of its own).
        job_id: The running job.
        kind: Its kind (the time limit, for the message).
        beats: Send heartbeats (the table queue).
        end_process: The job runs in the main thread of a worker process of its own: after an
            overrun, SIGTERM that thread and end the process if it does not stop.
    """

    def __init__(self, ws: Workspace, job_id: int, kind: JobKind, *, beats: bool,
                 end_process: bool = False) -> None:
        self.root, self.job_id, self.kind = ws.root, job_id, kind
        self.limit_s = kind.max_run_s()
        self.beats = beats
        self.end_process = end_process and threading.current_thread() is threading.main_thread()
        self.stopped = threading.Event()
        self._own: Workspace | None = None
        self._thread = threading.Thread(target=self._run, name=f"job-{job_id}-watchdog",
                                        daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stopped.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            self._watch()
        finally:
            if self._own is not None:
                self._own.close()

    def _connection(self) -> Workspace | None:
        """The watchdog's own workspace connection (opened on first use), or None (logged)."""
        if self._own is None:
            try:
                self._own = Workspace(self.root, open_connection(self.root))
            except (*DATABASE_ERRORS, WorkspaceError) as exc:
                logger.warning("job %d: no watchdog connection (%s)", self.job_id, exc)
        return self._own

    def _watch(self) -> None:
        """Beat and watch the clock until the job ends or its overrun is recorded."""
        if self.beats and self._connection() is None:
            return  # no heartbeat: current_job fails the job as abandoned after STALE_AFTER_S
        deadline = time.monotonic() + self.limit_s
        next_beat = time.monotonic() + HEARTBEAT_S
        while True:
            wake = min(deadline, next_beat) if self.beats else deadline
            if self.stopped.wait(max(0.0, wake - time.monotonic())):
                return
            now = time.monotonic()
            if now >= deadline:
                if self._fail_overrun():
                    return
                deadline = now + RETRY_S
            if self.beats and now >= next_beat:
                self._beat()
                next_beat = now + HEARTBEAT_S

    def _beat(self) -> None:
        own = self._connection()
        try:
            if own is not None:
                Jobs(own).touch_running(self.job_id)
        except (*DATABASE_ERRORS, WorkspaceError) as exc:  # the next beat tries again
            logger.warning("job %d: heartbeat not recorded (%s)", self.job_id, exc)

    def _fail_overrun(self) -> bool:
        """Record the overrun on the job's row and stop its worker.

        Returns:
            Whether the watchdog is done (False: try again, the workspace was busy).
        """
        own = self._connection()
        if own is None:
            return False
        error = overrun_error(self.kind, self.limit_s)
        try:
            failed = Jobs(own).set_final_status(self.job_id, JobStatus.FAILED, error=error,
                                                was=(JobStatus.RUNNING,))
        except (*DATABASE_ERRORS, WorkspaceError) as exc:
            logger.warning("job %d: its overrun not recorded yet (%s); retrying", self.job_id,
                           exc)
            return False
        if failed:
            logger.error("job %d (%s): %s", self.job_id, self.kind.name, error)
            if self.end_process:
                self._end_process()
        return True

    def _end_process(self) -> None:
        """SIGTERM to the main thread (the job's), then end the process if it still runs after
        :data:`OVERRUN_GRACE_S`."""
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
        if self.stopped.wait(OVERRUN_GRACE_S):
            return
        logger.error("job %d: the worker did not stop within %s of SIGTERM; ending the worker "
                     "process (pid %d)", self.job_id, duration(OVERRUN_GRACE_S), os.getpid())
        logging.shutdown()
        os._exit(OVERRUN_EXIT)
