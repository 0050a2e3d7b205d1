"""``kbcurate bench --backends``: every encoding backend/precision on the same texts, in one run.

For each pair (:data:`retrievers.backends.COMBINATIONS`, or those asked for) and the same N
workspace documents: documents per second (and its ratio to torch fp32), the mean cosine of its
vectors to torch fp32's, and dense NDCG@10 of a task's queries (a schema's split, harness metrics)
over those N documents: the queries' gold documents plus evenly spread distractors. All encoders
are loaded (and exported, once) before timing, then timed in turn ``repeats`` times, keeping each
one's best time, so that load on the machine hits them alike. A pair whose optional packages are
missing is listed with the pip extra to install.

The quality guard: mean cosine >= :data:`GUARD_COSINE` and NDCG@10 at most :data:`GUARD_NDCG_PP`
percentage points below torch fp32. The candidate for the workspace default is the fastest pair
that passes the guard and is at least :data:`GUARD_SPEEDUP` times as fast as torch fp32 (a smaller
gain is within run-to-run noise on a shared CPU); ``--set-default`` stores it, or torch fp32 when
no pair qualifies (:func:`curation.search.indexing.set_default_backend`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from curation.evaluation.harness import EvalQuery, build_task, score_run
from curation.matching.matcher import EntityMatcher
from curation.search.indexing import corpus_docs, with_workspace_defaults
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from retrievers.backends import COMBINATIONS, DEFAULT, missing_extra, sample_calibration
from retrievers.base import make_hits, top_k_indices
from retrievers.encoder import Encoder, EncoderConfig, usable_cores
from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)

#: Quality guard of a candidate default: mean cosine to torch fp32 at least this ...
GUARD_COSINE = 0.99
#: ... and NDCG@10 at most this many percentage points below torch fp32 ...
GUARD_NDCG_PP = 1.0
#: ... and at least this many times as fast.
GUARD_SPEEDUP = 1.1
#: Hits kept per query (Recall@100 needs 100).
DEPTH = 100


@dataclass(frozen=True)
class BackendRow:
    """The figures of one backend/precision pair (``error`` set when it could not run)."""

    backend: str
    precision: str
    docs_per_s: float | None = None
    speedup: float | None = None
    mean_cosine: float | None = None
    min_cosine: float | None = None
    ndcg10: float | None = None
    ndcg_delta_pp: float | None = None
    load_s: float | None = None
    query_p50_ms: float | None = None
    query_p95_ms: float | None = None
    error: str | None = None

    @property
    def pair(self) -> str:
        return f"{self.backend}/{self.precision}"

    @property
    def verdict(self) -> str:
        """"baseline", "passes", "not run" or the guard's failures."""
        if self.error:
            return "not run"
        if (self.backend, self.precision) == DEFAULT:
            return "baseline"
        failed = []
        if (self.mean_cosine or 0.0) < GUARD_COSINE:
            failed.append(f"cosine < {GUARD_COSINE}")
        if (self.ndcg_delta_pp or 0.0) < -GUARD_NDCG_PP:
            failed.append(f"NDCG@10 loss > {GUARD_NDCG_PP:g} pp")
        if (self.speedup or 0.0) < GUARD_SPEEDUP:
            failed.append(f"< {GUARD_SPEEDUP:g}x")
        return "; ".join(failed) or "passes"


@dataclass(frozen=True)
class BackendBench:
    """One ``bench --backends`` run."""

    model: str
    task: str
    split: str
    documents: int
    queries: int
    threads: int
    repeats: int
    rows: tuple[BackendRow, ...]

    @property
    def candidate(self) -> BackendRow | None:
        """The fastest pair that passes the guard (quality and speed), if any."""
        passing = [r for r in self.rows if r.verdict == "passes"]
        return max(passing, key=lambda r: r.docs_per_s or 0.0) if passing else None

    def lines(self) -> list[str]:
        """The table to print."""
        out = [f"encoding backends: {self.model}, {self.documents} documents, {self.task} "
               f"{self.split} ({self.queries} queries), {self.threads} threads, best of "
               f"{self.repeats}; guard: cosine >= {GUARD_COSINE}, NDCG@10 loss <= "
               f"{GUARD_NDCG_PP:g} pp, >= {GUARD_SPEEDUP:g}x torch/fp32",
               f"  {'backend':<15}{'docs/s':>8}{'x fp32':>8}{'cosine':>9}{'NDCG@10':>9}"
               f"{'d pp':>7}{'load s':>8}{'q p50':>7}{'q p95':>7}  verdict"]
        for r in self.rows:
            if r.error:
                out.append(f"  {r.pair:<15}{'-':>8}{'-':>8}{'-':>9}{'-':>9}{'-':>7}{'-':>8}"
                           f"{'-':>7}{'-':>7}  "
                           f"not run: {r.error}")
                continue
            out.append(f"  {r.pair:<15}{r.docs_per_s:8.1f}{r.speedup:8.2f}{r.mean_cosine:9.4f}"
                       f"{r.ndcg10:9.4f}{r.ndcg_delta_pp:+7.2f}{r.load_s:8.1f}"
                       f"{_ms(r.query_p50_ms)}{_ms(r.query_p95_ms)}  {r.verdict}")
        best = self.candidate
        out.append(f"  candidate default: {best.pair} ({best.speedup:.2f}x)" if best else
                   "  candidate default: none (no pair passes the guard)")
        out.append("  q p50 / q p95: ms to encode one query on its own (the query path), "
                   "best of 2 rounds of one block per pair")
        return out

    def to_json(self) -> dict[str, Any]:
        best = self.candidate
        return {"model": self.model, "task": self.task, "split": self.split,
                "documents": self.documents, "queries": self.queries, "threads": self.threads,
                "repeats": self.repeats,
                "guard": {"min_mean_cosine": GUARD_COSINE, "max_ndcg10_loss_pp": GUARD_NDCG_PP,
                          "min_speedup": GUARD_SPEEDUP},
                "rows": [{**asdict(r), "verdict": r.verdict} for r in self.rows],
                "candidate": best.pair if best else None}


def run_backend_bench(ws: Workspace, *, pairs: Sequence[tuple[str, str]] | None = None,
                      docs: int = 500, task: str = "disease_gene", split: str = "test",
                      max_queries: int = 100, model: str = "all-MiniLM-L6-v2",
                      max_seq_length: int = 256, batch_size: int = 32,
                      repeats: int = 1) -> BackendBench:
    """Measure every pair on the same documents and queries (see the module docstring).

    Args:
        ws: The workspace (documents, the task's relations; exports go to WS/cache/exports).
        pairs: (backend, precision) pairs; default all. torch/fp32 always runs (the baseline).
        docs: Documents to encode (the task's gold documents + distractors).
        task: Schema whose relations are the queries.
        split: Split of the task ("train", "dev", "test", "all").
        max_queries: Most queries (spread over the split).
        model: Encoder: a registry version, Hugging Face name or folder.
        max_seq_length: Token limit (a registry version brings its own).
        batch_size: Texts per forward pass.
        repeats: Timed passes per pair (the best is kept).

    Raises:
        CurationError: No query in the split, or too few documents.
    """
    todo = [DEFAULT, *(p for p in (pairs or COMBINATIONS) if p != DEFAULT)]
    configs, doc_format = _configs(ws, todo, model, max_seq_length, batch_size)
    queries, ids, texts = _task_corpus(ws, task, split, docs, max_queries, doc_format)
    calibration = _calibration(ws, set(ids), doc_format)
    rows: dict[tuple[str, str], BackendRow] = {}
    encoders: dict[tuple[str, str], tuple[Encoder, float]] = {}
    for pair in todo:
        if (missing := missing_extra(*pair)) is not None:
            rows[pair] = BackendRow(*pair, error=f"{missing} is not installed: pip install "
                                                  f"'kbcurate[{pair[0]}]'")
            continue
        start = time.perf_counter()
        try:
            encoder = Encoder(configs[pair], calibration_texts=calibration)
            encoder.encode_documents(texts[:batch_size])  # load, export once, warm up
        except RetrieverError as exc:
            rows[pair] = BackendRow(*pair, error=str(exc))
            continue
        encoders[pair] = (encoder, time.perf_counter() - start)
    if DEFAULT not in encoders:
        raise CurationError(f"the torch/fp32 baseline could not run: {rows[DEFAULT].error}")
    best = {pair: float("inf") for pair in encoders}
    vectors: dict[tuple[str, str], np.ndarray] = {}
    for _ in range(max(1, repeats)):
        for pair, (encoder, _) in encoders.items():
            start = time.perf_counter()
            vectors[pair] = encoder.encode_documents(texts)  # (docs, dim)
            best[pair] = min(best[pair], time.perf_counter() - start)
    query_ms = _query_latencies(encoders, [q.text for q in queries])
    matcher = EntityMatcher()
    text_of = dict(zip(ids, texts, strict=True)).__getitem__
    ndcg = {pair: score_run(queries, _rank(encoder, queries, ids, vectors[pair]), "/".join(pair),
                            text_of, matcher).metrics["ndcg@10"]
            for pair, (encoder, _) in encoders.items()}
    for pair, (_, load_s) in encoders.items():
        cosine = np.sum(vectors[pair] * vectors[DEFAULT], axis=1)  # (docs,)
        rows[pair] = BackendRow(
            *pair, docs_per_s=len(texts) / best[pair], speedup=best[DEFAULT] / best[pair],
            mean_cosine=float(cosine.mean()), min_cosine=float(cosine.min()),
            ndcg10=ndcg[pair], ndcg_delta_pp=100 * (ndcg[pair] - ndcg[DEFAULT]), load_s=load_s,
            query_p50_ms=float(np.percentile(query_ms[pair], 50)),
            query_p95_ms=float(np.percentile(query_ms[pair], 95)))
    return BackendBench(model, task, split, len(texts), len(queries),
                        configs[DEFAULT].num_threads or usable_cores(), max(1, repeats),
                        tuple(rows[p] for p in todo))


def _ms(value: float | None) -> str:
    return f"{value:7.1f}" if value is not None else f"{'-':>7}"


def _query_latencies(encoders: dict[tuple[str, str], tuple[Encoder, float]],
                     texts: Sequence[str], rounds: int = 2) -> dict[tuple[str, str], list[float]]:
    """Per pair, ms to encode each query alone (as the app does). Each pair encodes all queries
    in one block (runtimes interleaved per query disturb each other: ONNX Runtime's threads
    spin after a call, taking the cores from the next one), the pairs taking turns over
    ``rounds`` rounds; each pair keeps its round with the lowest median."""
    best: dict[tuple[str, str], list[float]] = {}
    for _ in range(max(1, rounds)):
        for pair, (encoder, _) in encoders.items():
            encoder.encode_queries([texts[0]])  # warm
            times = []
            for text in texts:
                start = time.perf_counter()
                encoder.encode_queries([text])
                times.append(1000 * (time.perf_counter() - start))
            if pair not in best or np.median(times) < np.median(best[pair]):
                best[pair] = times
    return best


def _configs(ws: Workspace, pairs: Sequence[tuple[str, str]], model: str, max_seq_length: int,
             batch_size: int) -> tuple[dict[tuple[str, str], EncoderConfig], str | None]:
    """Encoder config of each pair (registry versions resolved; no vector cache: timing)."""
    configs, doc_format = {}, None
    for backend, precision in pairs:
        opts = with_workspace_defaults(ws, "dense", {"model": model, "backend": backend,
                                                     "precision": precision})
        opts.pop("cache_dir", None)
        doc_format = opts.pop("document_format", None)
        opts.setdefault("max_seq_length", max_seq_length)
        configs[(backend, precision)] = EncoderConfig(**opts, batch_size=batch_size,
                                                      device="cpu")
    return configs, doc_format


def _task_corpus(ws: Workspace, task: str, split: str, docs: int, max_queries: int,
                 doc_format: str | None) -> tuple[list[EvalQuery], list[str], list[str]]:
    """Queries spread over the split whose gold documents fill at most half of ``docs``, and
    the ``docs`` documents: those gold ones, then distractors spread over the workspace."""
    every = build_task(ws, task).split(split)
    if not every:
        raise CurationError(f"The {split} split of {task} has no query; pick another --task "
                            "or split")
    step = max(1, len(every) // max(1, max_queries))
    queries: list[EvalQuery] = []
    gold: dict[str, None] = {}
    for q in every[::step][:max_queries]:
        wanted = {**gold, **dict.fromkeys(q.gold)}
        if len(wanted) > docs // 2 and queries:
            break
        queries.append(q)
        gold = wanted
    corpus = dict(corpus_docs(ws, doc_format))
    others = [d for d in corpus if d not in gold]
    if len(corpus) < docs:
        logger.warning("the workspace has %d documents, fewer than --docs %d", len(corpus), docs)
    fill = max(0, docs - len(gold))
    distractors = [others[int(i * len(others) / fill)] for i in range(fill)] if \
        fill and others else []
    ids = list(gold) + list(dict.fromkeys(distractors))
    return queries, ids, [corpus[d] for d in ids]


def _calibration(ws: Workspace, exclude: set[str], doc_format: str | None) -> list[str]:
    """Up to 300 workspace documents outside the measured ones (OpenVINO int8 calibration)."""
    return sample_calibration([t for d, t in corpus_docs(ws, doc_format) if d not in exclude])


def _rank(encoder: Encoder, queries: Sequence[EvalQuery], ids: list[str],
          vectors: np.ndarray) -> dict[str, list[Any]]:
    """qid -> top-DEPTH hits by inner product (vectors are normalised: cosine)."""
    q = encoder.encode_queries([x.text for x in queries])  # (queries, dim)
    scores = q @ vectors.T  # (queries, docs)
    run = {}
    for x, row in zip(queries, scores, strict=True):
        top = top_k_indices(row, DEPTH)
        run[x.qid] = make_hits(((ids[i], float(row[i])) for i in top), "dense")
    return run
