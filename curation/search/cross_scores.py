"""The ``cross_scores`` background job: the active cross-encoder reads each relation's top K.

The learned ranker's cross-encoder feature (:mod:`curation.ranking.cross`) reads scores from the
workspace's cache only; this job fills it. For each relation of a schema (or the few asked for)
it takes the first stages' top K of the relation's query text (K = 50 unless the workspace sets
another, :func:`~curation.ranking.cross.workspace_k`; BM25, plus the dense indexes the schema's
active ranker reads, when built), skips the pairs already cached for
the cross version (so a job cancelled or stopped half way resumes where it was, and a second
run scores nothing), scores the rest and stores them, one relation per transaction, reporting
"scored N of M relations" as it goes. It uses one CPU thread (:data:`JOB_THREADS`): the other
core stays with the pages, so labels stay fast while it runs.

When a job is queued:

* after a cross version becomes active (:func:`after_cross_activation`): every relation of its
  schema, oldest job first;
* when a relation is opened on the Curate page whose text has no score yet
  (:func:`request_relation_scores`): a small job for that relation alone, which the page never
  waits for (its ranking uses what is cached; the next search has the scores). The first open
  after an activation also queues the schema's job when none ran for that version yet.

A kind's ``unique_by`` (schema, version, relations, text) makes a second request for the same
work join the unfinished job. Ranker rounds (:func:`cross_for_round`) read the same cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from curation.access.users import User
from curation.jobs.kinds import SYSTEM_USER
from curation.jobs.queue import Job, list_jobs, submit_job
from curation.ranking.cross import (
    CrossFeature,
    Score,
    check_k,
    cross_top,
    fill,
    load_score,
    open_cross,
    workspace_k,
)
from curation.ranking.features import DEFAULT_DEPTH, gather
from curation.ranking.versions import active_ranker
from curation.search.indexing import get_index
from curation.search.ranked import version_first_stages
from curation.store.cross_scores import (
    CrossScores,
    is_cross_version,
    model_key,
)
from curation.store.documents import Documents
from curation.store.models import Models, ModelVersion
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema

logger = logging.getLogger(__name__)

#: The job kind (:mod:`curation.search.job_kinds`).
CROSS_JOB = "cross_scores"
#: torch CPU threads of the job (one core stays with the pages).
JOB_THREADS = 1
#: Share of a round's train queries that must have cached scores for the round to use them.
MIN_SHARE = 0.9
#: Seconds between two progress writes.
REPORT_EVERY_S = 1.0
#: The most relations one job may be asked for by key.
MAX_KEYS = 1000

Report = Callable[[float, str], None]


@dataclass(frozen=True)
class CrossRun:
    """What a scoring run did.

    Attributes:
        version: The cross version (empty when the schema has none active).
        relations: Relations whose top K were looked at.
        scored: Pairs the cross-encoder read in this run.
        cached: Pairs already in the cache (skipped).
        seconds: Wall time.
    """

    version: str
    relations: int
    scored: int
    cached: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def relation_texts(ws: Workspace, schema: str, query_keys: Sequence[str] | None = None
                   ) -> list[tuple[str, str]]:
    """(query key, query text) of the schema's relations (of ``query_keys`` when given), in
    the store's order."""
    sch = get_schema(schema, ws.schemas())
    wanted = set(query_keys) if query_keys is not None else None
    return [(p.query_key, p.render(sch).text) for p in Relations(ws).partial(sch.name)
            if wanted is None or p.query_key in wanted]


def score_relations(ws: Workspace, schema: str, *, version: str | None = None,
                    k: int | None = None, query_keys: Sequence[str] | None = None,
                    text: str | None = None, score: Score | None = None,
                    threads: int | None = None, report: Report | None = None) -> CrossRun:
    """Score the top ``k`` of each relation of ``schema`` (or of ``query_keys``; ``text``: the
    text of the single relation asked for, a curator's edited question) with the cross version
    (default: the schema's active one) and cache them; cached pairs are skipped. The model is
    loaded only when a pair needs scoring (``score`` replaces it: tests, benchmarks).

    Raises:
        UnknownNameError: No such version. CurationError: Not a cross version of the schema.
    """
    started = time.monotonic()
    target = _cross_version(ws, schema, version)
    if target is None:
        return CrossRun("", 0, 0, 0, 0.0)
    k = check_k(workspace_k(ws) if k is None else k)
    items = relation_texts(ws, schema, query_keys)
    if text is not None and text.strip():
        items = [(key, text) for key, _ in items[:1]] or [("", text)]
    key, store = model_key(target), CrossScores(ws)
    first_stages = _first_stages(ws, schema)
    scored = cached = 0
    last = 0.0
    for i, (_, query) in enumerate(items):
        top = cross_top(first_stages(query), k)
        missing = store.missing(key, query, top)
        cached += len(top) - len(missing)
        if missing:
            if score is None:
                score = load_score(target.model_dir, threads=threads)
            scored += len(fill(ws, key, score, query, missing, Documents(ws).parts(missing)))
        if report and (time.monotonic() - last >= REPORT_EVERY_S or i + 1 == len(items)):
            last = time.monotonic()
            report((i + 1) / max(len(items), 1), f"{target.id}: scored {i + 1:,} of "
                   f"{len(items):,} relations ({scored:,} pairs read, {cached:,} cached)")
    run = CrossRun(target.id, len(items), scored, cached, round(time.monotonic() - started, 2))
    logger.info("cross scores of %s with %s: %s", schema, target.id, run)
    return run


def _cross_version(ws: Workspace, schema: str, version: str | None) -> ModelVersion | None:
    if not version:
        return CrossScores(ws).active_version(schema)
    found = Models(ws).get(version)
    if not is_cross_version(found) or found.schema != schema:
        raise CurationError(f"{found.id} is not a cross-encoder version of {schema} (recipe "
                            f"{found.recipe!r}, schema {found.schema!r}); pass a "
                            f"{schema}-cross@N version")
    return found


def _first_stages(ws: Workspace, schema: str) -> Callable[[str], Any]:
    """``fn(text) -> Candidates`` over BM25 and the dense indexes the schema's active ranker
    reads (those built), at its depth: the candidates whose top K that ranker scores."""
    bm25 = get_index(ws, "bm25", progress=False, stale_ok=True)
    active = active_ranker(ws, schema).version
    dense, base = version_first_stages(ws, active) if active else (None, None)
    depth = int(active.manifest.get("depth", DEFAULT_DEPTH)) if active else DEFAULT_DEPTH

    def candidates(text: str) -> Any:
        return gather(bm25.search(text, depth),
                      dense.search(text, depth) if dense is not None else None,
                      base.search(text, depth) if base is not None else None,
                      depth=depth, text=text)
    return candidates


# -- queueing -------------------------------------------------------------------------------------
def queue_schema_scores(ws: Workspace, schema: str, *, user: User = SYSTEM_USER,
                        version: str | None = None, k: int | None = None,
                        start: bool = True) -> Job | None:
    """Queue the scoring of every relation of ``schema`` (the unfinished one doing it, when
    there is one) at K ``k`` (default the workspace's); None when the schema has no active
    cross version."""
    target = _cross_version(ws, schema, version)
    if target is None:
        return None
    return submit_job(ws, CROSS_JOB, {"schema": schema, "version": target.id,
                                      "k": check_k(workspace_k(ws) if k is None else k)},
                      user=user, start=start)


def after_cross_activation(ws: Workspace, version: str, *, start: bool = True) -> Job | None:
    """What activating a cross version starts: its schema's scoring job (call it after
    :meth:`~curation.store.models.Models.activate` of a ``cross`` version); None for another
    kind of version."""
    found = Models(ws).get(version)
    if not is_cross_version(found):
        return None
    return queue_schema_scores(ws, found.schema, version=found.id, start=start)


def request_relation_scores(ws: Workspace, schema: str, query_key: str, text: str, *,
                            user: User, version: str | None = None, start: bool = True
                            ) -> Job | None:
    """The Curate page opened a relation: queue the scoring of its top K when its text has no
    cached score of the cross version (default: the active one), and the schema's job when none
    ran for that version yet. Returns the relation's job, or None (nothing to do). Never waits.
    """
    target = _cross_version(ws, schema, version)
    if target is None or not text.strip():
        return None
    if not any(j.params.get("version") == target.id and "query_keys" not in j.params
               and j.status.value not in ("failed", "cancelled")
               for j in list_jobs(ws, CROSS_JOB, limit=200)):
        queue_schema_scores(ws, schema, version=target.id, start=start)
    if CrossScores(ws).scored_texts(model_key(target), [text]):
        return None
    return submit_job(ws, CROSS_JOB, {"schema": schema, "version": target.id,
                                      "query_keys": [query_key], "text": text},
                      user=user, start=start)


def on_relation_opened(ws: Workspace, schema: str, query_key: str, text: str, *,
                       user: User | None, cross: CrossFeature | None = None) -> Job | None:
    """The Curate page's hook: :func:`request_relation_scores` for the cross version the page's
    ranker reads (``cross``; default the active one), never raising: a job that cannot be
    queued is logged, and the page ranks with what is cached."""
    if user is None:
        return None
    try:
        return request_relation_scores(ws, schema, query_key, text, user=user,
                                       version=cross.version if cross else None)
    except CurationError as exc:
        logger.warning("cross scores of %s %s not queued: %s", schema, query_key, exc)
        return None


# -- ranker rounds --------------------------------------------------------------------------------
def cross_for_round(ws: Workspace, schema: str, texts: Sequence[str], *, compute: bool = False,
                    min_share: float = MIN_SHARE) -> CrossFeature | None:
    """The cross block a ranker round trains with: the schema's active cross version, when the
    cache holds scores for at least ``min_share`` of the round's train query ``texts`` (a round
    after a label never waits for the cross-encoder), or always with ``compute`` (a round run
    by hand scores what is missing). None: no active cross version, or too few scores yet (the
    round trains without the cross block and says so in the log)."""
    target = CrossScores(ws).active_version(schema)
    if target is None:
        return None
    if compute:
        return open_cross(ws, target.id, compute=True)
    have = CrossScores(ws).scored_texts(model_key(target), texts)
    if not texts or have < min_share * len(texts):
        logger.info("ranker round of %s without the cross-encoder: %d of %d train queries have "
                    "scores of %s (%.0f%% needed); the cross_scores job is filling the cache",
                    schema, have, len(texts), target.id, 100 * min_share)
        return None
    return open_cross(ws, target.id)


# -- the job --------------------------------------------------------------------------------------
def check_cross_params(ws: Workspace, params: Mapping[str, Any]) -> None:
    """Validator of the ``cross_scores`` job.

    Raises:
        CurationError: An unknown schema, a version that is no cross version of it, a bad K,
            query keys that are not a list of texts, or a text without exactly one key.
    """
    schema = get_schema(str(params.get("schema", "")), ws.schemas()).name
    if params.get("version") is not None:
        _cross_version(ws, schema, str(params["version"]))
    if params.get("k") is not None:
        check_k(params["k"])
    keys = params.get("query_keys")
    if keys is not None and (not isinstance(keys, list) or not 0 < len(keys) <= MAX_KEYS
                             or not all(isinstance(x, str) and x for x in keys)):
        raise CurationError(f"The cross_scores job's 'query_keys' must be a list of 1 to "
                            f"{MAX_KEYS} relation keys, got {str(keys)[:60]!r}")
    text = params.get("text")
    if text is not None and (not isinstance(text, str) or not text.strip() or keys is None
                             or len(keys) != 1):
        raise CurationError("The cross_scores job's 'text' must be a non-empty query text, "
                            "given with exactly one relation key")


def run_cross_job(ctx: Any, schema: str, version: str | None = None, k: int | None = None,
                  query_keys: list[str] | None = None, text: str | None = None
                  ) -> dict[str, Any]:
    """Worker entry point of a ``cross_scores`` job (see the module docstring)."""
    ctx.progress(0.0, f"scoring the top K of {schema}'s relations with the cross-encoder")
    run = score_relations(ctx.ws, schema, version=version, k=k, query_keys=query_keys,
                          text=text, threads=JOB_THREADS, report=ctx.progress)
    if not run.version:
        ctx.progress(1.0, f"{schema} has no active cross-encoder version: nothing to score")
    return run.to_json()
