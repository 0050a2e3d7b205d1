"""The PubMed wing's background job kinds (read by :mod:`curation.jobs.kinds` as one of the
product's wings; also named in the entry-point group ``kbcurate.job_kinds``, ``pubmed`` in
pyproject.toml).

Both talk to NCBI and have short limits (:attr:`~curation.jobs.kinds.JobKind.max_seconds`: 20
and 30 minutes): a search of 5,000 hits ranked in 20 s against the loopback E-utilities, and a
filter watch of 50 relations makes about 100 requests, under a minute at 3 requests/s. One still
running after its limit is waiting on a server that answers too slowly; it is failed, so the
next request for the same work starts afresh.
"""

from __future__ import annotations

from curation.access.users import Role
from curation.jobs.kinds import JobKind

#: The longest a ``pubmed_search`` job may run (seconds).
SEARCH_MAX_S = 20 * 60.0
#: The longest a ``watch`` job (one run of one watch) may run (seconds).
WATCH_MAX_S = 30 * 60.0

JOB_KINDS = (
    JobKind("pubmed_search", "curation.pubmed.jobs:run_pubmed_search_job",
            "search PubMed for a relation, fetch and import the new abstracts, rank them",
            admin_only=False, roles=frozenset({Role.CURATOR}),
            params=("schema", "slots", "query", "max_hits", "rank_text"),
            validator="curation.pubmed.jobs:check_pubmed_params", unique_by=("schema", "slots"),
            max_seconds=SEARCH_MAX_S),
    # its owner or an admin (submit_watch_run and the job itself check the owner)
    JobKind("watch", "curation.pubmed.watch_jobs:run_watch_job",
            "run a watch: fetch, import and rank what PubMed added since its last run",
            admin_only=False, roles=frozenset({Role.CURATOR}), params=("watch_id",),
            validator="curation.pubmed.watch_jobs:check_watch_params", unique_by=("watch_id",),
            max_seconds=WATCH_MAX_S),
)
