"""Training as a background job: admins start it from the app; the worker runs it.

:func:`start_training` validates the options before anything is queued (so a bad value is
refused in the page's words, not after a worker started) and submits a ``train`` job, which
:func:`curation.jobs.queue.submit_job` refuses for anyone but an admin, whatever the widgets
show. :func:`run_training` is the job's entry point in the worker process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from curation.access.users import User
from curation.jobs.queue import Job, submit_job
from curation.store.jobs import Jobs
from curation.store.workspace import Workspace
from curation.training.recipes import recipe_options
from curation.training.rounds import run_round
from kb_sources.schema import get_schema


def start_training(ws: Workspace, user: User | None, schema: str,
                   options: dict[str, Any] | None = None, recipe: str = "edel") -> Job:
    """Submit a ``train`` job (admins only, checked in :func:`submit_job`).

    Raises:
        PermissionDenied: ``user`` is not an admin.
        CurationError: Unknown schema or recipe, or invalid options.
    """
    sch = get_schema(schema, ws.schemas())
    checked = recipe_options(recipe, dict(options or {}))
    return submit_job(ws, "train", {"schema": sch.name, "recipe": recipe,
                                    "options": asdict(checked)}, user=user)


def run_training(ctx: Any, schema: str, options: dict[str, Any],
                 recipe: str = "edel") -> dict[str, Any]:
    """Worker entry point: train, register a candidate version, score it on the test split."""
    result = run_round(ctx.ws, schema, recipe, recipe_options(recipe, options),
                       actor=_job_owner(ctx), progress=False, report=ctx.progress)
    version = result.version
    return {"version": version.id, "schema": version.schema, "recipe": recipe,
            "dev_ndcg@10": version.metrics.get("dev_ndcg@10"),
            "test_ndcg@10": version.metrics.get("test_ndcg@10"),
            "test_queries": result.test_queries, "warnings": list(result.warnings),
            "examples": version.manifest["examples"]["examples"],
            "seconds": version.manifest["seconds"]}


def _job_owner(ctx: Any) -> str:
    return Jobs(ctx.ws).creator(ctx.job_id) or "worker"


# -- the feedback loop: retraining rounds ---------------------------------------------------------
def start_retrain(ws: Workspace, user: User | None, schema: str,
                  options: dict[str, Any] | None = None) -> Job:
    """Submit a ``retrain`` job, or return the schema's unfinished one (never two at once).

    The check and the submission hold a file lock, so two admins pressing Retrain at the same
    moment (two app processes) start one job.

    Raises:
        PermissionDenied: ``user`` is not an admin (checked before anything else).
        CurationError: Unknown schema or invalid options.
    """
    from curation.access.users import require_admin
    from curation.training.retrain import RetrainOptions

    require_admin(user, "Retraining a model")
    sch = get_schema(schema, ws.schemas())
    checked = RetrainOptions.from_json(dict(options or {}))
    with _kind_lock(ws, f"retrain-{sch.name}"):
        running = unfinished_job(ws, "retrain", sch.name)
        if running is not None:
            return running
        return submit_job(ws, "retrain", {"schema": sch.name, "options": checked.to_json()},
                          user=user)


def run_retrain(ctx: Any, schema: str, options: dict[str, Any]) -> dict[str, Any]:
    """Worker entry point of a ``retrain`` job."""
    from curation.training.retrain import RetrainOptions, retrain

    result = retrain(ctx.ws, schema, RetrainOptions.from_json(options), actor=_job_owner(ctx),
                     progress=False, report=ctx.progress)
    return {"version": result.version.id, "previous": result.previous,
            "promoted": result.promoted, "labels_used": result.labels_used,
            "gate": result.decision.to_json() if result.decision else None,
            "warnings": list(result.warnings)}


def unfinished_job(ws: Workspace, kind: str, schema: str) -> Job | None:
    """The newest queued or running job of ``kind`` for ``schema``, if any."""
    from curation.jobs.queue import list_jobs

    for job in list_jobs(ws, kind, limit=20):
        if job.params.get("schema") == schema and not job.finished:
            return job
    return None


@contextmanager
def _kind_lock(ws: Workspace, name: str) -> Iterator[None]:
    """An exclusive advisory lock (``WS/cache/locks/<name>.lock``) across processes."""
    import fcntl

    folder = ws.root / "cache" / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "w", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
