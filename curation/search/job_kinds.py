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
    JobKind("cross_scores", "curation.search.cross_scores:run_cross_job",
            "score each relation's top K with the active cross-encoder into the workspace's "
            "cache (the learned ranker's cross feature)",
            admin_only=False, params=("schema", "version", "k", "query_keys", "text"),
            unique_by=("schema", "version", "query_keys", "text"),
            validator="curation.search.cross_scores:check_cross_params",
            max_seconds=6 * 3600.0),
)
