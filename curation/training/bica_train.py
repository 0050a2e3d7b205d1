"""One BiCA round (Sinha et al.; TRAINING.md 2): walk negatives -> MNR training -> a version.

:func:`train_bica` builds (query, positive, hard negative) triplets from the schema's train split
with :func:`curation.training.bica.build_bica_examples` (walks over the citation graph, a kNN
graph of the corpus, or both, by the base encoder held fixed for the round), trains with
multiple-negatives ranking (:func:`retrievers.training.mnr.train_triplets`: no duplicate text in
a batch, so a query's other positives are never its in-batch negatives), lets the dev split pick
the epoch, and registers ``<schema>-bica@n`` with the walk's coverage in the manifest.

Queries are the KB template of the relation (as at inference) and, with ``query_source`` "title"
or "both", the positive's title, as the paper does without a doc2query model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from curation.evaluation.harness import build_task
from curation.matching.matcher import EntityMatcher
from curation.store.models import ModelVersion
from curation.store.workspace import Workspace
from curation.training.examples import DEFAULT_DOCUMENT_FORMAT
from curation.training.rounds import (
    Report,
    base_path,
    dev_scorer,
    register_result,
    run_folder,
    step_reporter,
    train_config_of,
)
from kb_sources.errors import CurationError
from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BicaOptions:
    """Options of one BiCA round (hyperparameters default to a 2-core CPU budget).

    Attributes:
        base: Base model: HF name, local folder, registry version or the packaged MiniLM.
        epochs, batch_size, learning_rate, warmup_ratio, max_seq_length, precision, seed:
            see :class:`retrievers.training.config.TrainConfig` (explicit learning rate and
            warm-up ratio; BiCA's code inherits a 10,000-step warm-up).
        scale: MNR's inverse temperature on cosine similarity (sentence-transformers: 20).
        graph: "citations" (the paper), "knn" (adaptation: base-encoder kNN graph of the
            corpus) or "both".
        knn_k: Neighbours per document in the kNN graph.
        n_paths, path_length, top_k, include_random: Algorithm 1 (3, 3, 5, True).
        query_source: "template" (the KB template, as at inference), "title" (the positive's
            title) or "both".
        bm25_fallback: BM25 negatives for a query whose positives have too few graph neighbours.
        dev_depth, dev_random: The dev pool that picks the epoch (0: last epoch).
        max_queries: Train on at most this many train queries (None: all).
    """

    base: str = "all-MiniLM-L6-v2"
    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    max_seq_length: int = 128
    precision: str = "auto"
    seed: int = 42
    scale: float = 20.0
    graph: str = "citations"
    knn_k: int = 10
    n_paths: int = 3
    path_length: int = 3
    top_k: int = 5
    include_random: bool = True
    query_source: str = "template"
    bm25_fallback: int = 5
    dev_depth: int = 20
    dev_random: int = 500
    max_queries: int | None = None

    def train_config(self) -> Any:
        return train_config_of(self)

    def bica_config(self) -> Any:
        from curation.training.bica import BicaConfig

        return BicaConfig(graph=self.graph, knn_k=self.knn_k, n_paths=self.n_paths,
                          path_length=self.path_length, top_k=self.top_k,
                          include_random=self.include_random, query_source=self.query_source,
                          seed=self.seed, max_queries=self.max_queries,
                          document_format=DEFAULT_DOCUMENT_FORMAT,
                          bm25_fallback=self.bm25_fallback, model=self.base,
                          max_seq_length=self.max_seq_length)

    def validate(self) -> None:
        """Raise :class:`CurationError` on any invalid value."""
        self.train_config()
        self.bica_config()
        if not isinstance(self.scale, int | float) or isinstance(self.scale, bool) \
                or self.scale <= 0:
            raise CurationError(f"BiCA option scale must be a number > 0 (BiCA: 20), got "
                                f"{self.scale!r}")


def train_bica(ws: Workspace, schema: str, options: BicaOptions | None = None, *, actor: str,
               progress: bool = True, report: Report | None = None,
               extra_manifest: dict[str, Any] | None = None) -> ModelVersion:
    """Train one BiCA round on a schema's train split and register it as a candidate version.

    Raises:
        CurationError: No train query with a cited abstract, bad options, training failed.
    """
    from curation.training.bica import base_vectors, build_bica_examples
    from retrievers.training.mnr import TripletExample, train_triplets

    options = options or BicaOptions()
    options.validate()
    train_config = options.train_config()
    matcher = EntityMatcher()
    task = build_task(ws, schema)
    base = base_path(ws, options.base)
    if report:
        report(0.02, "encoding the corpus with the base model and walking the graph")
    config = options.bica_config()
    walker = base_vectors(ws, options.base, config.document_format, options.max_seq_length,
                          progress=progress and not report)
    data = build_bica_examples(ws, schema, config, vectors=walker.documents,
                               query_vectors=walker.queries, embedder_id=walker.model_id,
                               task=task, progress=progress and not report)
    triplets = [TripletExample(t.query, data.texts[t.positive_doc], data.texts[t.negative_doc],
                               t.source) for t in data.triplets]
    if not triplets:
        raise CurationError(f"BiCA found no (query, positive, negative) triplet for {schema}: "
                            f"{data.manifest.get('fallbacks', {})}")
    data.manifest.setdefault("examples", len(triplets))
    fmt = config.document_format
    run_dir = run_folder(ws, data.schema, "bica", data.manifest["sha256"], options)
    resume = (run_dir / "checkpoints").is_dir()
    if resume:
        logger.warning("resuming the interrupted run in %s", run_dir)
    try:
        result = train_triplets(base, triplets, run_dir, train_config, scale=options.scale,
                                resume=resume, progress=step_reporter(report, progress),
                                eval_fn=dev_scorer(ws, task, options, fmt, matcher))
    except RetrieverError as exc:
        raise CurationError(f"BiCA training of {schema} failed: {exc}") from exc
    return register_result(ws, schema=data.schema, recipe="bica", options=options,
                           result=result, train_config=train_config,
                           data_manifest=data.manifest, document_format=fmt, resumed=resume,
                           actor=actor, run_dir=run_dir, extra_manifest=extra_manifest,
                           report=report)
