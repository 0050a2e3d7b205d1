"""The evaluation wing's background job kinds, registered through the entry point
``kbcurate.job_kinds`` (``evaluation`` in pyproject.toml; see :mod:`curation.jobs.kinds`)."""

from __future__ import annotations

from curation.jobs.kinds import JobKind

JOB_KINDS = (
    JobKind("evaluate", "curation.evaluation.runner:run_evaluation",
            "evaluate retrievers on a schema's held-out queries",
            params=("schema", "retrievers", "split", "options")),
)
