"""A slow job kind for the job-queue tests, and worker entry points that know it.

The tests register :data:`PROBE` with :func:`register_probe` (the job kinds of the test become
a registry that also knows it); a worker in another process runs ``python -m tests.job_probe
QUEUE WS [JOB_ID]``, which registers it first.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import pytest

from curation.jobs import kinds
from curation.jobs.kinds import JobKind

PROBE = JobKind("probe", "tests.job_probe:probe", "test kind: steps with pauses",
                params=("steps", "pause"))
#: Ids of the probe jobs that ran to their end in this process (each once, when the queue works).
RUNS: list[int] = []


def register_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register :data:`PROBE` for the running test (undone after it)."""
    monkeypatch.setattr(kinds, "JOB_KINDS", kinds.job_kind_registry([PROBE]))


def probe(ctx: Any, steps: int = 3, pause: float = 0.0) -> dict[str, Any]:
    """``steps`` progress reports, each after ``pause`` seconds; records its run in RUNS."""
    for i in range(steps):
        time.sleep(pause)
        ctx.progress((i + 1) / steps, f"step {i + 1} of {steps}")
    RUNS.append(ctx.job_id)
    return {"steps": steps, "pid": os.getpid()}


def main(argv: list[str]) -> int:
    """``table WS JOB_ID``: the table queue's worker process; ``procrastinate WS``: a
    procrastinate worker (``kbcurate worker``), both knowing the probe kind."""
    import logging

    logging.basicConfig(level=logging.INFO)
    if PROBE.name not in kinds.JOB_KINDS:
        kinds.JOB_KINDS.register(PROBE)
    if argv[0] == "table":
        from curation.jobs.worker import main as worker_main

        return worker_main(argv[1:])
    from curation.cli.store_commands import cmd_worker

    class Args:  # what argparse gives cmd_worker
        workspace, concurrency, burst, verbose = argv[1], 1, False, False

    return cmd_worker(Args())  # type: ignore[arg-type]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
