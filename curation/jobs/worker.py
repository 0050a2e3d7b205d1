"""Worker process for one background job: ``python -m curation.jobs.worker WORKSPACE JOB_ID``.

Opening the workspace and claiming the job wait out a workspace whose write lock another process
holds (:func:`curation.jobs.guards.retry_busy`: bounded, each retry logged to the job's log).
When the workspace stays busy through every retry, the worker records the job as failed with that
reason if it can; otherwise :func:`curation.jobs.queue.get_job` finds the worker gone and reports
the job as failed with the last line of this log.

A job that runs longer than its kind allows is failed by its watchdog, which then sends this
process's main thread SIGTERM (the job stops as on a cancel, its row stays failed) and ends the
process if it still runs after :data:`~curation.jobs.watchdog.OVERRUN_GRACE_S`
(:mod:`curation.jobs.watchdog`).
"""

from __future__ import annotations

import logging
import signal
import sys

from curation.jobs.guards import retry_busy
from curation.jobs.lifecycle import JobCancelled, record_busy
from curation.jobs.queue import JobStatus, run_job
from curation.store.errors import WorkspaceBusyError
from curation.store.workspace import Workspace

logger = logging.getLogger("curation.jobs.worker")


#: Signals that stop a worker: a cancel (:meth:`curation.jobs.queues.TableQueue.stop`), or the
#: ``kbcurate demo`` / ``serve`` that started it stopping.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class WorkerStopped(JobCancelled):
    """Raised in the job's code when the worker process was told to stop (a signal)."""


def stop_on_signals() -> None:
    """Turn :data:`STOP_SIGNALS` into :class:`WorkerStopped` in the main thread, so the job stops
    at once (not at its next progress report, a minute later while encoding) and its ``finally``
    blocks still remove temporary files; the job is recorded as cancelled."""
    def stop(signum: int, _frame: object) -> None:
        raise WorkerStopped(f"stopped by {signal.Signals(signum).name}")

    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -m curation.jobs.worker WORKSPACE JOB_ID", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    job_id = int(args[1])
    stop_on_signals()
    ws = retry_busy(lambda: Workspace.open(args[0]), f"job {job_id}: open the workspace")
    with ws:
        try:
            job = run_job(ws, job_id, end_process=True)
        except WorkspaceBusyError as exc:
            logger.error("job %d: %s", job_id, exc)
            record_busy(ws, job_id, str(exc))
            return 1
        except WorkerStopped as exc:  # outside the job's own code (its end already recorded)
            logger.warning("job %d: worker %s", job_id, exc)
            return 1
    return 0 if job.status is JobStatus.DONE else 1


if __name__ == "__main__":
    raise SystemExit(main())
