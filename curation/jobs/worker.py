"""Worker process for one background job: ``python -m curation.jobs.worker WORKSPACE JOB_ID``."""

from __future__ import annotations

import logging
import sys

from curation.jobs.queue import run_job
from curation.store.workspace import Workspace


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m curation.jobs.worker WORKSPACE JOB_ID", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with Workspace.open(args[0]) as ws:
        job = run_job(ws, int(args[1]))
    return 0 if job.status.value == "done" else 1


if __name__ == "__main__":
    raise SystemExit(main())
