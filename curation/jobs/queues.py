"""The job queues: the choice of queue from the workspace's store setting, and the first queue
(the ``jobs`` table with one worker process per job).

Every queue keeps the job's record in the workspace's ``jobs`` table (status, progress, result,
error, owner: :mod:`curation.store.jobs`), written and read by the functions of
:mod:`curation.jobs.queue` that every caller uses. What differs between queues is how a queued
job reaches a worker, how a lost worker is noticed and how a cancel reaches a running worker;
that is the :class:`~curation.jobs.lifecycle.JobQueue` interface:

- ``table`` (:class:`TableQueue`, the only choice for SQLite): :meth:`~TableQueue.start` starts
  ``python -m curation.jobs.worker WS JOB_ID`` on the submitting machine; a job whose worker
  process is gone, or that never got one within :data:`~curation.jobs.records.ORPHAN_AFTER_S`,
  is failed with the reason and the end of the worker's log; so is a running job whose row got
  no heartbeat (:data:`~curation.jobs.records.HEARTBEAT_S`, sent while
  :func:`curation.jobs.lifecycle.execute_job` runs it) for
  :data:`~curation.jobs.records.STALE_AFTER_S`, even when a process with its pid runs (the pid
  was reused).
- ``procrastinate`` (:class:`curation.jobs.distributed.ProcrastinateQueue`, the default on
  PostgreSQL): workers started with ``kbcurate worker`` on any machine claim jobs with
  procrastinate's row locks; stale workers are found by their heartbeats.

``WS/store.toml`` may name the queue (``jobs = "table"`` keeps one worker process per job on a
PostgreSQL workspace); see :mod:`curation.store.database`.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from curation.jobs.guards import process_alive
from curation.jobs.lifecycle import JobQueue, execute_job
from curation.jobs.records import ORPHAN_AFTER_S, STALE_AFTER_S
from curation.store.database import StoreSettings, read_store_settings
from curation.store.errors import WorkspaceBusyError, WorkspaceError
from curation.store.jobs import Job, Jobs, JobStatus
from curation.store.safe_files import LinkRefusedError, open_no_follow, read_text_no_follow
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.plugins import Registry, load_target

logger = logging.getLogger(__name__)

#: Seconds between looks for new jobs of a waiting :meth:`TableQueue.work`.
POLL_S = 1.0


class TableQueue:
    """The ``jobs`` table with one worker process per job, started by the submitter."""

    name = "table"

    def start(self, ws: Workspace, job_id: int) -> None:
        """Start ``python -m curation.jobs.worker WS JOB_ID`` and record its pid.

        When the pid cannot be recorded (workspace busy) the worker records it when it claims
        the job; a worker that never does is caught after :data:`ORPHAN_AFTER_S`.
        """
        with open_no_follow(log_path(ws, job_id), "ab") as log:  # the child keeps its own fd
            proc = subprocess.Popen(
                [sys.executable, "-m", "curation.jobs.worker", str(ws.root), str(job_id)],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        try:
            Jobs(ws).record_worker_pid(job_id, proc.pid)
        except WorkspaceBusyError as exc:
            logger.warning("job %d: could not record worker pid %d (%s); the worker records it",
                           job_id, proc.pid, exc)

    def worker_gone(self, ws: Workspace, job: Job) -> str | None:
        """The worker process is gone (running or queued), or a queued job never got one."""
        reason = _process_gone(job)
        if reason is None:
            return None
        log = log_path(ws, job.id)
        return f"{reason}; {_log_tail(log)}see {log}. Start the job again"

    def stop(self, ws: Workspace, job: Job) -> None:
        """Stop the job's worker now: SIGTERM to its process group (it is a session leader), so
        a cancelled index build stops within seconds, not at its next progress report. Only a
        live worker that beat recently is signalled (its pid cannot belong to another process
        yet); otherwise the worker stops at its next progress report (the row says so)."""
        if job.pid is None or job.status is not JobStatus.RUNNING or not process_alive(job.pid) \
                or job.idle_s > STALE_AFTER_S or not _own_session(job.pid):
            return
        try:
            os.killpg(job.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError) as exc:
            logger.info("job %d: worker %d not signalled (%s)", job.id, job.pid, exc)

    def work(self, ws: Workspace, *, concurrency: int = 1, wait: bool = True) -> None:
        """Run the jobs queued without a worker process (``submit_job(..., start=False)``) in
        this process; two of these never run the same job (the claim is one conditional
        ``UPDATE``)."""
        with ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="job") as pool:
            while True:
                ids = Jobs(ws).unclaimed_ids()
                list(pool.map(lambda job_id: _run_here(ws.root, job_id), ids))
                if not wait and not ids:
                    return
                if not ids:
                    time.sleep(POLL_S)


def _run_here(root: Path, job_id: int) -> None:
    """Claim and run one job with a connection of its own; a job claimed elsewhere is skipped."""
    with Workspace.open(root) as ws:
        try:
            execute_job(ws, job_id, job_queue)
        except WorkspaceBusyError:
            raise
        except CurationError as exc:  # claimed by another worker, or cancelled meanwhile
            logger.info("job %d: not run here (%s)", job_id, exc)


def _own_session(pid: int) -> bool:
    """Whether ``pid`` is a per-job worker (the leader of its own session, not this process): a
    job run inside ``kbcurate worker`` or a test records that process's pid, which must never
    be signalled for one job."""
    try:
        return pid != os.getpid() and os.getsid(pid) == pid
    except OSError:
        return False


def _process_gone(job: Job) -> str | None:
    """Why ``job`` can never finish (its worker process is gone), or None while it still may."""
    if job.status is JobStatus.RUNNING and job.pid:
        if not process_alive(job.pid):
            return f"the worker process (pid {job.pid}) stopped unexpectedly"
        if job.idle_s > STALE_AFTER_S:  # a live pid that does not beat is not our worker
            return (f"the worker (pid {job.pid}) sent no heartbeat for {job.idle_s:.0f} s "
                    f"(limit {STALE_AFTER_S:g} s): it stopped and its pid now belongs to another "
                    "process, or it hangs; the job was abandoned")
        return None
    if job.status is not JobStatus.QUEUED:
        return None
    if job.pid:
        if process_alive(job.pid):
            return None
        return f"the worker process (pid {job.pid}) stopped before it started the job"
    if job.idle_s > ORPHAN_AFTER_S:
        return (f"no worker process was started for it within {ORPHAN_AFTER_S:g} s (the "
                "process that submitted it stopped?)")
    return None


def log_path(ws: Workspace, job_id: int) -> Path:
    """The log of the worker process of job ``job_id`` (its stderr)."""
    folder = ws.root / "cache" / "jobs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"job-{job_id}.log"


def _log_tail(log: Path) -> str:
    """The last line of a worker log as ``last log line: ...; `` ("" when there is none)."""
    try:  # never through a link: it could show another file's last line to users
        lines = [ln for ln in read_text_no_follow(log, errors="replace").splitlines()
                 if ln.strip()]
    except (OSError, LinkRefusedError):
        return ""
    return f"last log line: {lines[-1].strip()[:300]}; " if lines else ""


TABLE_QUEUE = TableQueue()


def table_queue(settings: StoreSettings) -> JobQueue:
    """The table queue (one instance: it keeps no state)."""
    return TABLE_QUEUE


@dataclass(frozen=True)
class QueueSpec:
    """One registered job queue: ``target`` (``module:attr``) builds it from the workspace's
    store setting, ``fn(settings) -> JobQueue``."""

    name: str
    target: str
    description: str


#: The job queues a PostgreSQL workspace's ``jobs = ...`` setting may name (the store checks the
#: same names, :data:`curation.store.database.JOB_QUEUES`; SQLite always uses the table).
QUEUES: Registry[QueueSpec] = Registry("job queue", [
    QueueSpec("table", "curation.jobs.queues:table_queue",
              "the jobs table, one worker process per job on the machine that submits it"),
    QueueSpec("procrastinate", "curation.jobs.distributed:ProcrastinateQueue",
              "procrastinate on the PostgreSQL server: kbcurate worker on any machine"),
], error=lambda kind, name, available: WorkspaceError(
    f"Unknown {kind} {name!r}. Available options: {', '.join(available)}"))


def job_queue(ws: Workspace) -> JobQueue:
    """The job queue of ``ws``: the table on SQLite; on PostgreSQL the ``jobs`` setting of
    ``WS/store.toml``, procrastinate by default.

    Raises:
        WorkspaceError: The setting names no queue, or procrastinate is not installed (the
            message names ``pip install 'kbcurate[postgresql]'``).
    """
    if ws.engine == "sqlite":
        return TABLE_QUEUE
    settings = read_store_settings(ws.root)
    return load_target(QUEUES.get(settings.job_queue).target)(settings)
