"""BiCA (Sinha et al.; TRAINING.md 2): hard negatives from walks over the citation graph or a kNN
graph of the corpus -> multiple-negatives ranking.

Rows: (query, positive, hard negative) triplets from
:func:`curation.training.recipes.bica.triplets.build_bica_examples` (the base encoder held fixed for
the round), plus the curators' labels: a document labelled *complete* is a positive and one labelled
*irrelevant* a hard negative of its query; each labelled positive is paired with the query's
labelled negatives (else with the walk negatives of the query's KB triplets), and each labelled
negative with the query's labelled positives (else with its KB positives). *partial* labels are not
used (BiCA has no graded positive), and a pair with nothing to pair with is counted unused. Loss:
MNR (:func:`retrievers.training.mnr.train_triplets`: no duplicate text in a batch).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from curation.training.recipes.base import (
    Recipe,
    RoundInput,
    TrainingData,
    TrainingOptions,
    option,
)
from curation.training.recipes.edel.examples import DEFAULT_DOCUMENT_FORMAT
from kb_sources.errors import CurationError

#: Label-made triplets per labelled document (one document's pairs stay a small share).
LABEL_PAIRS_PER_DOCUMENT = 5


@dataclass(frozen=True)
class BicaOptions(TrainingOptions):
    """Options of one BiCA round (see :class:`TrainingOptions` for the shared ones)."""

    scale: float = option(20.0, "MNR's inverse temperature on cosine similarity")
    graph: str = option("citations", "walk the citation graph (paper), a base-encoder kNN graph "
                        "of the corpus (adaptation) or both", ("citations", "knn", "both"))
    knn_k: int = option(10, "neighbours per document in the kNN graph")
    n_paths: int = option(3, "walks per positive (Algorithm 1)")
    path_length: int = option(3, "steps per walk (Algorithm 1)")
    top_k: int = option(5, "negatives kept per positive (Algorithm 1)")
    include_random: bool = option(True, "also one random negative per positive")
    query_source: str = option("template", "the KB template (as at inference), the positive's "
                               "title, or both", ("template", "title", "both"))
    bm25_fallback: int = option(5, "BM25 negatives for a query whose positives have too few "
                                   "graph neighbours")

    def bica_config(self) -> Any:
        from curation.training.recipes.bica.triplets import BicaConfig

        return BicaConfig(graph=self.graph, knn_k=self.knn_k, n_paths=self.n_paths,
                          path_length=self.path_length, top_k=self.top_k,
                          include_random=self.include_random, query_source=self.query_source,
                          seed=self.seed, max_queries=self.max_queries,
                          document_format=DEFAULT_DOCUMENT_FORMAT,
                          bm25_fallback=self.bm25_fallback, model=self.base,
                          max_seq_length=self.max_seq_length)

    def validate(self) -> None:
        super().validate()
        self.bica_config()
        if not isinstance(self.scale, int | float) or isinstance(self.scale, bool) \
                or self.scale <= 0:
            raise CurationError(f"BiCA option scale must be a number > 0 (BiCA: 20), got "
                                f"{self.scale!r}")


class BicaRecipe(Recipe):
    """BiCA: walk negatives, MNR loss; labels as positives and hard negatives."""

    name = "bica"
    description = "BiCA: hard negatives from walks over citation / kNN graphs"
    labels = ("complete -> positive, irrelevant -> hard negative of its query (paired with the "
              "query's other labels or KB triplets); partial unused")
    Options = BicaOptions

    def build_data(self, data_in: RoundInput, options: Any) -> TrainingData:
        from curation.training.recipes.bica.triplets import base_vectors, build_bica_examples

        ws, schema = data_in.ws, data_in.schema
        config = options.bica_config()
        walker = base_vectors(ws, options.base, config.document_format, options.max_seq_length,
                              progress=data_in.progress)
        data = build_bica_examples(ws, schema, config, vectors=walker.documents,
                                   query_vectors=walker.queries, embedder_id=walker.model_id,
                                   task=data_in.task, progress=data_in.progress)
        used: tuple[int, ...] = ()
        if data_in.labels is not None:
            data, used = with_labels(data, data_in.labels)
        if not data.triplets:
            raise CurationError(f"BiCA found no (query, positive, negative) triplet for {schema}: "
                                f"{data.manifest.get('fallbacks', {})}")
        data.manifest.setdefault("examples", len(data.triplets))
        return TrainingData(data, data.manifest, config.document_format,
                            len({t.qid for t in data.triplets}), used)

    def train(self, base: str, data: TrainingData, options: Any, *, run_dir: Path,
              resume: bool, progress: Any, eval_fn: Any) -> Any:
        from retrievers.training.mnr import TripletExample, train_triplets

        rows = data.rows
        triplets = [TripletExample(t.query, rows.texts[t.positive_doc],
                                   rows.texts[t.negative_doc], t.source) for t in rows.triplets]
        return train_triplets(base, triplets, run_dir, options.train_config(),
                              scale=options.scale, resume=resume, progress=progress,
                              eval_fn=eval_fn)


def with_labels(data: Any, labels: Any) -> tuple[Any, tuple[int, ...]]:
    """The KB triplets plus triplets made from labels (see the module docstring)."""
    from curation.training.recipes.bica.triplets import Triplet

    kb_pos: dict[str, list[str]] = {}
    kb_neg: dict[str, list[str]] = {}
    text_of: dict[str, str] = {}
    for t in data.triplets:
        kb_pos.setdefault(t.qid, []).append(t.positive_doc)
        kb_neg.setdefault(t.qid, []).append(t.negative_doc)
        text_of.setdefault(t.qid, t.query)
    pos: dict[str, list[tuple[int, str]]] = {}
    neg: dict[str, list[tuple[int, str]]] = {}
    for label_id, e in labels.used_examples():
        text_of.setdefault(e.qid, e.query)
        if e.cls == "label:complete":
            pos.setdefault(e.qid, []).append((label_id, e.doc_id))
        elif not e.positive:
            neg.setdefault(e.qid, []).append((label_id, e.doc_id))
    made: list[Any] = []
    used: set[int] = set()
    for qid in sorted(set(pos) | set(neg)):
        query = text_of[qid]
        for label_id, doc in pos.get(qid, []):
            partners = [d for _, d in neg.get(qid, [])] or _unique(kb_neg.get(qid, []))
            for other in partners[:LABEL_PAIRS_PER_DOCUMENT]:
                if other != doc:
                    made.append(Triplet(qid, query, doc, other, "label"))
                    used.add(label_id)
        for label_id, doc in neg.get(qid, []):
            if pos.get(qid):
                used.add(label_id)  # already paired with the labelled positives above
                continue
            for other in _unique(kb_pos.get(qid, []))[:LABEL_PAIRS_PER_DOCUMENT]:
                if other != doc:
                    made.append(Triplet(qid, query, other, doc, "label"))
                    used.add(label_id)
    texts = {**data.texts, **{e.doc_id: labels.texts[e.doc_id] for e in labels.examples}}
    triplets = tuple(data.triplets) + tuple(made)
    manifest = dict(data.manifest)
    digest = hashlib.sha256((manifest.get("sha256", "") + "".join(
        f"{t.qid}\t{t.positive_doc}\t{t.negative_doc}\n" for t in made)).encode()).hexdigest()
    manifest.update({"examples": len(triplets), "sha256": digest,
                     "labels": {"used": sorted(used), "triplets": len(made),
                                "held_out": list(labels.held_out),
                                "overruled": list(labels.overruled),
                                "unused": sorted(set(labels.used) - used),
                                "last_label_id": labels.last_label_id}})
    return replace(data, triplets=triplets, texts=texts, manifest=manifest), tuple(sorted(used))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


RECIPE = BicaRecipe()
