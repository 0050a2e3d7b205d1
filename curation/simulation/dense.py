"""Simulating the feedback loop, as ASReview's simulate mode does for screening (TRAINING.md 5).

A simulated curator screens the train-split queries of a schema: for each query in a seeded
order, the current active model ranks the query's **screening pool** (its BM25 top
``pool_depth``; gold documents outside it are counted, never added) and the curator labels the
``labels_per_query`` best unlabelled documents by the query strategy, from gold data: *complete*
when the KB cites the abstract for the relation, *irrelevant* otherwise. After every
``labels_per_round`` labels a retraining round runs (:func:`curation.training.retrain.retrain`:
warm start, gate, switch) and is scored on the **test** split, which no label touches.

Everything happens in a **copy** of the workspace (``WS/cache/simulations/<run>/``: the database
through SQLite's backup API, without labels, models or jobs), so the real labels and registry are
never touched. Round 0 is the KB-only EDEL model: a version of the workspace (``start``) or one
trained in the copy.

Per round: held-out NDCG@10 / EntityRecall@10 of the new candidate and of the active model, the
gate's verdict, labels spent, recall of gold abstracts among the labelled ones (of the queries
screened so far, within their pools), and WSS@95 of the active model's ranking of those pools
(0.95 - n95/N per query, mean; "not reached" counts as 0 saved).
"""

from __future__ import annotations

import logging
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from curation.access.users import Role, User
from curation.evaluation.harness import EvalQuery, EvalTask, build_task
from curation.matching.matcher import EntityMatcher
from curation.search.indexing import get_index
from curation.simulation.dense_report import targets, write_outputs, wss_at
from curation.store.documents import Documents
from curation.store.labels import Labels
from curation.store.models import Models
from curation.store.transfer import clone_database
from curation.store.workspace import DB_NAME, Workspace
from curation.training.pool import build_pool, score_model
from curation.training.retrain import RetrainOptions, retrain
from curation.training.rounds import run_round
from curation.training.scoring import TEST_POOL_DEPTH, TEST_POOL_RANDOM, pool_spec
from kb_sources.errors import CurationError, parse_choice

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]
SIMULATOR = "simulator"
#: The simulated curator's rounds act as an admin of the copy (never of the real workspace).
_SIMULATOR = User(SIMULATOR, Role.ADMIN)


class QueryStrategy(StrEnum):
    """Which unlabelled documents the simulated curator screens next."""

    TOP = "top"
    UNCERTAIN = "uncertain"
    MIXED = "mixed"

    @classmethod
    def parse(cls, value: str | QueryStrategy) -> QueryStrategy:
        return parse_choice(cls, value, "query strategy")


@dataclass(frozen=True)
class SimulationConfig:
    """How the simulated curator works.

    Attributes:
        rounds: Retraining rounds.
        labels_per_round: Labels between two rounds.
        labels_per_query: Documents screened per query before moving to the next query.
        strategy: "top" (best ranked first), "uncertain" (scores nearest the query's boundary
            between what was labelled complete and irrelevant; the pool's median before any
            label) or "mixed" (half each).
        pool_depth: BM25 candidates per query that the curator screens.
        seed: Seed of the query order.
        start: A version of the source workspace to start from (the KB-only EDEL model); None
            trains one in the copy with the retraining options' EDEL settings.
        zero_shot: Also score the base model (round 0 reference).
    """

    rounds: int = 3
    labels_per_round: int = 50
    labels_per_query: int = 10
    strategy: str = "top"
    pool_depth: int = 100
    seed: int = 42
    start: str | None = None
    zero_shot: bool = True

    def __post_init__(self) -> None:
        QueryStrategy.parse(self.strategy)
        for name in ("rounds", "labels_per_round", "labels_per_query", "pool_depth"):
            if getattr(self, name) < 1:
                raise CurationError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class _Screening:
    """What the simulated curator has seen: pools, labels, the order of queries."""

    queries: list[EvalQuery]
    pools: dict[str, list[str]] = field(default_factory=dict)
    labels: list[dict[str, Any]] = field(default_factory=list)
    labelled: dict[str, dict[str, str]] = field(default_factory=dict)  # qid -> doc -> grade
    cursor: int = 0
    scorer: _Scorer = field(default_factory=lambda: _Scorer())


def simulate(ws: Workspace, schema: str, config: SimulationConfig | None = None,
             options: RetrainOptions | None = None, *, progress: bool = True,
             report: Report | None = None, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Run the simulation in a copy of ``ws``; returns the summary (also written to ``out_dir``).

    Raises:
        CurationError: Unknown schema or start version, or no train query with gold documents.
    """
    config = config or SimulationConfig()
    options = replace(options or RetrainOptions(evaluation="pool"), build_index=False)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = ws.root / "cache" / "simulations" / f"{schema}-{stamp}"
    started = time.perf_counter()
    with _clone(ws, run_dir / "workspace") as sim:
        task = build_task(sim, schema)
        matcher = EntityMatcher()
        v0 = _start_version(ws, sim, schema, config, options, progress)
        fmt = v0.manifest.get("document_format", "{title} [SEP] {abstract}")
        test_pool = build_pool(sim, task.split("test"), fmt, depth=TEST_POOL_DEPTH,
                               n_random=TEST_POOL_RANDOM, seed=options.training.seed)
        seq = int(v0.manifest.get("max_seq_length", 128))
        rows = [_round0(sim, v0, test_pool, seq, matcher, config, options)]
        screening = _Screening(_query_order(task, config.seed))
        for r in range(1, config.rounds + 1):
            _say(report, (r - 1) / config.rounds, f"round {r}: the simulated curator labels")
            t0 = time.perf_counter()
            spent = _label_round(sim, schema, screening, config, fmt, r)
            result = retrain(sim, schema, options, actor=SIMULATOR, progress=progress, task=task)
            rows.append(_round_row(sim, r, result, screening, spent, time.perf_counter() - t0,
                                   fmt, matcher))
            logger.info("round %d: %s", r, rows[-1])
    summary = {"schema": schema, "config": asdict(config), "options": options.to_json(),
               "rounds": rows, "labels": screening.labels,
               "seconds": round(time.perf_counter() - started, 1),
               "targets": targets(rows)}
    if out_dir is not None:
        write_outputs(summary, Path(out_dir))
    _say(report, 1.0, "simulation finished")
    return summary


def _clone(ws: Workspace, dest: Path) -> Workspace:
    """A copy of the workspace's database without labels, models and jobs (+ BM25 index)."""
    if dest.exists():
        raise CurationError(f"{dest} exists; remove it or wait a second and run again")
    dest.mkdir(parents=True)
    clone_database(ws, dest / DB_NAME, empty=("labels", "models", "jobs"))
    for sub in ("margins",):
        if (ws.root / sub).is_dir():
            shutil.copytree(ws.root / sub, dest / sub)
    for folder in sorted((ws.root / "indexes").glob("bm25-*")):
        shutil.copytree(folder, dest / "indexes" / folder.name)
    return Workspace.open(dest)


def _start_version(ws: Workspace, sim: Workspace, schema: str, config: SimulationConfig,
                   options: RetrainOptions, progress: bool) -> Any:
    """Round 0's KB-only model, active in the copy."""
    if config.start:
        source = Models(ws).get(config.start)
        if source.schema != schema:
            raise CurationError(f"{source.id} is a {source.schema} model, not {schema}; "
                                "pass a version of the simulated schema")
        folder = Models(ws).export(source.id, sim.root / "cache" / "start", user=_SIMULATOR)
        version = Models(sim).register(schema=schema, recipe=source.recipe,
                                       base_model=source.base_model, model_dir=folder / "model",
                                       manifest={k: v for k, v in source.manifest.items()
                                                 if k not in {"files", "metrics", "id"}},
                                       metrics={}, created_by=SIMULATOR)
    else:
        version = run_round(sim, schema, options.recipe, options.training, actor=SIMULATOR,
                            evaluation="pool", progress=progress).version
    return Models(sim).activate(version.id, _SIMULATOR, reason="simulation round 0")


def _round0(sim: Workspace, v0: Any, test_pool: Any, seq: int, matcher: EntityMatcher,
            config: SimulationConfig, options: RetrainOptions) -> dict[str, Any]:
    kb = score_model(v0.model_dir, test_pool, max_seq_length=seq, matcher=matcher)
    Models(sim).update_metrics(v0.id, {**{f"testpool_{k}": v for k, v in kb.items()},
                                       "testpool_spec": pool_spec(sim, options.training.seed)},
                               actor=SIMULATOR)  # round 1's gate reuses it
    row: dict[str, Any] = {"round": 0, "version": v0.id, "labels": 0, "promoted": True,
                           "ndcg@10": kb["ndcg@10"], "entity_recall@10": kb["entity_recall@10"],
                           "active_ndcg@10": kb["ndcg@10"],
                           "active_entity_recall@10": kb["entity_recall@10"]}
    if config.zero_shot:
        from retrievers.encoder import resolve_model_path

        zero = score_model(resolve_model_path(options.training.base), test_pool,
                           max_seq_length=seq, matcher=matcher)
        row["zero_shot_ndcg@10"] = zero["ndcg@10"]
        row["zero_shot_entity_recall@10"] = zero["entity_recall@10"]
    return row


def _query_order(task: EvalTask, seed: int) -> list[EvalQuery]:
    queries = sorted(task.split("train"), key=lambda q: q.qid)
    random.Random(seed).shuffle(queries)
    if not queries:
        raise CurationError(f"{task.schema} has no train-split query to simulate labels on")
    return queries


def _label_round(sim: Workspace, schema: str, s: _Screening, config: SimulationConfig,
                 fmt: str, round_no: int) -> int:
    """The curator labels ``labels_per_round`` documents; returns how many were given."""
    active = Models(sim).active(schema)
    assert active is not None
    bm25 = get_index(sim, "bm25", progress=False)
    given = 0
    while given < config.labels_per_round and s.cursor < len(s.queries):
        q = s.queries[s.cursor]
        if q.qid not in s.pools:
            s.pools[q.qid] = [h.doc_id for h in bm25.search(q.text, config.pool_depth)]
        seen = s.labelled.setdefault(q.qid, {})
        want = min(config.labels_per_query - len(seen), config.labels_per_round - given)
        picks = _pick(sim, active, q, s.pools[q.qid], seen, want, config.strategy, fmt,
                      s.scorer)
        for doc_id in picks:
            grade = "complete" if doc_id in q.gold else "irrelevant"
            label = Labels(sim).record(user=SIMULATOR, schema=schema, query_key=q.qid,
                                       query_text=q.text, doc_id=doc_id, grade=grade,
                                       model_version=active.id, train_size=len(s.labels))
            seen[doc_id] = grade
            s.labels.append({"round": round_no, "label_id": label.id, "qid": q.qid,
                             "doc_id": doc_id, "grade": grade, "model": active.id})
            given += 1
        if len(seen) >= min(config.labels_per_query, len(s.pools[q.qid])) or not picks:
            s.cursor += 1
    return given


def _pick(sim: Workspace, active: Any, q: EvalQuery, pool: Sequence[str], seen: dict[str, str],
          n: int, strategy: str, fmt: str, _scores: _Scorer) -> list[str]:
    todo = [d for d in pool if d not in seen]
    if n <= 0 or not todo:
        return []
    scores = _scores(active, q.text, _texts(sim, todo, fmt))
    ranked = sorted(zip(todo, scores, strict=True), key=lambda x: (-x[1], x[0]))
    if strategy == "top":
        return [d for d, _ in ranked[:n]]
    boundary = _boundary(active, q, seen, ranked, sim, fmt, _scores)
    uncertain = [d for d, _ in sorted(ranked, key=lambda x: (abs(x[1] - boundary), x[0]))]
    if strategy == "uncertain":
        return uncertain[:n]
    top = [d for d, _ in ranked[: (n + 1) // 2]]
    return top + [d for d in uncertain if d not in top][: n - len(top)]


def _boundary(active: Any, q: EvalQuery, seen: dict[str, str], ranked: list[tuple[str, float]],
              sim: Workspace, fmt: str, _scores: _Scorer) -> float:
    """Midpoint between the mean score of complete and irrelevant labels (else the median)."""
    pos = [d for d, g in seen.items() if g == "complete"]
    neg = [d for d, g in seen.items() if g == "irrelevant"]
    if pos and neg:
        ps = _scores(active, q.text, _texts(sim, pos, fmt))
        ns = _scores(active, q.text, _texts(sim, neg, fmt))
        return (sum(ps) / len(ps) + sum(ns) / len(ns)) / 2
    values = sorted(s for _, s in ranked)
    return values[len(values) // 2]


def _texts(sim: Workspace, ids: Sequence[str], fmt: str) -> list[str]:
    return Documents(sim).texts(list(ids), fmt)


class _Scorer:
    """Cosine of a query against texts with a version's model, through
    :class:`retrievers.encoder.Encoder` (the one encoding path: device, dtype, backends); the
    encoder of the latest version is kept for the simulation's life, never in module state."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.encoder: Any = None

    def __call__(self, version: Any, query: str, texts: list[str]) -> list[float]:
        from retrievers.encoder import Encoder, EncoderConfig

        if self.key != version.id:
            self.encoder = Encoder(EncoderConfig(
                model=str(version.model_dir), model_version=version.id,
                max_seq_length=int(version.manifest.get("max_seq_length", 128))))
            self.key = version.id
        qv = self.encoder.encode_queries([query])  # (1, dim)
        dv = self.encoder.encode_documents(texts)  # (n, dim)
        return [float(x) for x in (dv @ qv[0])]


def _round_row(sim: Workspace, r: int, result: Any, s: _Screening, spent: int, seconds: float,
               fmt: str, matcher: EntityMatcher) -> dict[str, Any]:
    m = result.version.metrics
    active = Models(sim).active(result.version.schema)
    assert active is not None
    gate = result.decision
    found = sum(g == "complete" for seen in s.labelled.values() for g in seen.values())
    gold = sum(len(set(q.gold) & set(s.pools.get(q.qid, ()))) for q in s.queries
               if q.qid in s.labelled)
    outside = sum(len(set(q.gold) - set(s.pools.get(q.qid, ()))) for q in s.queries
                  if q.qid in s.labelled)
    return {
        "round": r, "version": result.version.id, "labels": len(s.labels), "spent": spent,
        "labels_used": result.labels_used, "promoted": result.promoted,
        "ndcg@10": m.get("testpool_ndcg@10", m.get("test_ndcg@10")),
        "entity_recall@10": m.get("testpool_entity_recall@10", m.get("test_entity_recall@10")),
        "active": active.id,
        "active_ndcg@10": (gate.candidate if result.promoted else gate.active).get("ndcg@10"),
        "active_entity_recall@10": (gate.candidate if result.promoted else gate.active).get(
            "entity_recall@10"),
        "gate": list(gate.reasons),
        "gold_recall_labelled": round(found / gold, 4) if gold else None,
        "gold_outside_pools": outside,
        "wss@95": _wss95(sim, active, s, fmt),
        "seconds": round(seconds, 1),
    }


def _wss95(sim: Workspace, active: Any, s: _Screening, fmt: str) -> float | None:
    """Mean WSS@95 of the active model's ranking of the screened queries' pools."""
    values = []
    for q in s.queries:
        pool = s.pools.get(q.qid)
        if not pool or q.qid not in s.labelled:
            continue
        relevant = set(q.gold) & set(pool)
        if not relevant:
            continue
        scores = s.scorer(active, q.text, _texts(sim, pool, fmt))
        ranked = [d for d, _ in sorted(zip(pool, scores, strict=True), key=lambda x: -x[1])]
        values.append(wss_at(ranked, relevant, 0.95))
    return round(sum(values) / len(values), 4) if values else None


def _say(report: Report | None, fraction: float, message: str) -> None:
    logger.info(message)
    if report:
        report(fraction, message)
