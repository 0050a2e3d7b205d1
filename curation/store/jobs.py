"""The workspace's ``jobs`` table: one row per background job (the record every job queue keeps).

A job's record (:class:`Job`) is read the same way whichever queue ran it, so the app pages and
the CLI show it the same everywhere. The jobs wing (:mod:`curation.jobs`) decides *when* a row
changes (submission, claim, progress, heartbeat, end, a worker found gone); :class:`Jobs`, built
on a workspace (``Jobs(ws)``), holds the statements that change and read it. Each write runs in
one :meth:`Workspace.transaction` (joined when the caller already holds one, e.g. to audit in the
same transaction) and raises what it raises (:class:`~curation.store.errors.WorkspaceBusyError`
when another process held the write lock past the lock wait). ``params`` and ``result`` are
stored as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from curation.store.workspace import Workspace, utcnow

__all__ = ["Job", "JobStatus", "Jobs"]


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Job:
    """One row of the ``jobs`` table.

    Attributes:
        id: The job's id.
        kind: Its job kind's name.
        status: Queued, running, done, failed or cancelled.
        progress: 0..1, as last reported.
        message: The last progress message.
        params: The parameters it was submitted with.
        result: What the job function returned (``{}`` until done).
        error: Why it failed or was cancelled ("" otherwise).
        created_by: Who submitted it.
        created_at: When it was submitted (UTC, ISO 8601).
        updated_at: When the row last changed (progress, heartbeat, end).
        pid: The worker process that claimed it (table queue), if any.
        joined: Not a column: True on the job :func:`curation.jobs.queue.submit_job` returned
            instead of queuing another, because this unfinished job already does the same work
            (:func:`curation.jobs.queue.duplicate_note` says since when and by whom).
    """

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
    joined: bool = field(default=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.status in (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)

    @property
    def idle_s(self) -> float:
        """Seconds since the row last changed."""
        return (datetime.fromisoformat(utcnow())
                - datetime.fromisoformat(self.updated_at)).total_seconds()


def _job_from_row(row: Any) -> Job:
    """A :class:`Job` from a ``SELECT * FROM jobs`` row."""
    data = dict(row)
    data["status"] = JobStatus(data["status"])
    data["params"] = json.loads(data["params"])
    data["result"] = json.loads(data["result"])
    return Job(**data)


class Jobs:
    """The jobs table: queued, running and finished background work."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def load(self, job_id: int) -> Job | None:
        """The row of job ``job_id`` as it is (no liveness check), or None when there is none."""
        row = self.ws.conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else _job_from_row(row)

    def status(self, job_id: int) -> str | None:
        """The ``status`` column of job ``job_id`` (a :class:`JobStatus` value), or None when the
        row is gone."""
        row = self.ws.conn.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else row[0]

    def ids(self, kind: str | None, limit: int) -> list[int]:
        """Ids of the ``limit`` most recent jobs, newest first (only ``kind``'s when given)."""
        sql, params = "SELECT id FROM jobs", []
        if kind:
            sql += " WHERE kind = ?"
            params.append(kind)
        rows = self.ws.conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))
        return [r[0] for r in rows]

    def unclaimed_ids(self) -> list[int]:
        """Ids of the queued jobs no worker process took (no pid), oldest first."""
        return [int(r[0]) for r in self.ws.conn.execute(
            "SELECT id FROM jobs WHERE status = 'queued' AND pid IS NULL ORDER BY id")]

    def insert(self, kind: str, params: Mapping[str, Any], actor: str) -> int:
        """Store a new ``queued`` job of ``kind`` submitted by ``actor``, audited (``submit``).

        Returns:
            The new job's id.
        """
        with self.ws.transaction():
            job_id = int(self.ws.conn.execute(
                "INSERT INTO jobs(kind, status, params, created_by, created_at, updated_at) "
                "VALUES (?, 'queued', ?, ?, ?, ?)",
                (kind, json.dumps(dict(params), sort_keys=True), actor, utcnow(),
                 utcnow())).lastrowid)
            self.ws.audit(actor, "submit", "job", str(job_id), after=dict(params))
        return job_id

    def insert_unique(self, kind: str, params: Mapping[str, Any], actor: str,
                      unique_by: tuple[str, ...]) -> tuple[int, bool]:
        """Like :meth:`insert`, unless a queued or running job of ``kind`` has the same values of
        the ``unique_by`` parameters: then that job's id. One write transaction, so two
        processes submitting at the same instant get one job.

        Returns:
            (job id, whether a new job was stored).
        """
        wanted = {name: params.get(name) for name in unique_by}
        with self.ws.transaction():
            for job_id, text in self.ws.conn.execute(
                    "SELECT id, params FROM jobs WHERE kind = ? AND status IN ('queued', "
                    "'running') ORDER BY id", (kind,)).fetchall():
                stored = json.loads(text)
                if {name: stored.get(name) for name in unique_by} == wanted:
                    return int(job_id), False
            return self.insert(kind, params, actor), True

    def record_worker_pid(self, job_id: int, pid: int) -> None:
        """Record ``pid`` as the job's worker process unless one is recorded already."""
        with self.ws.transaction():
            self.ws.conn.execute("UPDATE jobs SET pid = ? WHERE id = ? AND pid IS NULL",
                                 (pid, job_id))

    def record_progress(self, job_id: int, fraction: float, message: str) -> None:
        """Set the job's progress (0..1, as given) and message; the row counts as fresh."""
        with self.ws.transaction():
            self.ws.conn.execute(
                "UPDATE jobs SET progress = ?, message = ?, updated_at = ? WHERE id = ?",
                (fraction, message, utcnow(), job_id))

    def touch_running(self, job_id: int) -> None:
        """A heartbeat: mark the row of the running job fresh (nothing when it is not running)."""
        with self.ws.transaction():
            self.ws.conn.execute("UPDATE jobs SET updated_at = ? WHERE id = ? AND "
                                 "status = 'running'", (utcnow(), job_id))

    def claim(self, job_id: int, pid: int) -> bool:
        """Mark the job running with worker process ``pid`` if it is still queued.

        Returns:
            Whether this call claimed it (False: it was no longer queued).
        """
        with self.ws.transaction():
            return bool(self.ws.conn.execute(
                "UPDATE jobs SET status = 'running', pid = ?, updated_at = ? "
                "WHERE id = ? AND status = 'queued'", (pid, utcnow(), job_id)).rowcount)

    def set_final_status(self, job_id: int, status: JobStatus, *, error: str = "",
                         result: dict[str, Any] | None = None,
                         was: tuple[JobStatus, ...]) -> bool:
        """Set a final ``status`` (with ``error`` and ``result``; progress 1.0 when done) if the
        job is in one of the statuses ``was``.

        Returns:
            Whether the row changed.
        """
        marks = ", ".join("?" * len(was))
        with self.ws.transaction():
            return bool(self.ws.conn.execute(
                "UPDATE jobs SET status = ?, error = ?, result = ?, updated_at = ?, "
                "progress = CASE WHEN ? = 'done' THEN 1.0 ELSE progress END "
                f"WHERE id = ? AND status IN ({marks})",
                (status.value, error, json.dumps(result or {}, default=str), utcnow(),
                 status.value, job_id, *(w.value for w in was))).rowcount)

    def fail_unchanged(self, job: Job, error: str) -> None:
        """Record ``job`` as failed with ``error`` unless its status or pid changed since it was
        read (its worker was found gone)."""
        with self.ws.transaction():
            self.ws.conn.execute(
                "UPDATE jobs SET status = 'failed', error = ?, updated_at = ? "
                "WHERE id = ? AND status = ? AND pid IS ?",
                (error, utcnow(), job.id, job.status.value, job.pid))

    def fail_queued(self, job_id: int, error: str) -> None:
        """Record the job as failed with ``error`` if it is still queued."""
        with self.ws.transaction():
            self.ws.conn.execute(
                "UPDATE jobs SET status = 'failed', error = ?, updated_at = ? "
                "WHERE id = ? AND status = 'queued'",
                (error, utcnow(), job_id))

    def fail_unfinished(self, job_id: int, error: str) -> None:
        """Record the job as failed with ``error`` if it is queued or running."""
        with self.ws.transaction():
            self.ws.conn.execute("UPDATE jobs SET status = 'failed', error = ?, updated_at = ? "
                                 "WHERE id = ? AND status IN ('queued', 'running')",
                                 (error, utcnow(), job_id))

    def creator(self, job_id: int) -> str | None:
        """Who submitted a job.

        Returns:
            The job's ``created_by`` (may be empty), or None when there is no such job.
        """
        row = self.ws.conn.execute("SELECT created_by FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row[0] if row else None
