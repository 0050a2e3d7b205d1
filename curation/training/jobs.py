"""Training as a background job: admins start it from the app; the worker runs it.

:func:`start_training` validates the options before anything is queued (so a bad value is
refused in the page's words, not after a worker started) and submits a ``train`` job, which
:func:`curation.jobs.queue.submit_job` refuses for anyone but an admin, whatever the widgets
show. :func:`run_training` is the job's entry point in the worker process.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from curation.access.users import User
from curation.jobs.queue import Job, submit_job
from curation.store.workspace import Workspace
from curation.training.edel import EdelOptions, train_edel
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema


def edel_options(values: dict[str, Any]) -> EdelOptions:
    """EdelOptions from plain values; unknown names and bad values are clear errors."""
    names = [f.name for f in fields(EdelOptions)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise CurationError(f"Unknown training option(s) {', '.join(unknown)}. Available "
                            f"options: {', '.join(names)}")
    options = EdelOptions(**values)
    options.train_config()  # validates the hyperparameters
    options.example_config()
    return options


def start_training(ws: Workspace, user: User | None, schema: str,
                   options: dict[str, Any] | None = None) -> Job:
    """Submit a ``train`` job (admins only, checked in :func:`submit_job`).

    Raises:
        PermissionDenied: ``user`` is not an admin.
        CurationError: Unknown schema or invalid options.
    """
    sch = get_schema(schema, ws.schemas())
    checked = edel_options(dict(options or {}))
    return submit_job(ws, "train", {"schema": sch.name, "options": asdict(checked)}, user=user)


def run_training(ctx: Any, schema: str, options: dict[str, Any]) -> dict[str, Any]:
    """Worker entry point: train, register a candidate version, report it."""
    version = train_edel(ctx.ws, schema, edel_options(options), actor=_job_owner(ctx),
                         progress=False, report=ctx.progress)
    return {"version": version.id, "schema": version.schema,
            "dev_ndcg@10": version.metrics.get("dev_ndcg@10"),
            "examples": version.manifest["examples"]["examples"],
            "seconds": version.manifest["seconds"]}


def _job_owner(ctx: Any) -> str:
    row = ctx.ws.conn.execute("SELECT created_by FROM jobs WHERE id = ?", (ctx.job_id,)).fetchone()
    return (row[0] if row else "") or "worker"
