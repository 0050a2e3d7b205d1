"""BiCA's training triplets from walks over the workspace's document graph (TRAINING.md 2).

For every query of the **train split** (the seeded split by query entity of
``kbcurate evaluate``, as in :mod:`curation.training.recipes.edel.examples`):

* positives: the cited abstracts (in the workspace) of the query's train records with an answer;
* query text (``query_source``): the KB template of the relation (``template``, the text the
  evaluation searches with), the positive's title (``title``, BiCA without doc2query: one query
  per positive, whose only positive is that document), or both;
* negatives: :func:`retrievers.training.walks.walk_negatives` (BiCA's Algorithm 1) over C1 ∪ C2
  of the positives, the query's own neighbourhood;
* excluded from every negative: all positives of the query, every PMID a train record with the
  query entity and an answer cites (``cited_for_first_entity`` of the EDEL builder), and by
  default the gold documents of dev and test queries (no negative from a held-out query).

The graph (``graph``):

* ``citations``: the workspace table ``citations(citing, cited)``, edges with both ends in the
  workspace. Edges run citing -> cited as in BiCA, whose hop 1 is what a seed cites; with
  ``citation_direction="both"`` (default) the neighbourhood follows each edge both ways, so the
  documents citing a positive count too (our corpora hold few of a paper's references);
  ``"out"`` follows citing -> cited only, as the paper does;
* ``knn``: each document's ``knn_k`` nearest documents under the walk's encoder (directed:
  document -> its neighbours), for corpora without citations;
* ``both``: the union (citation neighbours first).

Only documents with an abstract are walk candidates. A query with fewer than ``n_paths`` usable
hop-1 documents (not excluded, with an abstract) falls back to BM25 negatives (top hits of its
query text that are not excluded and, as in EDEL, mention none of its known answers and carry no
annotation of the answer type); every fallback is counted in the manifest by reason, and a
query is never switched to another graph behind the caller's back.

Each (query, positive, negative) is one row, as in BiCA. The walk's vectors come from a fixed
encoder (the base model, through the workspace embedding cache: :func:`base_vectors`) or from
injected functions; the walks are seeded per query, so one config gives the same triplets.

The graph and the walks (:class:`Graph`, :class:`CitationDirection`, :class:`NegativeSource`,
:func:`base_vectors`, adjacency, walks) live in :mod:`curation.training.recipes.bica.graph`, whose
names for callers are re-exported here; the citation edges are read with
:meth:`~curation.store.citations.Citations.edges` and the document titles with
:meth:`~curation.store.documents.Documents.all_parts`.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from curation.evaluation.harness import SPLIT_SEED, EvalTask, build_task
from curation.matching.matcher import EntityMatcher
from curation.store.citations import Citations
from curation.store.documents import Documents
from curation.store.workspace import Workspace
from curation.training.recipes.bica.graph import (  # noqa: F401 - BaseVectors re-exported for callers
    BaseVectors,
    CitationDirection,
    DocVectors,
    Graph,
    NegativeSource,
    VectorFunction,
    WalkUnit,
    base_vectors,
    graph_adjacency,
    walk_all,
)
from curation.training.recipes.edel.examples import (
    DEFAULT_DOCUMENT_FORMAT,
    Ablation,
    CorpusDocs,
    ExampleBuilder,
    ExampleConfig,
    train_records,
)
from curation.training.recipes.edel.margins import margin_table
from kb_sources.errors import CurationError, parse_choice
from kb_sources.schema import get_schema
from retrievers.encoder import DEFAULT_MODEL
from retrievers.training.walks import neighbourhood

logger = logging.getLogger(__name__)


class QuerySource(StrEnum):
    """Where a query's text comes from."""

    TEMPLATE = "template"
    TITLE = "title"
    BOTH = "both"


class Fallback(StrEnum):
    """Why a query got BM25 negatives instead of a walk."""

    NO_EDGE = "no edge"
    FEW_HOP1 = "fewer than n_paths usable hop-1 documents"


@dataclass(frozen=True)
class BicaConfig:
    """How BiCA triplets are drawn.

    Attributes:
        graph: :class:`Graph` name: ``citations``, ``knn`` or ``both``.
        knn_k: Neighbours per document in the kNN graph.
        n_paths: Walk starts per query (BiCA 3).
        path_length: Nodes per path, the start included (BiCA 3).
        top_k: Unvisited candidates each step samples from (BiCA 5).
        include_random: Add one random unvisited candidate per query (BiCA: yes).
        query_source: :class:`QuerySource` name: ``template``, ``title`` or ``both``. Title
            queries repeat the positive's title; pair them with ``document_format="{abstract}"``
            (BiCA's abstract-only documents) or the title gives the answer away (a warning is
            logged).
        citation_direction: :class:`CitationDirection` name: ``both`` (default) or ``out``.
        exclude_heldout: Never use a dev or test query's gold document as a negative.
        bm25_fallback: BM25 negatives of a query that falls back (0: the query is dropped).
        bm25_depth: BM25 hits looked at for them.
        seed: Seed of the walks and of ``max_queries``.
        split_seed: Seed of the train/dev/test split (that of ``kbcurate evaluate``,
            :data:`~curation.evaluation.harness.SPLIT_SEED`).
        max_queries: Use at most this many train queries (None: all).
        document_format: How a document becomes text (``{title}``, ``{abstract}``): the triplet
            texts and the texts the walk's encoder embeds.
        model: Walk encoder when no vectors are injected (HF name, folder or registry version).
        max_seq_length: Its token limit.
    """

    graph: str = "citations"
    knn_k: int = 10
    n_paths: int = 3
    path_length: int = 3
    top_k: int = 5
    include_random: bool = True
    query_source: str = "template"
    citation_direction: str = "both"
    exclude_heldout: bool = True
    bm25_fallback: int = 5
    bm25_depth: int = 50
    seed: int = 42
    split_seed: int = SPLIT_SEED
    max_queries: int | None = None
    document_format: str = DEFAULT_DOCUMENT_FORMAT
    model: str = DEFAULT_MODEL
    max_seq_length: int = 256

    def __post_init__(self) -> None:
        object.__setattr__(self, "graph", parse_choice(Graph, self.graph, "graph").value)
        object.__setattr__(self, "query_source", parse_choice(
            QuerySource, self.query_source, "query_source").value)
        object.__setattr__(self, "citation_direction", parse_choice(
            CitationDirection, self.citation_direction, "citation_direction").value)
        for name, low, example in (("knn_k", 1, 10), ("n_paths", 1, 3), ("path_length", 1, 3),
                                   ("top_k", 1, 5), ("bm25_fallback", 0, 5),
                                   ("bm25_depth", 0, 50), ("max_seq_length", 1, 256),
                                   ("seed", None, 42), ("split_seed", None, SPLIT_SEED)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or (
                    low is not None and value < low):
                need = "an integer" if low is None else f"an integer >= {low}"
                raise CurationError(f"BicaConfig.{name} must be {need}, got {value!r}; set for "
                                    f"example {name}={example}")
        if self.bm25_depth < self.bm25_fallback:
            raise CurationError(f"BicaConfig.bm25_depth ({self.bm25_depth}) must be >= "
                                f"bm25_fallback ({self.bm25_fallback}); raise bm25_depth")
        if self.max_queries is not None and (isinstance(self.max_queries, bool) or not isinstance(
                self.max_queries, int) or self.max_queries < 1):
            raise CurationError(f"BicaConfig.max_queries must be None (all) or an integer >= 1, "
                                f"got {self.max_queries!r}")
        for name in ("include_random", "exclude_heldout"):
            if not isinstance(getattr(self, name), bool):
                raise CurationError(f"BicaConfig.{name} must be true or false, got "
                                    f"{getattr(self, name)!r}")
        if "{title}" not in self.document_format and "{abstract}" not in self.document_format:
            raise CurationError(f"BicaConfig.document_format {self.document_format!r} must "
                                "contain {title} and/or {abstract}, e.g. "
                                f"{DEFAULT_DOCUMENT_FORMAT!r}")
        try:
            self.document_format.format(title="", abstract="")
        except (KeyError, IndexError, ValueError) as exc:
            raise CurationError(f"BicaConfig.document_format {self.document_format!r} cannot be "
                                f"filled ({exc!r}); use only the fields {{title}} and "
                                "{abstract} and double other braces") from None
        if not isinstance(self.model, str) or not self.model.strip():
            raise CurationError(f"BicaConfig.model must name an encoder, got {self.model!r}; "
                                f"e.g. model={DEFAULT_MODEL!r}")


@dataclass(frozen=True)
class Triplet:
    """One training row: a query, one of its positives and one negative.

    Attributes:
        qid: The KB query (``EvalQuery.qid``); title queries of one KB query share it, so a
            trainer can treat same-qid pairs as positives.
        query: The query text (template or a positive's title).
        positive_doc: The positive's doc id.
        negative_doc: The negative's doc id.
        source: Where the negative comes from: ``walk``, ``random`` or ``bm25``.
    """

    qid: str
    query: str
    positive_doc: str
    negative_doc: str
    source: str


@dataclass(frozen=True)
class BicaExampleSet:
    """The triplets of one training round, their texts and manifest."""

    schema: str
    triplets: tuple[Triplet, ...]
    texts: dict[str, str] = field(repr=False)
    manifest: dict[str, Any] = field(repr=False)

    def text(self, doc_id: str) -> str:
        """A document's formatted text (``config.document_format``)."""
        return self.texts[doc_id]

    def rows(self) -> list[tuple[str, str, str]]:
        """(query, positive text, negative text) per triplet, in order (MNR input)."""
        return [(t.query, self.texts[t.positive_doc], self.texts[t.negative_doc])
                for t in self.triplets]


def build_bica_examples(ws: Workspace, schema: str, config: BicaConfig | None = None, *,
                        vectors: VectorFunction | None = None,
                        query_vectors: VectorFunction | None = None,
                        embedder_id: str | None = None, task: EvalTask | None = None,
                        progress: bool = True) -> BicaExampleSet:
    """BiCA triplets of a schema's train split (see the module docstring).

    Args:
        ws: The workspace.
        schema: Schema name.
        config: Options; :class:`BicaConfig` defaults when None.
        vectors: doc ids -> L2-normalised float32 vectors (one row each, in order). With
            ``query_vectors`` it replaces :func:`base_vectors` of ``config.model``.
        query_vectors: query texts -> vectors of the same encoder.
        embedder_id: Name of the encoder for the manifest (default: ``vectors.model_id``,
            set by :func:`base_vectors`, else "injected").
        task: The evaluation task (default: :func:`build_task` with ``config.split_seed``).
        progress: tqdm bars.

    Returns:
        :class:`BicaExampleSet` with one triplet per (query, positive, negative).

    Raises:
        CurationError: No train query; only one of ``vectors``/``query_vectors`` given; the
            vectors have the wrong shape or are not normalised; no triplet at all.
    """
    config = config or BicaConfig()
    sch = get_schema(schema, ws.schemas())
    task = task or build_task(ws, sch.name, seed=config.split_seed)
    train = task.split("train")
    queries = list(train)
    if config.max_queries is not None:
        queries = random.Random(config.seed).sample(queries, min(config.max_queries, len(queries)))
        queries.sort(key=lambda q: q.qid)
    if not queries:
        raise CurationError(f"The train split of {sch.name} has no query with a cited abstract "
                            "in the workspace; import the cited documents first")
    if config.query_source != QuerySource.TEMPLATE and "{title}" in config.document_format:
        logger.warning("BiCA title queries with document_format %r: the positive's text holds "
                       "the query verbatim; BiCA pairs title queries with abstract-only "
                       "documents (document_format='{abstract}')", config.document_format)
    if (vectors is None) != (query_vectors is None):
        raise CurationError("Pass both vectors (doc ids -> vectors) and query_vectors (texts -> "
                            "vectors) of one encoder, or neither to use config.model")
    if vectors is None:
        base = base_vectors(ws, config.model, config.document_format, config.max_seq_length,
                            progress)
        vectors, query_vectors = base
    assert query_vectors is not None
    embedder_id = embedder_id or getattr(vectors, "model_id", None)

    docs = CorpusDocs(ws, EntityMatcher(), config.document_format)
    records = train_records(ws, sch, {q.qid for q in train}, docs)
    helper = ExampleBuilder(sch, margin_table(sch, ws.root),
                            ExampleConfig(bm25_depth=config.bm25_depth, seed=config.seed,
                                          split_seed=config.split_seed,
                                          document_format=config.document_format),
                            Ablation.NONE, docs, records, queries)
    titles: dict[str, str] = {}
    with_abstract: set[str] = set()
    for doc_id, title, abstract in Documents(ws).all_parts():
        titles[doc_id] = (title or "").strip()
        if (abstract or "").strip():
            with_abstract.add(doc_id)
    heldout = ({d for q in task.queries if q.split != "train" for d in q.gold}
               if config.exclude_heldout else set())

    citations = Citations(ws).edges()
    cited_docs = {d for edge in citations for d in edge}
    counts: Counter[str] = Counter()
    units: list[WalkUnit] = []
    with_edges = 0
    for q in queries:
        positives = sorted({p for rel in records.get(q.qid, []) if rel.slots.get(sch.answer)
                            for p in rel.pmids})
        if not positives:
            counts["query without positive"] += 1
            continue
        with_edges += any(p in cited_docs for p in positives)
        exclude = frozenset(positives) | helper.cited_for_first_entity(q) | heldout
        if config.query_source != QuerySource.TITLE:
            units.append(WalkUnit(q, q.text, QuerySource.TEMPLATE.value, tuple(positives),
                                  exclude))
        if config.query_source != QuerySource.TEMPLATE:
            for p in positives:
                if titles.get(p):
                    units.append(WalkUnit(q, titles[p], QuerySource.TITLE.value, (p,), exclude))
                else:
                    counts["positive without title"] += 1

    doc_vectors = DocVectors(vectors)
    adjacency = graph_adjacency(config, citations, doc_vectors, sorted(titles))
    walks: list[tuple[int, WalkUnit, list[str], list[str]]] = []
    fell_back: list[tuple[int, WalkUnit, str]] = []
    for i, unit in enumerate(units):
        hop1, hop2 = neighbourhood(adjacency, unit.positives)
        usable = [d for d in hop1 if d in with_abstract and d not in unit.exclude]
        if not hop1:
            fell_back.append((i, unit, Fallback.NO_EDGE.value))
        elif len(usable) < config.n_paths:
            fell_back.append((i, unit, Fallback.FEW_HOP1.value))
        else:
            walks.append((i, unit, usable, [d for d in hop1 + hop2 if d in with_abstract]))

    negatives = walk_all(config, walks, doc_vectors, query_vectors, progress)
    for i, unit, _ in fell_back:
        found = helper.bm25_negatives(replace(unit.query, text=unit.text), set(unit.exclude)) \
            if config.bm25_fallback else []
        negatives[i] = [(d, NegativeSource.BM25.value) for d in found[:config.bm25_fallback]]
    triplets: list[Triplet] = []
    per_unit: list[int] = []
    by_source: Counter[str] = Counter()
    for i, unit in enumerate(units):
        own = {docs.formatted[p] for p in unit.positives}
        negs = [(d, src) for d, src in negatives.get(i, []) if docs.formatted[d] not in own]
        counts["negative with a positive's text"] += len(negatives.get(i, [])) - len(negs)
        if not negs:
            counts["query without negative"] += 1
            continue
        per_unit.append(len(negs))
        by_source.update(src for _, src in negs)
        triplets += [Triplet(unit.query.qid, unit.text, p, d, src)
                     for p in unit.positives for d, src in negs]
    if not triplets:
        raise CurationError(f"No BiCA triplet for {sch.name}: no train query has both a "
                            "positive and a negative; import citations or more documents")
    used = {d for t in triplets for d in (t.positive_doc, t.negative_doc)}
    manifest = {
        "schema": sch.name, "recipe": "bica", "config": asdict(config),
        "embedder": embedder_id or "injected",
        "split": {"seed": task.seed, "fractions": list(task.fractions), "split": "train",
                  "queries": len(queries)},
        "graph": {"kind": config.graph, "citation_edges": len(citations),
                  "knn_k": config.knn_k if config.graph != Graph.CITATIONS else None,
                  "coverage": {"documents": len(titles), "on_citation_edge": len(cited_docs),
                               "fraction": round(len(cited_docs) / len(titles), 4)
                               if titles else 0.0}},
        "queries": len(queries),
        "queries_with_citation_edges": with_edges,
        "walk_queries": dict(sorted(Counter(u.kind for u in units).items())),
        "walked": len(walks),
        "fallbacks": dict(sorted(Counter(r for _, _, r in fell_back).items())),
        "skipped": {k: v for k, v in sorted(counts.items()) if v},
        "negatives": {s.value: by_source[s.value] for s in NegativeSource},
        "mean_negatives_per_query": round(sum(per_unit) / len(per_unit), 4),
        "triplets": len(triplets),
        "triplets_by_source": {s.value: sum(t.source == s.value for t in triplets)
                               for s in NegativeSource},
        "sha256": triplet_digest(triplets),
    }
    logger.info("BiCA %s: %d triplets from %d walks, %d fallbacks to BM25, %d queries without "
                "negative", sch.name, len(triplets), len(walks), len(fell_back),
                counts["query without negative"])
    return BicaExampleSet(sch.name, tuple(triplets), {d: docs.formatted[d] for d in sorted(used)},
                          manifest)


def triplet_digest(triplets: Sequence[Triplet]) -> str:
    """SHA-256 over the triplets (qid, query, positive, negative, source), in order."""
    digest = hashlib.sha256()
    for t in triplets:
        digest.update(f"{t.qid}\t{t.query}\t{t.positive_doc}\t{t.negative_doc}\t{t.source}\n"
                      .encode())
    return digest.hexdigest()
