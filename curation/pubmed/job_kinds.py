"""The PubMed wing's background job kinds, registered through the entry point
``kbcurate.job_kinds`` (``pubmed`` in pyproject.toml; see :mod:`curation.jobs.kinds`)."""

from __future__ import annotations

from curation.access.users import Role
from curation.jobs.kinds import JobKind

JOB_KINDS = (
    JobKind("pubmed_search", "curation.pubmed.jobs:run_pubmed_search_job",
            "search PubMed for a relation, fetch and import the new abstracts, rank them",
            admin_only=False, roles=frozenset({Role.CURATOR}),
            params=("schema", "slots", "query", "max_hits", "rank_text"),
            validator="curation.pubmed.jobs:check_pubmed_params", unique_by=("schema", "slots")),
    # its owner or an admin (submit_watch_run and the job itself check the owner)
    JobKind("watch", "curation.pubmed.watch_jobs:run_watch_job",
            "run a watch: fetch, import and rank what PubMed added since its last run",
            admin_only=False, roles=frozenset({Role.CURATOR}), params=("watch_id",),
            validator="curation.pubmed.watch_jobs:check_watch_params", unique_by=("watch_id",)),
)
