"""A ranker round's measurement: the candidate out of fold on the held-out pool, and what it is
compared with on the same queries (issue 36 items 3 and 4; the method is
:mod:`curation.training.heldout`'s).

* **The active version**, when it can be used: its own out-of-fold scores, stored with it, while
  the pool is unchanged (same queries, gold and folds: the fingerprint); otherwise its model
  scored on the pool's queries whose groups it learned no label of (the candidate then on the
  same queries).
* **The measured default** (bm25 + the entity rerank) when there is no usable active version: a
  first version must beat it.

The serving model's own dev and test scores (what ``kbcurate evaluate --retriever ranked``
reports) are kept as the version's ``dev`` and ``test`` metrics.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curation.evaluation.harness import EvalQuery, EvalTask
from curation.ranking.model import Ranker, RankerOptions, fit
from curation.ranking.pipeline import RankingContext
from curation.ranking.versions import ActiveRanker, load_ranker
from curation.screening.calibration import fit_calibration
from curation.screening.queue import screening_candidates
from curation.training.heldout import (
    DEFAULT_CONFIGURATION,
    POOL_SPLITS,
    Measurement,
    Prepared,
    assign_folds,
    default_run,
    doc_texts,
    measure,
    out_of_fold,
    per_query_json,
    pool_fingerprint,
    prepare,
    stored_measurement,
    top_hits,
)
from curation.training.ranker_data import LabelSet, TrainingSet
from curation.training.round_gate import MeasuredQueries, measured_queries
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Pool queries whose screening-deep candidate lists calibrate a version (a seeded sample when
#: the pool is larger; the BioRED pools hold 120-224). With 40 of them the stop rule's heldout
#: coverage fell to 91.7%; with the whole pool it is 98.6% (docs/evaluation.md).
CALIBRATION_QUERIES = 300
#: Seed of that sample.
CALIBRATION_SEED = 17


@dataclass(frozen=True)
class RoundMeasurement:
    """What the gate compares, and what the version keeps.

    Attributes:
        candidate: The candidate's out-of-fold scores on the compared queries.
        reference: The active version's or the default's on the same queries (None: the
            schema has no held-out query).
        against: What the reference is ("disease_gene-ranker@2", "bm25+rerank").
        first: The reference is the default (no usable active version).
        pool: Queries in the held-out pool.
        folds: Folds of the pool.
        refits: Models fitted for folds with labels.
        served: split -> the serving model's metrics ("dev", "test").
        heldout: The candidate's out-of-fold metrics on the whole pool.
        per_query: The candidate's out-of-fold scores per pool query (kept with the version).
        fingerprint: The pool's fingerprint.
        notes: Why fewer queries were compared, or why the active version was not.
        calibration: The candidate's screening calibration, fitted on its out-of-fold scores
            of every pool candidate (:meth:`Calibration.to_json`; empty when the pool has no
            relevant and irrelevant candidate).
    """

    candidate: Measurement | None
    reference: Measurement | None
    against: str
    first: bool
    pool: int
    folds: int = 0
    refits: int = 0
    served: dict[str, dict[str, float]] = field(default_factory=dict)
    heldout: dict[str, float] = field(default_factory=dict)
    per_query: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    notes: tuple[str, ...] = ()
    calibration: dict[str, Any] = field(default_factory=dict)

    @property
    def compared(self) -> int:
        return self.candidate.queries if self.candidate is not None else 0

    def summary(self) -> dict[str, Any]:
        """The round's held-out scores for the history (rounded)."""
        def pick(m: Measurement | None) -> dict[str, float]:
            return {} if m is None else {k: round(float(m.metrics.get(k, 0.0)), 4)
                                         for k in ("ndcg@10", "entity_recall@10")}
        return {"pool": self.pool, "compared": self.compared, "folds": self.folds,
                "refits": self.refits, "against": self.against, "first": self.first,
                "candidate": pick(self.candidate), "reference": pick(self.reference),
                "notes": list(self.notes)}


def heldout_pool(task: EvalTask) -> list[EvalQuery]:
    """The dev and test queries."""
    return [q for q in task.queries if q.split in POOL_SPLITS]


def measure_round(ctx: RankingContext, task: EvalTask, tset: TrainingSet, labels: LabelSet,
                  served: Ranker, options: RankerOptions, active: ActiveRanker, *,
                  feature_groups: Mapping[str, set[str]] | None = None,
                  progress: bool = False) -> RoundMeasurement:
    """Measure a round's candidate (``served``, fitted on ``tset``) and its reference.

    ``feature_groups``: dense or cross version -> the query groups it learned curators' labels
    of, for the versions the candidate's or the reference's features read. Their dev and test
    queries are left out of the pool (:func:`~curation.training.round_gate.measured_queries`):
    a feature fitted on a query's labels would score what was learned there, not search (the
    dense gate's rule, issue 44); the notes say how many and why.
    """
    left = measured_queries(task, set().union(*(feature_groups or {}).values()))
    pool = heldout_pool(left.task)
    left_note = _left_out_note(left, feature_groups or {})
    if not pool:
        return RoundMeasurement(None, None, "", active.version is None, 0, notes=left_note)
    folds = assign_folds(q.group for q in pool)
    fingerprint = pool_fingerprint(pool, folds)
    prepared = prepare(ctx, pool, progress=progress)
    texts = doc_texts(ctx)

    def fit_without(groups: set[str]) -> Ranker:
        return fit(tset.groups(without=groups), ctx.names, options)

    deep = calibration_lists(ctx, pool)
    oof_scores: dict[str, np.ndarray] = {}
    run, refits = out_of_fold(prepared, folds, served, labels.groups(), fit_without,
                              {qid: x for qid, (_, x) in deep.items()}, oof_scores)
    candidate = measure(ctx, "candidate", pool, run, texts)
    own = {p.q.qid: top_hits(served, p) for p in prepared}
    split_of = {q.qid: q.split for q in pool}
    served_metrics = {}
    for split in POOL_SPLITS:
        queries = [q for q in pool if q.split == split]
        if queries:
            served_metrics[split] = measure(ctx, split, queries, own, texts).metrics
    reference, against, notes = reference_measurement(ctx, active, prepared, fingerprint, texts)
    notes = left_note + notes
    compared = candidate.on(reference.per_query) if reference is not None else candidate
    logger.info("held-out pool of %s: %d queries (%s), %d folds, %d refits", ctx.schema.name,
                len(pool), ", ".join(f"{s} {sum(v == s for v in split_of.values())}"
                                     for s in POOL_SPLITS), len(set(folds.values())), refits)
    return RoundMeasurement(
        compared, reference, against, against == DEFAULT_CONFIGURATION, len(pool),
        len(set(folds.values())), refits, served_metrics, candidate.metrics,
        per_query_json(candidate), fingerprint, notes,
        pool_calibration(pool, deep, oof_scores))


def _left_out_note(left: MeasuredQueries, feature_groups: Mapping[str, set[str]]
                   ) -> tuple[str, ...]:
    n = sum(left.count(split) for split in POOL_SPLITS)
    if not n:
        return ()
    hit = set().union(*(set(v) for v in left.groups.values()))
    who = sorted(v for v, groups in feature_groups.items() if groups & hit)
    return (f"{n} held-out queries left out of the measurement: {', '.join(who)} learned "
            f"curators' labels of their {len(hit)} query group(s), so their features there "
            "would score what was learned, not search",)


def calibration_lists(ctx: RankingContext, pool: Sequence[EvalQuery],
                      limit: int | None = None
                      ) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """qid -> (candidates, feature rows) of a seeded sample of ``limit`` pool queries (default
    :data:`CALIBRATION_QUERIES`), as deep
    as a screening queue (:data:`~curation.screening.queue.SCREENING_DEPTH`): the screening
    calibration is fitted where it is used, so its rank term is not extrapolated past the
    ranker's own depth (fitted on the top 100, variant_disease's rank slope was -4.4 and the
    calibrated stop rule stopped 2 of its 4 heldout queries short). Adds ~5-9 s to a round on
    the BioRED tasks."""
    limit = CALIBRATION_QUERIES if limit is None else limit
    chosen = sorted(pool, key=lambda q: q.qid)
    if len(chosen) > limit:
        chosen = sorted(random.Random(CALIBRATION_SEED).sample(chosen, limit),
                        key=lambda q: q.qid)
    return {q.qid: screening_candidates(ctx, q.text, q.query, q.qid) for q in chosen}


def pool_calibration(pool: Sequence[EvalQuery],
                     deep: Mapping[str, tuple[tuple[str, ...], np.ndarray]],
                     scores: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The screening calibration (:mod:`curation.screening.calibration`) fitted on the
    out-of-fold scores and gold of the sampled pool queries' deep lists, as JSON; empty when it
    cannot be fitted (logged)."""
    items = [(scores[q.qid], np.isin(np.array(deep[q.qid][0]), list(q.gold)))
             for q in pool if q.qid in scores and q.qid in deep and len(deep[q.qid][0])]
    try:
        fitted = fit_calibration([s for s, _ in items], [r for _, r in items])
    except CurationError as exc:
        logger.warning("no screening calibration for this version: %s", exc)
        return {}
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in fitted.to_json().items()}


def reference_measurement(ctx: RankingContext, active: ActiveRanker,
                          prepared: Sequence[Prepared], fingerprint: str,
                          texts: dict[str, str]) -> tuple[Measurement, str, tuple[str, ...]]:
    """(the reference's scores, its name, notes): the active version where it can be used,
    else the measured default."""
    pool = [p.q for p in prepared]
    notes: list[str] = []
    version = active.version
    if active.problem:
        notes.append(f"the active version {active.ident} cannot be used ({active.problem}); "
                     f"the candidate is compared with the measured default "
                     f"{DEFAULT_CONFIGURATION} and replaces it if it beats that")
    if version is not None:
        stored = stored_measurement(version.id, version.manifest.get("heldout_per_query"))
        if (stored is not None and version.manifest.get("heldout_fingerprint") == fingerprint
                and set(stored.per_query) >= {q.qid for q in pool}):
            return stored.on(q.qid for q in pool), version.id, tuple(notes)
        try:
            model = load_ranker(version)
            if list(model.names) != list(ctx.names):
                raise CurationError("it was trained on other features than this code builds")
        except CurationError as exc:
            notes.append(f"the active version {version.id} cannot rank here ({exc}); the "
                         f"candidate is compared with the measured default "
                         f"{DEFAULT_CONFIGURATION}")
        else:
            provenance = version.manifest.get("labels")
            learned = set(provenance.get("heldout_groups", [])
                          if isinstance(provenance, dict) else [])
            keep = [p for p in prepared if p.q.group not in learned]
            if len(keep) < len(prepared):
                notes.append(f"compared on {len(keep)} of {len(prepared)} held-out queries: "
                             f"{version.id} learned labels of the others' query groups")
            run = {p.q.qid: top_hits(model, p) for p in keep}
            return (measure(ctx, version.id, [p.q for p in keep], run, texts), version.id,
                    tuple(notes))
    run = default_run(ctx, pool, texts)
    return measure(ctx, DEFAULT_CONFIGURATION, pool, run, texts), DEFAULT_CONFIGURATION, \
        tuple(notes)
