"""The ``simulate`` background job: the learn-as-you-label simulation of the dense recipes
(:mod:`curation.simulation.dense`) started from the app by an admin, run by a worker.

:func:`start_simulation` validates the configuration before anything is queued and submits the
job, which :func:`curation.jobs.queue.submit_job` refuses for anyone but an admin whatever the
widgets show; :func:`run_simulation` is its entry point in the worker process (the job kind is
declared in :mod:`curation.training.job_kinds`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from curation.access.users import User
from curation.jobs.queue import Job, submit_job
from curation.store.workspace import Workspace
from kb_sources.schema import get_schema


def start_simulation(ws: Workspace, user: User | None, schema: str,
                     config: dict[str, Any] | None = None,
                     options: dict[str, Any] | None = None) -> Job:
    """Submit a ``simulate`` job (admins only; runs in a copy of the workspace).

    Raises:
        PermissionDenied: ``user`` is not an admin (checked before anything else).
        CurationError: Unknown schema or invalid options.
    """
    from curation.access.users import require_admin
    from curation.simulation.dense import SimulationConfig
    from curation.training.retrain import RetrainOptions

    require_admin(user, "Simulating the feedback loop")
    sch = get_schema(schema, ws.schemas())
    cfg = SimulationConfig(**dict(config or {}))
    opts = RetrainOptions.from_json({"evaluation": "pool", **dict(options or {})})
    return submit_job(ws, "simulate", {"schema": sch.name, "config": asdict(cfg),
                                       "options": opts.to_json()}, user=user)


def run_simulation(ctx: Any, schema: str, config: dict[str, Any],
                   options: dict[str, Any]) -> dict[str, Any]:
    """Worker entry point of a ``simulate`` job: the summary lands in WS/exports/."""
    from curation.simulation.dense import SimulationConfig, simulate
    from curation.training.retrain import RetrainOptions

    out = ctx.ws.root / "exports" / f"simulation-{schema}-job{ctx.job_id}"
    summary = simulate(ctx.ws, schema, SimulationConfig(**config),
                       RetrainOptions.from_json(options), progress=False, report=ctx.progress,
                       out_dir=out)
    return {"out_dir": str(out), "targets": summary["targets"], "rounds": summary["rounds"]}
