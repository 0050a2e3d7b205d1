"""The ``pubmed_search`` background job: one PubMed search for a relation, with progress.

Curators and admins may search PubMed (:func:`submit_pubmed_search` checks the role on the
server side): a search adds documents to the workspace every user shares and spends the
workspace's NCBI quota, so annotators, who work through queues of what curators chose, do not
start one. One search per relation runs at a time: asking again while one is queued or running
returns it (the kind's ``unique_by``, decided in one transaction).

The job reports found / fetched / imported / indexed in its progress message
(:class:`curation.pubmed.search.SearchProgress`); its result is the CLI's JSON with the top
:data:`RESULT_HITS` hits, the search's id and what ranked them. The NCBI contact and API key are
read when the job runs (:mod:`curation.pubmed.ncbi`), never stored in its parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curation.access.adjudication import require_reviewer
from curation.access.users import User
from curation.jobs.queue import Job, list_jobs, submit_job
from curation.pubmed.ncbi import ncbi_settings
from curation.pubmed.search import search_pubmed
from curation.store.jobs import Jobs
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.fetch import ESEARCH_MAX
from kb_sources.schema import Schema, get_schema

#: The job kind's name.
JOB_KIND = "pubmed_search"
#: The parameters it accepts.
PARAMS = ("schema", "slots", "query", "max_hits", "rank_text")
#: Ranked hits kept in a job's result.
RESULT_HITS = 50
#: Longest query or ranking text accepted (characters).
MAX_TEXT = 4000


def relation_slots(schema: Schema, partial: PartialRelation) -> dict[str, str]:
    """Query slot -> entity text of a partial relation (what a search is submitted with)."""
    return {s: ents[0].text for s in schema.query_slots if (ents := partial.query.get(s))}


def submit_pubmed_search(ws: Workspace, schema: Schema, slots: Mapping[str, str], *,
                         user: User | None, query: str | None = None, max_hits: int = 200,
                         rank_text: str | None = None, start: bool = True) -> Job:
    """Start a PubMed search for a relation in the background, or return the one running
    (``start=False``: queue it without a worker; tests run it with ``run_job``).

    Raises:
        PermissionDenied: ``user`` is not a curator or an admin.
        CurationError: No NCBI contact email is set, or a bad parameter.
    """
    require_reviewer(user, "Searching PubMed")
    ncbi_settings(ws)  # no contact email: say so now, not in a failed job
    params: dict[str, Any] = {"schema": schema.name, "slots": dict(slots),
                              "max_hits": int(max_hits)}
    if query and query.strip():
        params["query"] = query.strip()
    if rank_text and rank_text.strip():
        params["rank_text"] = rank_text.strip()
    return submit_job(ws, JOB_KIND, params, user=user, start=start)


def search_job(ws: Workspace, schema: str, slots: Mapping[str, str]) -> Job | None:
    """The latest search job for this relation (any status), if any."""
    for job in list_jobs(ws, JOB_KIND, limit=100):
        if job.params.get("schema") == schema and job.params.get("slots") == dict(slots):
            return job
    return None


def check_pubmed_params(ws: Workspace, params: Mapping[str, Any]) -> None:
    """Validator of the job kind: a known schema, slots as texts naming a query slot, texts
    of sane length, ``max_hits`` from 1 to 10,000.

    Raises:
        CurationError: What is wrong and how to fix it.
    """
    schema = get_schema(str(params.get("schema", "")), ws.schemas())
    slots = params.get("slots")
    if not isinstance(slots, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in slots.items()):
        raise CurationError("pubmed_search: slots must map slot names to entity texts")
    unknown = sorted(set(slots) - set(schema.slot_names))
    if unknown or not any(slots.get(s, "").strip() for s in schema.query_slots):
        raise CurationError(f"pubmed_search: slots {sorted(slots)} must fill at least one of "
                            f"{', '.join(schema.query_slots)} (and name only slots of "
                            f"{schema.name})")
    for name in ("query", "rank_text"):
        value = params.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT):
            raise CurationError(f"pubmed_search: {name} must be text of at most {MAX_TEXT:,} "
                                "characters")
    hits = params.get("max_hits", 200)
    if not isinstance(hits, int) or isinstance(hits, bool) or not 1 <= hits <= ESEARCH_MAX:
        raise CurationError(f"pubmed_search: max_hits must be a whole number from 1 to "
                            f"{ESEARCH_MAX:,}, not {hits!r}")


def run_pubmed_search_job(ctx: Any, schema: str, slots: dict[str, str],
                          query: str | None = None, max_hits: int = 200,
                          rank_text: str | None = None) -> dict[str, Any]:
    """Worker entry point: :func:`curation.pubmed.search.search_pubmed` with the job's
    progress."""
    ws = ctx.ws
    result = search_pubmed(ws, get_schema(schema, ws.schemas()), slots,
                           settings=ncbi_settings(ws), actor=Jobs(ws).creator(ctx.job_id)
                           or "worker", query=query, max_hits=max_hits, rank_text=rank_text,
                           progress=lambda p: ctx.progress(p.fraction, p.message()))
    out = result.to_json()
    out["hits"] = out["hits"][:RESULT_HITS]
    out.update(search_id=result.search_id, ranking=result.ranking, found=len(result.found),
               from_pubmed_in_top=sum(h.from_pubmed for h in result.hits[:RESULT_HITS]))
    return out
