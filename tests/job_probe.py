"""A slow job kind for the job-queue tests, and worker entry points that know it.

The tests register :data:`PROBE` in ``JOB_KINDS`` (``monkeypatch.setitem``); a worker in another
process runs ``python -m tests.job_probe QUEUE WS [JOB_ID]``, which registers it first.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from curation.jobs.kinds import JOB_KINDS, JobKind

PROBE = JobKind("probe", "tests.job_probe:probe", "test kind: steps with pauses",
                params=("steps", "pause"))
#: Ids of the probe jobs that ran to their end in this process (each once, when the queue works).
RUNS: list[int] = []


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
    JOB_KINDS.setdefault(PROBE.name, PROBE)
    if argv[0] == "table":
        from curation.jobs.worker import main as worker_main

        return worker_main(argv[1:])
    from curation.cli.store_commands import cmd_worker

    class Args:  # what argparse gives cmd_worker
        workspace, concurrency, burst, verbose = argv[1], 1, False, False

    return cmd_worker(Args())  # type: ignore[arg-type]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
