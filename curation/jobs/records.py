"""The timing rules of a job's record, the same on every job queue (:mod:`curation.jobs.queues`).

The record itself is a row of the workspace's ``jobs`` table
(:class:`curation.store.jobs.Job`), so the app pages and the CLI read a job the same way
wherever its worker runs. These constants say when a row counts as abandoned by its worker.
"""

from __future__ import annotations

#: A queued job still without a worker after this many seconds was never handed to one.
ORPHAN_AFTER_S = 120.0
#: Seconds between the heartbeats of a job running on the table queue (its row's ``updated_at``).
HEARTBEAT_S = 10.0
#: A running job whose row did not change for this long has lost its worker, even when a process
#: with its pid runs (the pid was reused, or the worker hangs): it is failed as abandoned. Long
#: enough to outlast a few workspace lock waits (30 s each) that delay a heartbeat.
STALE_AFTER_S = 120.0
