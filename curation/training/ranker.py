"""One round of the fast learner: the KB's train split + every label -> a ranker version -> the
gate.

The version that serves learns from the KB grades of the **train split** (the seeded split by
query entity that ``kbcurate evaluate`` uses) and from **every label**, dev and test relations
included (:mod:`curation.training.ranker_data`). The gate measures on the held-out pool (dev +
test queries) out of fold, by query group, so no query is scored by a model that learned its
own labels (:mod:`curation.training.heldout`): the candidate against the active version on the
same queries, or a first version against the measured default (bm25 + rerank), which it must
beat; below 20 compared queries only an admin's written reason promotes (``reason``; a
label-triggered round has none, keeps its candidate and says why). A model identical to a saved
version (same SHA-256) is not saved a second time. Every round that ran is recorded in the
audit log (:mod:`curation.training.round_history`): the Models page and the sidebar show the
last rounds per schema.

One round per schema runs at a time (a ``ranker_rounds`` row in the database: a second one is
refused with :class:`~curation.store.rankers.RoundRunning`; a label-triggered job then skips).
The round records the version active when it started, and its promotion is a compare-and-swap on
it: an admin who activates another version meanwhile keeps that choice, and the round's version
stays a candidate saying why. Rounds are admin actions: the CLI, an admin, or the system's
learn-as-you-label job acting on a labeller's behalf (the job names the labeller).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tqdm.auto import tqdm

from curation.access.users import Role, User, require_admin
from curation.evaluation.harness import EvalQuery, build_task
from curation.evaluation.runner import ranking_context
from curation.jobs.kinds import SYSTEM_USER
from curation.jobs.queue import Job, get_job, list_jobs, submit_job
from curation.ranking.cross import CrossFeature
from curation.ranking.grades import grade_table
from curation.ranking.learned import feature_versions, versions_learned_groups
from curation.ranking.model import Ranker, RankerOptions, fit
from curation.ranking.pipeline import RANKED, RankingContext
from curation.ranking.versions import (
    RankerVersion,
    activate,
    active_ranker,
    clean_orphans,
    identical_version,
    model_sha256,
    saving_version,
)
from curation.search.cross_scores import cross_for_round
from curation.search.indexing import get_index
from curation.search.ranked import open_first_stages, pooled_evidence
from curation.store.errors import Actor, WorkspaceError, require_admin_actor
from curation.store.rankers import RankerRoundLock, Rankers, RoundRunning
from curation.store.workspace import Workspace
from curation.training.gate import gate_ranker_round
from curation.training.heldout import doc_texts
from curation.training.ranker_data import label_set, training_groups, training_set
from curation.training.ranker_round import (
    RankerRound,
    RoundRequest,
    decide_round,
    identical_decision,
    record_round,
)
from curation.training.round_measure import measure_round
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema
from retrievers.base import Hit, Retriever

logger = logging.getLogger(__name__)

#: Re-exported for the modules that build on a round (simulation, lists).
__all__ = ["JOB_KIND", "RankerRound", "doc_texts", "maybe_learn", "open_context",
           "promote_ranker", "ranked_run", "run_ranker_job", "set_ranker_schedule",
           "start_round", "train_ranker", "training_groups"]


def ranked_run(ctx: RankingContext, ranker: Ranker, queries: Sequence[EvalQuery], k: int = 100,
               *, progress: bool = False) -> dict[str, list[Hit]]:
    """qid -> the ranker's top ``k``."""
    return {q.qid: [r.hit for r in ctx.rank(ranker, q.text, q.query, k, q.qid)]
            for q in tqdm(queries, desc=f"rank {RANKED}", disable=not progress,
                          mininterval=0.5)}


def open_context(ws: Workspace, schema: str, *, dense: Retriever | None = None,
                 base: Retriever | None = None, depth: int = 100, progress: bool = True,
                 held_out: bool = True, stale_ok: bool = False,
                 cross: CrossFeature | None = None) -> RankingContext:
    """A ranking context over the workspace's BM25 index (built when missing; a saved one even
    when documents changed since, with ``stale_ok``).

    ``held_out``: the answer-type dictionary holds only the answers of train-split relations,
    so no dev or test relation reaches a feature (evaluation and training; the app ranks with
    the whole dictionary). ``cross``: the cross-encoder block (:func:`round_cross`).
    """
    sch = get_schema(schema, ws.schemas())
    if held_out:
        return ranking_context(ws, build_task(ws, sch.name), dense=dense, base=base, depth=depth,
                               progress=progress, stale_ok=stale_ok, cross=cross)
    return RankingContext(ws, sch, get_index(ws, "bm25", progress=progress,
                                             stale_ok=stale_ok), dense=dense,
                          base=base, depth=depth, cross=cross)


def round_cross(ws: Workspace, schema: str, *, compute: bool = False) -> CrossFeature | None:
    """The cross-encoder block a round trains with: the schema's active cross version when the
    cache holds scores of most train queries (``compute``: scoring what is missing), else None
    (:func:`curation.search.cross_scores.cross_for_round`). The train queries read the cross
    version's scores as they are, as they read the dense version's cosines: see the leakage
    note of :mod:`curation.ranking.cross`."""
    texts = [q.text for q in build_task(ws, schema).split("train")]
    return cross_for_round(ws, schema, texts, compute=compute)


def train_ranker(ws: Workspace, schema: str, *, user: Actor,
                 options: RankerOptions | None = None, depth: int = 100,
                 dense_version: str | None = None, base_dense: bool = False,
                 roles: Mapping[str, Role | str] | None = None,
                 gate: bool = True, tolerance_pp: float = 0.5, progress: bool = True,
                 context: RankingContext | None = None, reason: str = "",
                 on_behalf_of: str = "", trigger: str = "",
                 cross_compute: bool = False) -> RankerRound:
    """Train, measure, save and (gate permitting) activate a ranker version of ``schema``; the
    round is recorded in the rounds history, failed ones too.

    The first stage is BM25, plus the dense index of ``dense_version`` and the base model's
    dense index when ``base_dense`` (each built when missing: encoding the corpus takes long on
    a CPU). A given ``context`` is used as it is (its dense indexes are recorded as given:
    pass the ``dense_version`` its dense index belongs to). ``reason``: an admin's written
    reason to promote on fewer than 20 held-out queries. ``on_behalf_of`` / ``trigger``: whose
    labels started the round and how (recorded). With an active cross version, the round reads
    its cached scores when most train queries have them (``cross_compute``: scores the missing
    ones first; minutes on a CPU) and records the cross version in the manifest.

    Raises:
        PermissionDenied: ``user`` is not an admin (the CLI, an admin, the system's job).
        RoundRunning: Another round of the schema is running (one round per schema).
        CurationError: No train-split query, or none with a relevant and an irrelevant
            candidate; the disk is full (nothing saved).
    """
    actor = require_admin_actor(user, "Training a ranker version")
    options = options or RankerOptions()
    sch = get_schema(schema, ws.schemas())
    request = RoundRequest(gate, tolerance_pp, reason, on_behalf_of, trigger)
    with round_lock(ws, sch.name, actor) as lock:
        try:
            if context is None:
                dense, base = open_first_stages(ws, dense_version=dense_version,
                                                base=base_dense, progress=progress)
                context = open_context(ws, sch.name, dense=dense, base=base, depth=depth,
                                       progress=progress,
                                       cross=round_cross(ws, sch.name, compute=cross_compute))
            result = _round(ws, sch.name, lock, context, options, request, user=user,
                            roles=roles, dense_version=dense_version, progress=progress)
        except CurationError as exc:
            record_round(ws, lock, request, "failed", (str(exc),))
            raise
    logger.info("ranker %s: %s", result.version.id, "; ".join(result.decision.reasons))
    return result


def _round(ws: Workspace, schema: str, lock: RankerRoundLock, ctx: RankingContext,
           options: RankerOptions, request: RoundRequest, *, user: Actor,
           roles: Mapping[str, Role | str] | None, dense_version: str | None,
           progress: bool) -> RankerRound:
    """The body of :func:`train_ranker`, under the round lock."""
    actor = require_admin_actor(user, "Training a ranker version")
    task = build_task(ws, schema)
    train = task.split("train")
    if not train:
        raise CurationError(f"The train split of {schema} has no query with a cited "
                            "document in the workspace; import more KB relations or their "
                            "abstracts")
    table = grade_table(schema, ws.root)
    labels = label_set(ws, ws.schemas()[schema], task, table, roles)
    started = time.perf_counter()
    tset = training_set(ctx, train, table, labels, progress=progress)
    seconds_features = time.perf_counter() - started
    Rankers(ws).beat_round(lock)
    started = time.perf_counter()
    ranker = fit(tset.groups(), ctx.names, options)
    seconds_fit = time.perf_counter() - started
    state = active_ranker(ws, schema)
    measured = measure_round(ctx, task, tset, labels, ranker, options, state,
                             feature_groups=_feature_groups(ws, ctx, dense_version, state),
                             progress=progress)
    Rankers(ws).beat_round(lock)
    decision = decide_round(measured, request, pooled_evidence(ws, schema, RANKED,
                                                               measured.against))
    manifest = {"options": options.to_json(), "depth": ctx.depth,
                "dense": dense_version if ctx.dense is not None else None,
                "base": ctx.base is not None, "grades": table.to_json(),
                "cross": ctx.cross.manifest() if ctx.cross is not None else None,
                "labels_used": list(labels.used), "labels": labels.provenance(),
                "train_queries": len(train), "train_rows": tset.rows,
                "seconds": {"features": round(seconds_features, 2),
                            "fit": round(seconds_fit, 2)},
                "metrics": {**measured.served, **({"heldout": measured.heldout}
                                                  if measured.heldout else {})},
                "heldout_per_query": measured.per_query,
                "heldout_fingerprint": measured.fingerprint,
                "heldout": measured.summary(), "previous": lock.started_from,
                "calibration": measured.calibration}
    same = identical_version(ws, schema, model_sha256(ranker))
    if same is not None:
        decision, outcome_note = identical_decision(same, decision, lock)
        version, decision, activated = gate_ranker_round(
            ws, same, lock, decision, user=user, gate=request.gate and outcome_note == "",
            record=False)
    else:  # the version and the gate's verdict commit together, or neither stays
        with saving_version(ws, schema, ranker, manifest, actor=actor) as saved:
            version, decision, activated = gate_ranker_round(ws, saved, lock, decision,
                                                             user=user, gate=request.gate)
    outcome = "promoted" if activated else "identical" if same is not None else "kept"
    rec = record_round(ws, lock, request, outcome, decision.reasons, version=version.id,
                       labels=labels, measured=measured,
                       seconds={"features": round(seconds_features, 2),
                                "fit": round(seconds_fit, 2)})
    return RankerRound(version, decision, activated, seconds_features, seconds_fit, len(train),
                       tset.rows, labels.used, (), same.id if same is not None else None,
                       measured, labels.provenance(), rec.id)


def _feature_groups(ws: Workspace, ctx: RankingContext, dense_version: str | None,
                    state: Any) -> dict[str, set[str]]:
    """The query groups the dense and cross versions that the candidate's features (and the
    active version's) read learned curators' labels of (versions gone since: none)."""
    idents = [dense_version if ctx.dense is not None else None,
              ctx.cross.version if ctx.cross is not None else None,
              *feature_versions(state.version.manifest if state.version is not None else None)]
    return versions_learned_groups(ws, idents)


@contextmanager
def round_lock(ws: Workspace, schema: str, actor: str) -> Iterator[RankerRoundLock]:
    """Hold the schema's round lock (one round per schema) for the block; the block starts by
    removing the folders of killed rounds.

    Raises:
        RoundRunning: Another live round of the schema holds it.
    """
    lock = Rankers(ws).begin_round(schema, started_by=actor)
    try:
        clean_orphans(ws)
        yield lock
    finally:
        try:
            Rankers(ws).end_round(lock)
        except WorkspaceError as exc:  # a full disk: this process's lock counts as released
            logger.warning("could not release the ranker round lock of %s (%s)", schema, exc)


# -- learn as you label ---------------------------------------------------------------------------
#: The background job kind of a ranker round (curation.jobs.kinds).
JOB_KIND = "rank"


def maybe_learn(ws: Workspace, schema: str, *, user: User) -> Job | None:
    """Start a ranker round in the background when the schema has
    :meth:`~curation.store.rankers.Rankers.retrain_every` new labels since the last round (the
    label path calls this after every stored label). The round runs as the system on the
    labeller's behalf (the job's ``labeller``, and the audit log, name ``user``).

    Returns the submitted job, or None (not enough new labels, automatic rounds off, or a round
    of this schema already queued or running: its successor starts with the next label).
    """
    every = Rankers(ws).retrain_every()
    if every <= 0 or Rankers(ws).labels_waiting(schema) < every:
        return None
    if round_pending(ws, schema) is not None:
        return None
    taken = Rankers(ws).claim_labels(schema, every)
    if taken is None:  # another process claimed them first
        return None
    logger.info("%d new labels on %s by %s: starting a ranker round", taken, schema, user.name)
    job = submit_job(ws, JOB_KIND, {"schema": schema, "labels": taken, "labeller": user.name},
                     user=SYSTEM_USER)
    with ws.transaction():
        ws.audit(SYSTEM_USER.name, "start", "ranker round", schema,
                 after={"job": job.id, "labels": taken, "on_behalf_of": user.name})
    return job


def round_pending(ws: Workspace, schema: str) -> str | None:
    """Why a new round of ``schema`` would wait (one queued or running), or None."""
    running = Rankers(ws).running_round(schema)
    if running is not None:
        return f"a ranker round of {schema} is running ({running.describe()})"
    job = next((j for j in list_jobs(ws, kind=JOB_KIND, limit=20)
                if j.params.get("schema") == schema and not j.finished), None)
    return None if job is None else f"ranker round job {job.id} of {schema} is {job.status.value}"


def start_round(ws: Workspace, schema: str, *, user: User) -> Job:
    """An admin starts a ranker round of ``schema`` now, in the background (the Models page).

    Raises:
        PermissionDenied: Not an admin.
        CurationError: No such schema, or a round of it is queued or running.
    """
    require_admin(user, "Training a ranker version")
    sch = get_schema(schema, ws.schemas())
    pending = round_pending(ws, sch.name)
    if pending:
        raise CurationError(f"Not started: {pending}; one round per schema runs at a time")
    return submit_job(ws, JOB_KIND, {"schema": sch.name, "labels": 0}, user=user)


def check_rank_params(ws: Workspace, params: Mapping[str, Any]) -> None:
    """Validator of the ``rank`` job: a schema of this workspace, a label count >= 0, the
    labeller's name (a text) when a label started it."""
    get_schema(str(params.get("schema", "")), ws.schemas())
    labels = params.get("labels", 0)
    if isinstance(labels, bool) or not isinstance(labels, int) or labels < 0:
        raise CurationError(f"The rank job's 'labels' must be a whole number >= 0, got "
                            f"{labels!r}")
    if not isinstance(params.get("labeller", ""), str):
        raise CurationError("The rank job's 'labeller' must be a user name")


def run_ranker_job(ctx: Any, schema: str, labels: int = 0, labeller: str = "") -> dict[str, Any]:
    """Background job entry point: one ranker round of ``schema`` (KB + every label), the gate
    deciding promotion; progress goes into the job row. When another round of the schema is
    running, this one is skipped (that round or the next uses every label)."""
    ctx.progress(0.05, f"{labels} new labels: building features")
    job = get_job(ctx.ws, ctx.job_id)
    logger.info("ranker round of %s after labels by %s", schema,
                labeller or job.created_by or "?")
    # the active version's dense first stages, those already built: a round never encodes
    active = active_ranker(ctx.ws, schema).version
    dense_id = active.manifest.get("dense") if active else None
    dense_id = dense_id if isinstance(dense_id, str) else None
    dense, base = open_first_stages(ctx.ws, dense_version=dense_id,
                                    base=bool(active and active.manifest.get("base")),
                                    build=False)
    # the saved BM25 index as it is: a round every few labels must not rebuild it (and
    # replace it under every reader) while an import adds documents; the index job does
    context = open_context(ctx.ws, schema, dense=dense, base=base, progress=False,
                           stale_ok=True, cross=round_cross(ctx.ws, schema))
    trigger = (f"{labels} new labels" + (f" by {labeller}" if labeller else "") if labels
               else f"started by {job.created_by}")
    try:
        result = train_ranker(ctx.ws, schema, user=SYSTEM_USER, progress=False,
                              dense_version=dense_id, context=context,
                              on_behalf_of=labeller, trigger=trigger)
    except RoundRunning as exc:
        ctx.progress(1.0, f"skipped: {exc}")
        record_round(ctx.ws, None, RoundRequest(on_behalf_of=labeller, trigger=trigger),
                     "skipped", (f"skipped: {exc}; the labels go into the next round",),
                     schema=schema, started_by=SYSTEM_USER.name)
        return {"version": None, "activated": False, "skipped": str(exc)}
    verdict = ("promoted" if result.activated else
               f"identical to {result.identical_to}" if result.identical_to else
               "kept as a candidate")
    ctx.progress(1.0, f"{result.version.id}: {verdict}: {result.decision.reasons[-1]}")
    return {"version": result.version.id, "activated": result.activated,
            "identical_to": result.identical_to,
            "reasons": list(result.decision.reasons),
            "metrics": result.version.metrics,
            "seconds": {"features": round(result.seconds_features, 2),
                        "fit": round(result.seconds_fit, 2)},
            "labels_used": len(result.labels_used), "round": result.record_id}


# -- admin actions ---------------------------------------------------------------------------------
def promote_ranker(ws: Workspace, ident: str, *, user: User, reason: str) -> RankerVersion:
    """Make a ranker version the active one of its schema (rollback, or overriding the gate):
    admins only, with a written reason (audited).

    Raises:
        PermissionDenied: Not an admin.
        CurationError: No reason, or the version does not exist or cannot be loaded.
    """
    require_admin(user, "Activating a ranker version")
    if not reason.strip():
        raise CurationError("Say why this ranker version should rank (the reason is audited)")
    return activate(ws, ident, user=user, reason=reason.strip())


def set_ranker_schedule(ws: Workspace, every: int, *, user: User) -> int:
    """Change after how many new labels the ranker retrains (admins only; 0: never)."""
    Rankers(ws).set_retrain_every(every, user=user)
    return Rankers(ws).retrain_every()
