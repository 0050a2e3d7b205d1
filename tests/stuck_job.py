"""Job kinds that never end by themselves, for the time-limit tests (tests/test_job_time_limit.py).

``stuck`` reads from a server that trickles one byte at a time (the hostile E-utilities of
issue 42 item 3): the read never times out and the job never reports progress, while its
heartbeat stays alive. ``stubborn`` does the same but swallows the worker's stop signal, so only
the end of its process stops it. Both may run one second. A worker process in another process
runs ``python -m tests.stuck_job WS JOB_ID [GRACE_S]``, which registers them first (and shortens
the grace a stopped worker gets).
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import pytest

from curation.jobs import kinds
from curation.jobs.kinds import JobKind

STUCK = JobKind("stuck", "tests.stuck_job:read_forever", "test kind: a read that never ends",
                params=("port",), unique_by=("port",), max_seconds=1.0)
STUBBORN = JobKind("stubborn", "tests.stuck_job:ignore_stop", "test kind: ignores SIGTERM",
                   params=("port",), max_seconds=1.0)


def register(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register :data:`STUCK` and :data:`STUBBORN` for the running test (undone after it)."""
    monkeypatch.setattr(kinds, "JOB_KINDS", kinds.job_kind_registry([STUCK, STUBBORN]))


def _trickle(port: int) -> None:
    """Read the trickling server at ``port`` until it closes (it never does)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while sock.recv(1):
            pass


def read_forever(ctx: Any, port: int) -> dict[str, Any]:
    """Read the trickling server; no progress report, ever."""
    _trickle(port)
    return {"read": "all"}


def ignore_stop(ctx: Any, port: int) -> dict[str, Any]:
    """Read the trickling server and go on reading whatever interrupts the read."""
    while True:
        try:
            _trickle(port)
        except BaseException:  # noqa: BLE001, S110 - deliberately deaf to the stop signal
            pass


def main(argv: list[str]) -> int:
    """``WS JOB_ID [GRACE_S]``: the table queue's worker process, knowing the stuck kinds."""
    import logging

    from curation.jobs import watchdog
    from curation.jobs.worker import main as worker_main

    logging.basicConfig(level=logging.INFO)
    for kind in (STUCK, STUBBORN):
        if kind.name not in kinds.JOB_KINDS:
            kinds.JOB_KINDS.register(kind)
    if len(argv) > 2:
        watchdog.OVERRUN_GRACE_S = float(argv[2])
    return worker_main(argv[:2])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
