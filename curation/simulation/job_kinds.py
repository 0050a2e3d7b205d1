"""The simulation wing's background job kind, registered through the entry point
``kbcurate.job_kinds`` (``simulation`` in pyproject.toml; see :mod:`curation.jobs.kinds`)."""

from __future__ import annotations

from curation.jobs.kinds import JobKind

JOB_KINDS = (
    JobKind("simulate", "curation.simulation.jobs:run_simulation",
            "simulate labelling and retraining rounds in a copy of the workspace",
            params=("schema", "config", "options")),
)
