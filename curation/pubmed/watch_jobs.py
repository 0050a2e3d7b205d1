"""The ``watch`` background job: one run of one watch, with progress.

Its owner (while a curator) or an admin may start it (:func:`submit_watch_run` checks on the
server side, and the job checks its submitter again when it runs, so a job queued by hand for
someone else's watch does nothing). Two runs of the same watch never overlap: the kind is unique
by ``watch_id`` (asking again while one is queued or running returns it), and ``kbcurate watch
run`` leaves a watch whose job is unfinished to that job. The job fails, with the run's error,
when the run failed; the failed run is recorded all the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curation.access.signin import users_store
from curation.access.users import PermissionDenied, Role, User
from curation.jobs.kinds import SYSTEM_USER
from curation.jobs.queue import Job, submit_job
from curation.pubmed.ncbi import ncbi_settings
from curation.pubmed.watch import get_watch, require_manager
from curation.pubmed.watch_run import WATCH_JOB_KIND, run_watch
from curation.store.jobs import Jobs
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError


def submit_watch_run(ws: Workspace, watch_id: int, *, user: User | None,
                     start: bool = True) -> Job:
    """Run a watch in the background now, or return its run that is queued or running
    (``start=False``: queue it without a worker; tests run it with ``run_job``).

    Raises:
        CurationError: No such watch, or no NCBI contact email is set.
        PermissionDenied: ``user`` is neither the watch's owner nor an admin.
    """
    watch = get_watch(ws, watch_id)
    require_manager(user, watch, f"Running watch #{watch.id}")
    ncbi_settings(ws)  # no contact email: say so now, not in a failed job
    return submit_job(ws, WATCH_JOB_KIND, {"watch_id": watch.id}, user=user, start=start)


def check_watch_params(ws: Workspace, params: Mapping[str, Any]) -> None:
    """Validator of the job kind: ``watch_id`` names a watch.

    Raises:
        CurationError: What is wrong and how to fix it.
    """
    value = params.get("watch_id")
    if not isinstance(value, int) or isinstance(value, bool):
        raise CurationError(f"watch: watch_id must be a watch's number, not {value!r}")
    get_watch(ws, value)


def _submitter(ws: Workspace, name: str, owner: str) -> User | None:
    """The job's submitter as the check sees them: the system, the owner (whose role
    :func:`add_watch` checked), a user of the users file, or, with no users file (local mode),
    an admin."""
    if name == SYSTEM_USER.name:
        return SYSTEM_USER
    store = users_store(ws.root)
    if name == owner:
        return store.user_named(name) or User(name, Role.CURATOR)
    if not store.users():
        return User(name, Role.ADMIN)
    return store.user_named(name)


def run_watch_job(ctx: Any, watch_id: int) -> dict[str, Any]:
    """Worker entry point: :func:`curation.pubmed.watch_run.run_watch` with the job's progress.

    Raises:
        PermissionDenied: The submitter may not run this watch (checked again here).
        CurationError: The run failed (its error; the run is recorded as failed).
    """
    ws = ctx.ws
    watch = get_watch(ws, watch_id)
    name = Jobs(ws).creator(ctx.job_id) or ""
    submitter = _submitter(ws, name, watch.owner)
    if submitter is None:
        raise PermissionDenied(f"Running watch #{watch.id}: the job's submitter {name!r} is "
                               "not a user of this workspace")
    require_manager(submitter, watch, f"Running watch #{watch.id}")
    outcome = run_watch(ws, watch, settings=ncbi_settings(ws), actor=name,
                        progress=lambda fraction, message: ctx.progress(fraction, message))
    if not outcome.ok:
        raise CurationError(outcome.error)
    return outcome.to_json()
