"""Simulating learn-as-you-label with the fast learner (``kbcurate simulate --learner ranker``).

A simulated curator screens train-split queries in a seeded order: the active ranker ranks the
query's candidates (BM25 top N), the curator labels the ``labels_per_query`` best unlabelled ones
from gold data (*complete* when the KB cites the abstract and it names the whole record,
*partial* when cited but naming less, *irrelevant* otherwise), and after every
``labels_per_round`` labels a ranker round runs: fit on the KB grades plus every label, score on
the dev split, the gate decides promotion. Test NDCG@10 (no label ever touches a test query) is
reported per round for the candidate and the active ranker; round 0 is the KB-only ranker.

``kb_share`` models how much of the train split the KB already covers. At 1.0 (the default) the
KB-only ranker trains on every train query, so labels on train queries can only restate what
the KB says (a cited abstract is relevant, the rest is not); that is the honest setting for this
data. Below 1.0 the KB-only ranker sees the first ``kb_share`` of the train queries and the
curator screens the others first: the curator's labels are then the only evidence on those
queries, as for relations a KB does not hold yet. A labelled query the KB does not cover trains
on its labelled documents only.

Nothing is written to the workspace: labels, rankers and the gate live in memory.
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

from curation.evaluation.harness import EvalQuery, build_task, score_run
from curation.evaluation.runner import ranking_context
from curation.ranking.grades import grade_table, kb_grade
from curation.ranking.model import Group, Ranker, RankerOptions, fit
from curation.ranking.pipeline import RANKED, RankingContext
from curation.store.documents import Documents
from curation.store.workspace import Workspace
from curation.training.gate import decide
from curation.training.ranker import doc_texts, ranked_run
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]


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
    """

    rounds: int = 5
    labels_per_round: int = 10
    labels_per_query: int = 5
    kb_share: float = 1.0
    depth: int = 100
    seed: int = 13
    tolerance_pp: float = 0.5

    def __post_init__(self) -> None:
        for name in ("rounds", "labels_per_round", "labels_per_query", "depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CurationError(f"{name} must be a whole number >= 1, got {value!r}")
        if not 0.0 < self.kb_share <= 1.0:
            raise CurationError(f"kb_share must be in (0, 1], got {self.kb_share!r}")


@dataclass
class _Query:
    q: EvalQuery
    doc_ids: tuple[str, ...]
    x: np.ndarray
    kb: dict[str, int]  # cited doc -> KB grade (g class)


def simulate_ranker(ws: Workspace, schema: str, config: RankerSimulation | None = None,
                    options: RankerOptions | None = None, *, progress: bool = True,
                    report: Report | None = None) -> dict[str, Any]:
    """Run the simulation; returns ``{"config", "rounds": [...], "summary"}``.

    Raises:
        CurationError: The schema has no train, dev or test query.
    """
    config = config or RankerSimulation()
    options = options or RankerOptions(seed=config.seed)
    sch = get_schema(schema, ws.schemas())
    task = build_task(ws, sch.name)
    train, dev, test = task.split("train"), task.split("dev"), task.split("test")
    if not (train and dev and test):
        raise CurationError(f"{sch.name} needs train, dev and test queries for a simulation "
                            f"(has {len(train)} / {len(dev)} / {len(test)}); import more KB "
                            "relations or their abstracts")
    table = grade_table(sch.name, ws.root)
    ctx = ranking_context(ws, task, depth=config.depth, progress=progress)
    order = list(train)
    random.Random(config.seed).shuffle(order)
    n_kb = max(1, round(config.kb_share * len(order))) if config.kb_share < 1.0 else len(order)
    covered = {q.qid for q in order[:n_kb]}
    queue = order[n_kb:] + order[:n_kb]  # queries the KB does not cover are screened first
    started = time.perf_counter()
    queries = _prepare(ctx, order, table, progress)
    prepare_s = time.perf_counter() - started
    texts = doc_texts(ctx)
    labels: dict[str, dict[str, int]] = {}
    rounds: list[dict[str, Any]] = []

    def run_round(r: int, spent: int, active: tuple[Ranker, dict[str, float]] | None
                  ) -> tuple[Ranker, dict[str, float]]:
        t0 = time.perf_counter()
        groups = _groups(queries, covered, labels, table.kb["negative"])
        ranker = fit(groups, ctx.names, options)
        dev_m = score_run(dev, ranked_run(ctx, ranker, dev), RANKED, texts.__getitem__,
                          ctx.builder.matcher).metrics
        seconds = time.perf_counter() - t0
        decision = decide(dev_m, active[1] if active else None,
                          tolerance_pp=config.tolerance_pp)
        now = (ranker, dev_m) if decision.promote or active is None else active
        test_m = score_run(test, ranked_run(ctx, now[0], test), RANKED, texts.__getitem__,
                           ctx.builder.matcher).metrics
        rounds.append({"round": r, "labels": spent, "train_groups": len(groups),
                       "seconds": round(seconds, 2), "promoted": bool(decision.promote),
                       "dev_ndcg@10": round(dev_m["ndcg@10"], 4),
                       "active_dev_ndcg@10": round(now[1]["ndcg@10"], 4),
                       "active_test_ndcg@10": round(test_m["ndcg@10"], 4),
                       "active_test_entity_recall@10": round(test_m["entity_recall@10"], 4),
                       "reasons": list(decision.reasons)})
        logger.info("round %d: %d labels, dev %.3f, active test %.3f (%.1f s)", r, spent,
                    dev_m["ndcg@10"], test_m["ndcg@10"], seconds)
        return now

    active = run_round(0, 0, None)
    spent, cursor = 0, 0
    bar = tqdm(total=config.rounds, desc=f"simulate ranker {sch.name}", disable=not progress)
    for r in range(1, config.rounds + 1):
        goal = r * config.labels_per_round
        while spent < goal and cursor < len(queue):
            q = queries[queue[cursor].qid]
            spent += _screen(q, active[0], labels, table, goal - spent, config)
            if _screened(q, labels, config):
                cursor += 1
        active = run_round(r, spent, active)
        bar.update(1)
        if report:
            report(r / config.rounds, f"round {r}: {spent} labels")
    bar.close()
    base, last = rounds[0]["active_test_ndcg@10"], rounds[-1]["active_test_ndcg@10"]
    summary = {"schema": sch.name, "kb_queries": len(covered), "train_queries": len(train),
               "labels": spent, "prepare_seconds": round(prepare_s, 2),
               "kb_only_test_ndcg@10": base, "final_test_ndcg@10": last,
               "lift_pp": round(100 * (last - base), 2),
               "max_round_seconds": max(x["seconds"] for x in rounds[1:]) if len(rounds) > 1
               else rounds[0]["seconds"]}
    return {"config": asdict(config), "options": options.to_json(), "rounds": rounds,
            "summary": summary}


def _prepare(ctx: RankingContext, queries: Sequence[EvalQuery], table: Any,
             progress: bool) -> dict[str, _Query]:
    """Candidates, feature rows and KB grades of every train query (once)."""
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


def _groups(queries: dict[str, _Query], covered: set[str], labels: dict[str, dict[str, int]],
            negative: int) -> list[Group]:
    """KB-covered queries: every candidate graded (labels over KB grades); other labelled
    queries: their labelled documents only."""
    groups = []
    for qid, item in queries.items():
        own = labels.get(qid, {})
        if qid in covered:
            grades = [own.get(d, item.kb.get(d, negative)) for d in item.doc_ids]
            groups.append(Group(qid, item.doc_ids, item.x, tuple(grades)))
        elif own:
            rows = [i for i, d in enumerate(item.doc_ids) if d in own]
            groups.append(Group(qid, tuple(item.doc_ids[i] for i in rows), item.x[rows],
                                tuple(own[item.doc_ids[i]] for i in rows)))
    return groups


def _screen(item: _Query, ranker: Ranker, labels: dict[str, dict[str, int]], table: Any,
            budget: int, config: RankerSimulation) -> int:
    """Label the active ranker's best unlabelled candidates of one query; returns how many."""
    own = labels.setdefault(item.q.qid, {})
    scores = ranker.score(item.x)
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
    """The rounds as a plain-text table with the summary line."""
    lines = [f"{'round':>5} {'labels':>6} {'promoted':>8} {'dev':>7} {'act.dev':>7} "
             f"{'act.test':>8} {'ER@10':>6} {'sec':>6}"]
    for r in result["rounds"]:
        lines.append(f"{r['round']:>5} {r['labels']:>6} {str(r['promoted']):>8} "
                     f"{r['dev_ndcg@10']:>7.3f} {r['active_dev_ndcg@10']:>7.3f} "
                     f"{r['active_test_ndcg@10']:>8.3f} "
                     f"{r['active_test_entity_recall@10']:>6.3f} {r['seconds']:>6.1f}")
    s = result["summary"]
    lines.append(f"{s['schema']}: KB covers {s['kb_queries']}/{s['train_queries']} train "
                 f"queries; {s['labels']} labels: test NDCG@10 {s['kb_only_test_ndcg@10']:.3f}"
                 f" -> {s['final_test_ndcg@10']:.3f} ({s['lift_pp']:+.2f} pp); slowest round "
                 f"{s['max_round_seconds']:.1f} s (features prepared once in "
                 f"{s['prepare_seconds']:.1f} s)")
    return "\n".join(lines)
