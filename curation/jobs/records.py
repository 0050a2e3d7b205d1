"""The record of a background job: one row of the workspace's ``jobs`` table.

Every job queue (:mod:`curation.jobs.backends`) keeps the same record, so the app pages and the
CLI read a job the same way wherever its worker runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from curation.store.workspace import utcnow

#: A queued job still without a worker after this many seconds was never handed to one.
ORPHAN_AFTER_S = 120.0
#: Seconds between the heartbeats of a job running on the table queue (its row's ``updated_at``).
HEARTBEAT_S = 10.0
#: A running job whose row did not change for this long has lost its worker, even when a process
#: with its pid runs (the pid was reused, or the worker hangs): it is failed as abandoned. Long
#: enough to outlast a few workspace lock waits (30 s each) that delay a heartbeat.
STALE_AFTER_S = 120.0


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


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

    @property
    def idle_s(self) -> float:
        """Seconds since the row last changed."""
        return (datetime.fromisoformat(utcnow())
                - datetime.fromisoformat(self.updated_at)).total_seconds()


def job_from_row(row: Any) -> Job:
    """A :class:`Job` from a ``SELECT * FROM jobs`` row."""
    data = dict(row)
    data["status"] = JobStatus(data["status"])
    data["params"] = json.loads(data["params"])
    data["result"] = json.loads(data["result"])
    return Job(**data)
