"""Background jobs (indexing, evaluation, later training) that survive a page refresh.

A job is a row in the workspace's ``jobs`` table (:mod:`curation.store.jobs`).
:func:`submit_job` checks the user's role on the server side, stores the job as ``queued`` and
hands it to the workspace's job queue (:func:`curation.jobs.queues.job_queue`): by default a
worker *process* (``python -m curation.jobs.worker WS JOB_ID``) on this machine; on PostgreSQL,
procrastinate workers on any machine (``kbcurate worker``). Long work never runs in the Streamlit
script thread and keeps going when the page reloads. The worker reports progress into the row;
any page reads it back with :func:`get_job`, whichever queue ran it.

Job kinds are registered in :mod:`curation.jobs.kinds` (each wing declares its own in its
``job_kinds`` module; plug-ins add kinds through the ``kbcurate.job_kinds`` entry points); a
kind names its function as ``module:function``, called as ``fn(ctx: JobContext, **params) ->
dict``, and its result dict is stored as JSON. Each kind declares the parameter names it
accepts (``params``); :func:`submit_job` refuses any other name, listing the allowed ones, and
then calls the kind's ``validator`` (``"module:function"``, called as ``fn(ws, params)``,
raising :class:`CurationError`) to check the values, e.g. that every path lies inside the
workspace (:func:`curation.jobs.guards.workspace_path`).

Workers that stop: :func:`get_job` reports a job as failed, with the reason and the end of the
worker's log, when its worker process is gone, whether it was running or still queued (killed
before it claimed the job), and when a queued job never got a worker (no pid after
:data:`ORPHAN_AFTER_S`); on procrastinate, when its worker stopped sending heartbeats
(:mod:`curation.jobs.distributed`). Such jobs are failed, not re-queued: a worker that dies at
start-up would die again, and a failed job lets its caller start a fresh one.
Workers wait for a busy workspace (:func:`curation.jobs.guards.retry_busy`) instead of dying.
On the table queue :func:`run_job` sends a heartbeat (the row's ``updated_at``) every
:data:`~curation.jobs.records.HEARTBEAT_S`; a running job without one for
:data:`~curation.jobs.records.STALE_AFTER_S` is failed as abandoned even when its pid runs (reused
by another process). Claiming, running and finishing a job is :mod:`curation.jobs.lifecycle`.

Every job has an end: a job still running after its kind's limit
(:attr:`~curation.jobs.kinds.JobKind.max_seconds`, e.g. 20 min for ``pubmed_search``; the
environment variable named by :attr:`~curation.jobs.kinds.JobKind.max_minutes_env` overrides
it) is failed with "stopped after N min: longer than the longest a KIND job may run ...", and
its own worker process is stopped (:mod:`curation.jobs.watchdog`).

Asking again for work an unfinished job already does (a kind's
:attr:`~curation.jobs.kinds.JobKind.unique_by`) returns that job with ``joined`` set;
:func:`duplicate_note` says since when it runs, who started it and how far it got, for the app
and the CLI to show.

Who may cancel: the job's owner (kinds open to every role) or an admin. ``user=None`` may cancel
nothing; internal callers (the CLI's demo, maintenance scripts, benchmarks) act as
:data:`SYSTEM_USER`, an admin whose name no real user can have.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from curation.access.users import PermissionDenied, Role, User, require_admin
from curation.jobs.kinds import SYSTEM_USER, JobKind, find_kind, get_kind
from curation.jobs.lifecycle import (
    JobCancelled,
    JobContext,
    JobQueue,
    current_job,
    execute_job,
)
from curation.jobs.queues import job_queue
from curation.jobs.records import ORPHAN_AFTER_S
from curation.store.jobs import Job, Jobs, JobStatus
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import CurationError

__all__ = ["ORPHAN_AFTER_S", "SYSTEM_USER", "Job", "JobCancelled", "JobContext", "JobKind",
           "JobStatus", "cancel_job", "check_may_cancel", "duplicate_note", "get_job",
           "job_state_note", "list_jobs", "run_job", "selftest", "submit_job", "wait_for_job"]

logger = logging.getLogger(__name__)


def submit_job(
    ws: Workspace, kind: str, params: Mapping[str, Any], *, user: User | None,
    start: bool = True,
) -> Job:
    """Queue a job and hand it to the workspace's job queue (a worker process by default).

    Args:
        ws: The workspace.
        kind: A registered job kind (:func:`curation.jobs.kinds.get_kind`).
        params: The job's parameters: only the names its kind declares.
        user: Who submits it (:data:`SYSTEM_USER` for internal callers).
        start: Hand it to the queue (tests pass False and call :func:`run_job`).

    Returns:
        The job as stored; for a kind with :attr:`JobKind.unique_by`, the unfinished job that
        already does the same work when there is one, with ``joined`` set (show
        :func:`duplicate_note` to the user).

    Raises:
        UnknownNameError: Unknown job kind (the message lists the available ones).
        PermissionDenied: No user, or an admin-only job requested by a non-admin (checked
            here, server side).
        CurationError: A parameter the kind does not accept, or a bad value (its validator).
        WorkspaceError: The job queue cannot be used (procrastinate missing, server down); the
            message names the setting or the extra to install.
    """
    spec = get_kind(kind)
    if user is None:  # every job has an owner: a signed-in user or SYSTEM_USER
        raise PermissionDenied(f"Starting a job of kind {kind!r} needs a signed-in user; "
                               "internal callers pass user=SYSTEM_USER")
    if spec.admin_only:
        require_admin(user, f"Starting a job of kind {kind!r}")
    elif spec.roles and not user.is_admin and user.role not in spec.roles:
        allowed = " or ".join(sorted(r.value for r in spec.roles | {Role.ADMIN}))
        raise PermissionDenied(f"Starting a job of kind {kind!r} needs the {allowed} role; "
                               f"{user.name} ({user.role.value}) may not do it")
    if not isinstance(params, Mapping):
        raise CurationError(f"Job parameters must be a mapping of names to values, not "
                            f"{type(params).__name__}; available options: {', '.join(spec.params)}")
    spec.check(ws, params)
    queue = job_queue(ws)
    if spec.unique_by:
        return _submit_unique(ws, spec.name, params, user, queue, start, spec.unique_by)
    job_id = Jobs(ws).insert(kind, params, user.name)
    if start:
        queue.start(ws, job_id)
    return get_job(ws, job_id)


def _submit_unique(ws: Workspace, kind: str, params: Mapping[str, Any], user: User,
                   queue: JobQueue, start: bool, unique_by: tuple[str, ...]) -> Job:
    """Queue a job of a kind with :attr:`JobKind.unique_by`, or return the unfinished one doing
    the same work, with ``joined`` set (:func:`duplicate_note`). A row whose worker is gone, or
    that ran out of time, is failed by :func:`get_job` or its watchdog and no longer counts
    (then a new job is queued)."""
    for _ in range(3):
        job_id, created = Jobs(ws).insert_unique(kind, params, user.name, unique_by)
        if created:
            if start:
                queue.start(ws, job_id)
            return get_job(ws, job_id)
        job = get_job(ws, job_id)
        if not job.finished:
            logger.info("%s job not queued for %s: job %d, %s", kind, user.name, job.id,
                        duplicate_note(replace(job, joined=True)))
            return replace(job, joined=True)
    raise CurationError(f"Could not queue the {kind} job: the unfinished job {job_id} doing the "
                        "same work keeps changing; try again in a moment")


def get_job(ws: Workspace, job_id: int) -> Job:
    """The job's current state; a job whose worker is gone is marked failed (see the module
    docstring).

    Raises:
        CurationError: No job has that id.
    """
    return current_job(ws, job_id, job_queue)


def job_state_note(job: Job, *, now: datetime | None = None) -> str:
    """Where an unfinished job stands, in words: "running since 14:02 UTC (started by ann, 35%
    done)", or "queued since ... (started by ann, waiting for a worker)" (the day too when it
    is not today; the time is when it was submitted).

    Args:
        job: An unfinished job.
        now: The current time (UTC; tests pass their own).
    """
    since = datetime.fromisoformat(job.created_at)
    today = (now or datetime.fromisoformat(utcnow())).date()
    when = since.strftime("%H:%M" if since.date() == today else "%Y-%m-%d %H:%M")
    who = job.created_by or "the system"
    if job.status is JobStatus.QUEUED:
        return f"queued since {when} UTC (started by {who}, waiting for a worker)"
    done = round(job.progress * 100)
    return f"{job.status.value} since {when} UTC (started by {who}, {done:d}% done)"


def duplicate_note(job: Job, *, now: datetime | None = None) -> str:
    """What a user who asked for work an unfinished job already does is told: "already
    running since 14:02 UTC (started by ann, 35% done)" (:func:`job_state_note`); "" for a job
    :func:`submit_job` did not return instead of a new one (not ``joined``).

    Args:
        job: What :func:`submit_job` returned.
        now: The current time (UTC; tests pass their own).
    """
    if not job.joined or job.finished:
        return ""
    return f"already {job_state_note(job, now=now)}"


def wait_for_job(ws: Workspace, job_id: int, timeout: float = 60.0,
                 poll: float = 0.2) -> Job:
    """Block until the job is done, failed or cancelled (scripts and tests; never the UI).

    Raises:
        CurationError: The job is still unfinished after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        job = get_job(ws, job_id)
        if job.finished:
            return job
        if time.monotonic() >= deadline:
            raise CurationError(f"Job {job_id} is still {job.status.value} after {timeout:g} s "
                                f"({job.message or 'no progress message'})")
        time.sleep(poll)


def list_jobs(ws: Workspace, kind: str | None = None, limit: int = 50) -> list[Job]:
    """Most recent jobs first."""
    return [get_job(ws, i) for i in Jobs(ws).ids(kind, limit)]


def cancel_job(ws: Workspace, job_id: int, *, user: User | None) -> Job:
    """Ask a queued or running job to stop (it stops at its next progress report; the job
    queue is told too, e.g. procrastinate cancels or aborts its job).

    Raises:
        PermissionDenied: ``user`` is None, or neither the job's owner nor an admin (an
            admin-only kind needs an admin).
    """
    job = get_job(ws, job_id)
    user = check_may_cancel(job, user)
    if not job.finished:
        with ws.transaction():
            Jobs(ws).set_final_status(job_id, JobStatus.CANCELLED,
                                      error=f"cancelled by {user.name}",
                                      was=(JobStatus.QUEUED, JobStatus.RUNNING))
            ws.audit(user.name, "cancel", "job", str(job_id), before=job.status.value)
        job_queue(ws).stop(ws, job)
    return get_job(ws, job_id)


def newest_job_id(ws: Workspace) -> int:
    """The id of the newest job (0 when there is none): a mark for :func:`stop_jobs_after`."""
    ids = Jobs(ws).ids(None, 1)
    return ids[0] if ids else 0


def stop_jobs_after(ws: Workspace, mark: int, *, user: User) -> list[int]:
    """Cancel every unfinished job submitted after the job ``mark`` (see :func:`newest_job_id`)
    and stop its worker: what ``kbcurate demo`` does when it stops, so no worker it started keeps
    encoding.

    Returns:
        The ids of the jobs cancelled, newest first.
    """
    stopped = []
    for job in list_jobs(ws, limit=200):
        if job.id > mark and not job.finished:
            cancel_job(ws, job.id, user=user)
            stopped.append(job.id)
    return stopped


def may_cancel(job: Job, user: User | None) -> bool:
    """Whether ``user`` may cancel ``job`` (pages show *Cancel job* only then)."""
    try:
        check_may_cancel(job, user)
    except PermissionDenied:
        return False
    return True


def check_may_cancel(job: Job, user: User | None) -> User:
    """``user`` when they may cancel ``job``, else :class:`PermissionDenied` (server side)."""
    action = f"Cancelling job {job.id} ({job.kind})"
    if user is None:
        raise PermissionDenied(f"{action} needs its owner or an admin; no user was given "
                               "(internal callers pass user=SYSTEM_USER)")
    spec = find_kind(job.kind)
    if user.is_admin:
        return user
    if spec is None or spec.admin_only:
        require_admin(user, action)
    if not job.created_by or user.name != job.created_by:
        owner = job.created_by or "the system"
        raise PermissionDenied(f"{action} needs its owner ({owner}) or the admin role; "
                               f"{user.name} ({user.role.value}) may not do it")
    return user


def run_job(ws: Workspace, job_id: int, *, context: JobContext | None = None,
            end_process: bool = False) -> Job:
    """Execute a queued job in this process (what the worker does): see
    :func:`curation.jobs.lifecycle.execute_job`.

    Args:
        ws: The workspace.
        job_id: The queued job.
        context: What the job function gets (a queue's worker passes its own subclass);
            default a :class:`JobContext`.
        end_process: This process is the job's own worker process (``python -m
            curation.jobs.worker``) and runs it in its main thread: a job that overruns its
            time limit is stopped with SIGTERM, and the process ends if it does not stop.

    Raises:
        CurationError: The job is not queued (already claimed, cancelled or failed).
        WorkspaceBusyError: The workspace stayed busy through every retry of the claim.
    """
    return execute_job(ws, job_id, job_queue, context=context, end_process=end_process)


def selftest(ctx: JobContext, steps: int = 3) -> dict[str, Any]:
    """A diagnostic job: reports ``steps`` progress updates and returns the worker's pid."""
    for i in range(steps):
        ctx.progress((i + 1) / steps, f"step {i + 1} of {steps}")
    return {"steps": steps, "pid": os.getpid()}
