"""Simulating learn-as-you-label with the fast learner (``kbcurate simulate --learner ranker``).

A simulated curator screens queries in a seeded order: the active ranker (before any, the
first stage's order: BM25) ranks the query's candidates (BM25 top N), the curator
labels the ``labels_per_query`` best unlabelled ones from gold data (*complete* when the KB
cites the abstract and it names the whole record, *partial* when cited but naming less,
*irrelevant* otherwise), and after every ``labels_per_round`` labels a ranker round runs as the
workspace's does (:mod:`curation.training.ranker`): fit on the KB grades of the train split plus
**every label** (``label_splits="all"``: labels of dev and test queries train too; ``"train"``:
only train queries are screened, as before issue 36), measure out of fold on the held-out pool
(dev + test queries; :mod:`curation.training.heldout`), and the gate decides: against the active
version on the same queries, or for a first version (round 0, the KB-only ranker) against the
measured default bm25 + rerank, which it must beat; below 20 held-out queries only ``reason``
promotes. Reported per round: the candidate's and the reference's held-out NDCG@10, the active
version's held-out NDCG@10 (all pool queries, and the test queries alone), promoted or kept and
why.

``kb_share`` models how much of the train split the KB already covers. At 1.0 (the default) the
KB-only ranker trains on every train query, so labels on train queries can only restate what
the KB says; the curator screens the queries the KB does not train on first (the held-out pool,
and the train queries beyond ``kb_share``), whose labels are the only evidence about them, as for
relations a KB does not hold yet. A labelled query the KB does not cover trains on its labelled
documents only.

Nothing is written to the workspace but the cross-encoder's score cache (when the schema has an
active cross version): labels, rankers and the gate live in memory.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from curation.evaluation.harness import EvalQuery, build_task
from curation.evaluation.runner import ranking_context
from curation.ranking.cross import open_cross
from curation.ranking.grades import grade_table, kb_grade
from curation.ranking.model import Group, Ranker, RankerOptions, fit
from curation.ranking.pipeline import RankingContext
from curation.store.cross_scores import CrossScores
from curation.store.documents import Documents
from curation.store.workspace import Workspace
from curation.training.gate import ranker_decision
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
)
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]
#: Which queries the simulated curator labels.
LABEL_SPLITS = ("all", "train")


@dataclass(frozen=True)
class RankerSimulation:
    """How the simulated curator works with the ranker.

    Attributes:
        rounds: Ranker rounds after round 0.
        labels_per_round: Labels between two rounds (the workspace's K).
        labels_per_query: Documents screened per query before the next query.
        kb_share: Share of the train queries whose KB citations every round trains on.
        depth: BM25 candidates per query (N).
        seed: Seed of the query order and of the ranker.
        tolerance_pp: The gate's tolerance.
        label_splits: "all": the curator labels queries of every split (each label trains);
            "train": only train queries.
        reason: An admin's written reason to promote on fewer than 20 held-out queries.
        cross: Give the ranker the cross-encoder's score (issue 45) when the schema has an
            active cross version, as a round does; missing scores are computed through the
            workspace's cache (the one thing a simulation writes: a cache).
    """

    rounds: int = 5
    labels_per_round: int = 10
    labels_per_query: int = 5
    kb_share: float = 1.0
    depth: int = 100
    seed: int = 13
    tolerance_pp: float = 0.5
    label_splits: str = "all"
    reason: str = ""
    cross: bool = True

    def __post_init__(self) -> None:
        for name in ("rounds", "labels_per_round", "labels_per_query", "depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CurationError(f"{name} must be a whole number >= 1, got {value!r}")
        if not 0.0 < self.kb_share <= 1.0:
            raise CurationError(f"kb_share must be in (0, 1], got {self.kb_share!r}")
        if self.label_splits not in LABEL_SPLITS:
            raise CurationError(f"label_splits must be one of {', '.join(LABEL_SPLITS)}, got "
                                f"{self.label_splits!r}")


@dataclass
class _Query:
    q: EvalQuery
    doc_ids: tuple[str, ...]
    x: np.ndarray
    kb: dict[str, int]  # cited doc -> KB grade (g class)


@dataclass
class _Active:
    """The active version in memory: its model and its out-of-fold measurement."""

    name: str
    model: Ranker | None
    measured: Measurement


def simulate_ranker(ws: Workspace, schema: str, config: RankerSimulation | None = None,
                    options: RankerOptions | None = None, *, progress: bool = True,
                    report: Report | None = None) -> dict[str, Any]:
    """Run the simulation; returns ``{"config", "rounds": [...], "summary"}``.

    Raises:
        CurationError: The schema has no train query, or no dev or test query.
    """
    config = config or RankerSimulation()
    options = options or RankerOptions(seed=config.seed)
    sch = get_schema(schema, ws.schemas())
    task = build_task(ws, sch.name)
    train, pool = task.split("train"), [q for q in task.queries if q.split in POOL_SPLITS]
    if not (train and pool):
        raise CurationError(f"{sch.name} needs train and held-out (dev or test) queries for a "
                            f"simulation (has {len(train)} / {len(pool)}); import more KB "
                            "relations or their abstracts")
    table = grade_table(sch.name, ws.root)
    cross = CrossScores(ws).active_version(sch.name) if config.cross else None
    ctx = ranking_context(ws, task, depth=config.depth, progress=progress,
                          cross=open_cross(ws, cross.id, compute=True) if cross else None)
    order = list(train)
    random.Random(config.seed).shuffle(order)
    n_kb = max(1, round(config.kb_share * len(order))) if config.kb_share < 1.0 else len(order)
    covered = {q.qid for q in order[:n_kb]}
    queue = (screening_order(task.queries, covered, config.seed)
             if config.label_splits == "all" else order[n_kb:] + order[:n_kb])
    started = time.perf_counter()
    queries = _prepare(ctx, [*train, *pool], table, progress)
    prepare_s = time.perf_counter() - started
    folds = assign_folds(q.group for q in pool)
    texts = doc_texts(ctx)
    default = measure(ctx, DEFAULT_CONFIGURATION, pool, default_run(ctx, pool, texts), texts)
    sim = _Loop(ctx, queries, covered, folds, pool, texts, table.kb["negative"], options, config)
    active = _Active(DEFAULT_CONFIGURATION, None, default)
    active = sim.round(0, 0, active)
    spent, cursor = 0, 0
    bar = tqdm(total=config.rounds, desc=f"simulate ranker {sch.name}", disable=not progress)
    for r in range(1, config.rounds + 1):
        goal = r * config.labels_per_round
        while spent < goal and cursor < len(queue):
            q = queries[queue[cursor].qid]
            spent += _screen(q, active.model, sim.labels, table, goal - spent, config)
            if _screened(q, sim.labels, config):
                cursor += 1
        active = sim.round(r, spent, active)
        bar.update(1)
        if report:
            report(r / config.rounds, f"round {r}: {spent} labels")
    bar.close()
    return {"config": asdict(config), "options": options.to_json(), "rounds": sim.rows,
            "summary": summary(sch.name, sim.rows, len(covered), len(train), len(pool),
                               spent, prepare_s, default)}


def screening_order(queries: Sequence[EvalQuery], covered: set[str], seed: int
                    ) -> list[EvalQuery]:
    """The curator's order over every query: a seeded shuffle, the queries the KB does not
    train on first (``label_splits="train"`` keeps the order before issue 36: the train queries
    beyond the KB's share, then the others)."""
    order = sorted(queries, key=lambda q: q.qid)
    random.Random(seed + 1).shuffle(order)
    return [q for q in order if q.qid not in covered] + [q for q in order if q.qid in covered]


class _Loop:
    """The rounds of one simulation (labels in memory, the gate as the workspace's)."""

    def __init__(self, ctx: RankingContext, queries: dict[str, _Query], covered: set[str],
                 folds: dict[str, int], pool: list[EvalQuery], texts: dict[str, str],
                 negative: int, options: RankerOptions, config: RankerSimulation) -> None:
        self.ctx, self.queries, self.covered, self.folds = ctx, queries, covered, folds
        self.pool, self.texts, self.negative = pool, texts, negative
        self.options, self.config = options, config
        self.pool_ids = {q.qid for q in pool}
        self.labels: dict[str, dict[str, int]] = {}
        self.rows: list[dict[str, Any]] = []

    def groups(self, without: set[str] = frozenset()) -> list[Group]:  # type: ignore[assignment]
        return _groups(self.queries, self.covered, self.pool_ids, self.labels, self.negative,
                       without)

    def round(self, r: int, spent: int, active: _Active) -> _Active:
        """Fit, measure out of fold, gate; returns the active version after the round."""
        t0 = time.perf_counter()
        served = fit(self.groups(), self.ctx.names, self.options)
        learned = {self.queries[qid].q.group for qid, own in self.labels.items()
                   if own and qid in self.pool_ids}
        run, refits = out_of_fold(
            [_as_prepared(self.queries[q.qid]) for q in self.pool], self.folds, served, learned,
            lambda groups: fit(self.groups(without=groups), self.ctx.names, self.options))
        cand = measure(self.ctx, f"round {r}", self.pool, run, self.texts)
        seconds = time.perf_counter() - t0
        first = active.model is None
        decision = ranker_decision(cand.metrics, active.measured.metrics, against=active.name,
                                   queries=len(self.pool), first=first,
                                   reason=self.config.reason,
                                   tolerance_pp=self.config.tolerance_pp)
        now = _Active(f"round {r}", served, cand) if decision.promote else active
        test = now.measured.on(q.qid for q in self.pool if q.split == "test")
        self.rows.append({
            "round": r, "labels": spent, "train_groups": len(self.groups()),
            "labelled_heldout_queries": sum(1 for q in self.labels if q in self.pool_ids
                                            and self.labels[q]),
            "refits": refits, "seconds": round(seconds, 2), "promoted": bool(decision.promote),
            "against": active.name,
            "heldout_ndcg@10": round(cand.metrics["ndcg@10"], 4),
            "reference_heldout_ndcg@10": round(active.measured.metrics["ndcg@10"], 4),
            "active": now.name,
            "active_heldout_ndcg@10": round(now.measured.metrics["ndcg@10"], 4),
            "active_heldout_entity_recall@10": round(
                now.measured.metrics.get("entity_recall@10", float("nan")), 4),
            "active_test_ndcg@10": round(test.metrics.get("ndcg@10", float("nan")), 4),
            "reasons": list(decision.reasons)})
        logger.info("round %d: %d labels, held-out %.3f vs %.3f (%s): %s (%.1f s)", r, spent,
                    cand.metrics["ndcg@10"], active.measured.metrics["ndcg@10"], active.name,
                    "promoted" if decision.promote else "kept", seconds)
        return now


def summary(schema: str, rows: list[dict[str, Any]], kb_queries: int, train_queries: int,
            pool: int, labels: int, prepare_s: float, default: Measurement) -> dict[str, Any]:
    """The simulation's summary line's figures."""
    later = rows[1:]
    base, last = rows[0]["active_heldout_ndcg@10"], rows[-1]["active_heldout_ndcg@10"]
    return {"schema": schema, "kb_queries": kb_queries, "train_queries": train_queries,
            "heldout_queries": pool, "labels": labels, "prepare_seconds": round(prepare_s, 2),
            "default_heldout_ndcg@10": round(default.metrics["ndcg@10"], 4),
            "round0_promoted": bool(rows[0]["promoted"]),
            "rounds_promoted": sum(1 for x in later if x["promoted"]),
            "rounds_kept": sum(1 for x in later if not x["promoted"]),
            "kb_only_heldout_ndcg@10": base, "final_heldout_ndcg@10": last,
            "kb_only_test_ndcg@10": rows[0]["active_test_ndcg@10"],
            "final_test_ndcg@10": rows[-1]["active_test_ndcg@10"],
            "lift_pp": round(100 * (last - base), 2),
            "max_round_seconds": max(x["seconds"] for x in later) if later
            else rows[0]["seconds"]}


def _as_prepared(item: _Query) -> Prepared:
    return Prepared(item.q, item.doc_ids, item.x)


def _prepare(ctx: RankingContext, queries: Sequence[EvalQuery], table: Any,
             progress: bool) -> dict[str, _Query]:
    """Candidates, feature rows and KB grades of every query (once)."""
    out = {}
    for q in tqdm(queries, desc=f"features {ctx.schema.name}", disable=not progress,
                  mininterval=0.5):
        cands = ctx.candidates(q.text)  # as train_ranker: gold outside the top N is not seen
        x = ctx.features(q.query, cands, q.qid)
        parts = Documents(ctx.ws).parts(q.gold)
        kb = {d: kb_grade(table, " ".join(parts[d]), q.query, q.answers, ctx.builder.matcher)
              for d in q.gold if d in parts}
        out[q.qid] = _Query(q, cands.doc_ids, x, kb)
    return out


def _groups(queries: dict[str, _Query], covered: set[str], pool: set[str],
            labels: dict[str, dict[str, int]], negative: int,
            without: set[str] = frozenset()) -> list[Group]:  # type: ignore[assignment]
    """KB-covered train queries: every candidate graded (labels over KB grades); other labelled
    queries (train beyond the KB's share, held-out ones outside the fold ``without``): their
    labelled documents only."""
    groups = []
    for qid, item in queries.items():
        own = labels.get(qid, {})
        if qid in covered:
            grades = [own.get(d, item.kb.get(d, negative)) for d in item.doc_ids]
            groups.append(Group(qid, item.doc_ids, item.x, tuple(grades)))
        elif own and not (qid in pool and item.q.group in without):
            rows = [i for i, d in enumerate(item.doc_ids) if d in own]
            groups.append(Group(qid, tuple(item.doc_ids[i] for i in rows), item.x[rows],
                                tuple(own[item.doc_ids[i]] for i in rows)))
    return groups


def _screen(item: _Query, ranker: Ranker | None, labels: dict[str, dict[str, int]],
            table: Any, budget: int, config: RankerSimulation) -> int:
    """Label the active ranker's best unlabelled candidates of one query (no active version:
    the first stage's order); returns how many."""
    own = labels.setdefault(item.q.qid, {})
    scores = ranker.score(item.x) if ranker is not None else -np.arange(len(item.doc_ids))
    order = sorted(range(len(item.doc_ids)), key=lambda i: (-scores[i], i))
    room = min(budget, config.labels_per_query - len(own))
    done = 0
    for i in order:
        if done >= room:
            break
        doc = item.doc_ids[i]
        if doc in own:
            continue
        g = item.kb.get(doc)
        grade = ("irrelevant" if g is None else "complete" if g == table.kb["complete"]
                 else "partial")
        own[doc] = table.label(grade)
        done += 1
    return done


def _screened(item: _Query, labels: dict[str, dict[str, int]], config: RankerSimulation
              ) -> bool:
    return len(labels.get(item.q.qid, {})) >= min(config.labels_per_query, len(item.doc_ids))


def format_simulation(result: dict[str, Any]) -> str:
    """The rounds as a plain-text table with the summary line (held-out: out of fold on the
    dev + test queries; "vs": the reference the gate compared with)."""
    lines = [f"{'round':>5} {'labels':>6} {'promoted':>8} {'held-out':>8} {'vs':>7} "
             f"{'against':<14} {'act.held':>8} {'act.test':>8} {'ER@10':>6} {'refits':>6} "
             f"{'sec':>5}"]
    for r in result["rounds"]:
        lines.append(f"{r['round']:>5} {r['labels']:>6} {str(r['promoted']):>8} "
                     f"{r['heldout_ndcg@10']:>8.3f} {r['reference_heldout_ndcg@10']:>7.3f} "
                     f"{r['against'][:14]:<14} {r['active_heldout_ndcg@10']:>8.3f} "
                     f"{r['active_test_ndcg@10']:>8.3f} "
                     f"{r['active_heldout_entity_recall@10']:>6.3f} {r['refits']:>6} "
                     f"{r['seconds']:>5.1f}")
        if not r["promoted"]:
            lines.append(f"{'':>13}kept: {r['reasons'][-1]}")
    s = result["summary"]
    lines.append(f"{s['schema']}: KB covers {s['kb_queries']}/{s['train_queries']} train "
                 f"queries, {s['heldout_queries']} held-out queries (default bm25+rerank "
                 f"{s['default_heldout_ndcg@10']:.3f}); round 0 "
                 f"{'promoted' if s['round0_promoted'] else 'kept'}, then "
                 f"{s['rounds_promoted']} promoted / {s['rounds_kept']} kept; {s['labels']} "
                 f"labels: held-out NDCG@10 {s['kb_only_heldout_ndcg@10']:.3f} -> "
                 f"{s['final_heldout_ndcg@10']:.3f} ({s['lift_pp']:+.2f} pp); slowest round "
                 f"{s['max_round_seconds']:.1f} s (features prepared once in "
                 f"{s['prepare_seconds']:.1f} s)")
    return "\n".join(lines)
