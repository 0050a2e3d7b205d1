"""Speed benchmarks printed by ``kbcurate bench`` (figures, never timed tests).

1. Indexing throughput: the project's document encoder (token-length-sorted chunks) against raw
   ``SentenceTransformer.encode`` on the same documents in the same run, two ways: one raw call
   over the whole list (sentence-transformers sorts by length inside that call) and raw calls per
   batch in corpus order (what a naive indexer does: no length bucketing).
2. Query latency p50/p95 for each retriever, end to end: template -> encode -> search ->
   top-10 highlighted (escaped HTML), over the workspace's documents.

Both take the dense encoder's ``backend`` / ``precision`` (default: the workspace's). The
comparison of every backend on the same texts is :mod:`curation.evaluation.backend_bench`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from curation.matching.highlight import render_highlighted, slot_colours
from curation.matching.matcher import EntityMatcher
from curation.search.indexing import (
    corpus_docs,
    get_index,
    with_dense_options,
    with_workspace_defaults,
)
from curation.store.documents import Documents
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.schema import get_schema
from kb_sources.types import joined_text

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ThroughputResult:
    documents: int
    raw_one_call_s: float
    raw_in_order_s: float
    ours_s: float
    max_seq_length: int = 256

    @property
    def ratio_vs_raw(self) -> float:
        return self.raw_one_call_s / self.ours_s

    @property
    def ratio_vs_unbucketed(self) -> float:
        return self.raw_in_order_s / self.ours_s

    def lines(self) -> list[str]:
        n = self.documents
        return [
            f"encoding {n} documents ({self.max_seq_length} tokens max; best of the repeats):",
            f"  raw SentenceTransformer.encode, one call    {self.raw_one_call_s:7.1f} s "
            f"({n / self.raw_one_call_s:5.1f} docs/s)",
            f"  raw encode per batch, corpus order          {self.raw_in_order_s:7.1f} s "
            f"({n / self.raw_in_order_s:5.1f} docs/s)",
            f"  kbcurate encoder (length-bucketed chunks)   {self.ours_s:7.1f} s "
            f"({n / self.ours_s:5.1f} docs/s)",
            f"  ratio vs raw one call: {self.ratio_vs_raw:.2f}x (target >= 0.95x); "
            f"vs unbucketed batches: {self.ratio_vs_unbucketed:.2f}x (target >= 1.3x)",
        ]


def bench_encoding(texts: Sequence[str], model: str = "all-MiniLM-L6-v2",
                   batch_size: int = 32, repeats: int = 2,
                   max_seq_length: int = 256, **encoder_options: Any) -> ThroughputResult:
    """Time the three ways of encoding the same texts with the same loaded model.

    The three are interleaved ``repeats`` times and the fastest time of each is kept, so that
    background load on the machine hits all three alike. ``encoder_options`` are further
    :class:`~retrievers.encoder.EncoderConfig` fields (``backend``, ``precision``, ...).
    """
    from retrievers.encoder import Encoder, EncoderConfig

    encoder = Encoder(EncoderConfig(model=model, batch_size=batch_size,
                                    max_seq_length=max_seq_length, **encoder_options))
    st = encoder.doc_model
    texts = list(texts)
    st.encode(texts[:batch_size], batch_size=batch_size)  # warm up

    def raw_one() -> None:
        st.encode(texts, batch_size=batch_size, normalize_embeddings=True)

    def raw_in_order() -> None:
        for i in range(0, len(texts), batch_size):
            st.encode(texts[i:i + batch_size], batch_size=batch_size, normalize_embeddings=True)

    def ours() -> None:
        encoder.encode_documents(texts)

    best = {name: float("inf") for name in ("raw_one", "raw_in_order", "ours")}
    for _ in range(max(1, repeats)):
        for name, fn in (("raw_one", raw_one), ("raw_in_order", raw_in_order), ("ours", ours)):
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return ThroughputResult(len(texts), best["raw_one"], best["raw_in_order"], best["ours"],
                            max_seq_length)


@dataclass(frozen=True)
class LatencyResult:
    retriever: str
    queries: int
    p50_ms: float
    p95_ms: float

    def line(self) -> str:
        return (f"  {self.retriever:<16} p50 {self.p50_ms:7.1f} ms   p95 {self.p95_ms:7.1f} ms   "
                f"({self.queries} queries)")


def bench_queries(ws: Workspace, retriever: str, schema: str = "PO", n_queries: int = 50,
                  k: int = 10, options: dict | None = None) -> LatencyResult:
    """End-to-end latency: template -> search -> top-k highlighted, per query."""
    sch = get_schema(schema, ws.schemas())
    partials = Relations(ws).partial(sch.name, limit=n_queries)
    index = get_index(ws, retriever, options or {}, progress=False)
    parts = {doc_id: (title, abstract) for doc_id, title, abstract in Documents(ws).all_parts()}
    matcher = EntityMatcher()
    colours = slot_colours(sch.slot_names)
    index.search(partials[0].render(sch).text, k)  # warm up (model load, caches)
    times = []
    for p in partials:
        start = time.perf_counter()
        query = p.render(sch).text
        for hit in index.search(query, k):
            title, abstract = parts[hit.doc_id]
            spans = matcher.find_spans(p.query, joined_text(title, abstract))
            render_highlighted(title, abstract, spans, colours)
        times.append((time.perf_counter() - start) * 1000)
    return LatencyResult(retriever, len(times), float(np.percentile(times, 50)),
                         float(np.percentile(times, 95)))


def run_bench(ws: Workspace, *, retrievers: Sequence[str] = ("bm25", "dense", "hybrid"),
              docs: int = 256, queries: int = 200, schema: str = "PO",
              model: str = "all-MiniLM-L6-v2", max_seq_length: int = 256,
              backend: str | None = None, precision: str | None = None) -> list[str]:
    """Run both benchmarks; returns the lines to print.

    ``backend`` / ``precision`` choose the dense encoder's (default: the workspace's).
    """
    lines = []
    pair = {k: v for k, v in (("backend", backend), ("precision", precision)) if v}
    if docs:
        sample = [t for _, t in corpus_docs(ws)]
        step = max(1, len(sample) // docs)
        encoder = with_workspace_defaults(ws, "dense", pair)
        encoder.pop("cache_dir")
        result = bench_encoding(sample[::step][:docs], model=model,
                                max_seq_length=max_seq_length, **encoder)
        lines += result.lines()
        if encoder.get("backend") or encoder.get("precision"):
            lines.append(f"  (backend {encoder.get('backend', 'torch')}, precision "
                         f"{encoder.get('precision', 'fp32')})")
    if retrievers:
        lines.append(f"query latency, template -> search -> top-10 highlighted ({schema}, "
                     f"{ws.stats().documents:,} documents):")
        for name in retrievers:
            lines.append(bench_queries(ws, name, schema, queries,
                                       options=with_dense_options(name, pair)).line())
    return lines
