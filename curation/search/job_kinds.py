"""The search wing's background job kinds, registered through the entry point
``kbcurate.job_kinds`` (``search`` in pyproject.toml; see :mod:`curation.jobs.kinds`)."""

from __future__ import annotations

from curation.jobs.kinds import JobKind

JOB_KINDS = (
    JobKind("index", "curation.search.indexing:run_index_job",
            "build or update a retriever index over the workspace documents",
            admin_only=False, params=("retriever", "options", "rebuild"),
            unique_by=("retriever", "options"),
            validator="curation.search.indexing:check_index_params"),
)
