"""EDEL's training examples from a schema's KB records (Wang & Leser; TRAINING.md 1.2-1.8).

For every query of the **train split** (the same seeded split by query entity that
``kbcurate evaluate`` uses, so no dev or test query entity is trained on):

* positives: every cited abstract of a record with an answer, classed by g (which of the record's
  entities, answer included, the abstract mentions; :class:`~curation.matching.matcher.
  EntityMatcher`) -> mu from the schema's margin table; one example per (query, PMID), the
  closest class kept;
* KB negatives: abstracts of other train-split records, classed by f (which query entities they
  share, whether they have an answer, whether their own abstract mentions the entity);
* BM25 negatives: top BM25 hits for the query text that the KB does not cite for the query
  entity, mention none of the query's known answers and carry no annotation of the answer type;
* random negatives: seeded corpus documents;
* first-stage negatives (``first_stage_negatives`` > 0; ``cross``, not EDEL): BM25's top hits in
  rank order as above but annotated or not: what a re-ranker meets (few BioRED hits lack a gene).

Each negative class is capped at ``negatives_per_class`` x (the query's positives), the caps are
recorded; a query's positives are never its negatives. Every document, positive or negative, is
written in one format (``title [SEP] abstract`` by default; the released code formats negatives
differently, which leaks the label).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from tqdm.auto import tqdm

from curation.evaluation.harness import SPLIT_SEED, EvalQuery, EvalTask, build_task
from curation.matching.matcher import EntityMatcher
from curation.store.documents import Documents, document_text
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from curation.training.recipes.edel.margins import MarginTable, margin_table
from kb_sources.errors import CurationError, parse_choice
from kb_sources.schema import Schema, get_schema
from kb_sources.types import Entity, Relation

logger = logging.getLogger(__name__)

DEFAULT_DOCUMENT_FORMAT = "{title} [SEP] {abstract}"


class Ablation(StrEnum):
    """EDEL's ablations (Table 3), cumulative as in the paper."""

    NONE = "none"
    NO_MULTIMARGIN = "no-multimargin"  # one margin: 0 for positives, 0.8 for negatives
    NO_NOISYPOS = "no-noisypos"  # ... and complete positives only
    NO_HARDNEG = "no-hardneg"  # ... and random negatives from other queries' documents only

    @classmethod
    def parse(cls, value: str | Ablation) -> Ablation:
        return parse_choice(cls, value, "ablation")


@dataclass(frozen=True)
class ExampleConfig:
    """How examples are drawn.

    Attributes:
        negatives_per_class: Cap per negative class per query, times the query's positives
            (EDEL code: 20; paper: up to 50 per class per positive).
        bm25_depth: BM25 hits looked at per query for BM25 negatives.
        ablation: :class:`Ablation` name.
        seed: Seed of every sample.
        split_seed: Seed of the train/dev/test split (that of ``kbcurate evaluate``,
            :data:`~curation.evaluation.harness.SPLIT_SEED`).
        document_format: How a document becomes text (``{title}``, ``{abstract}``).
        max_queries: Use at most this many train queries (None: all).
        first_stage_negatives: First-stage negatives per query, the best-ranked first (0: none,
            EDEL).
    """

    negatives_per_class: int = 20
    bm25_depth: int = 50
    ablation: str = "none"
    seed: int = 42
    split_seed: int = SPLIT_SEED
    document_format: str = DEFAULT_DOCUMENT_FORMAT
    max_queries: int | None = None
    first_stage_negatives: int = 0

    def __post_init__(self) -> None:
        if min(self.negatives_per_class, self.bm25_depth, self.first_stage_negatives) < 0:
            raise CurationError("negatives_per_class, bm25_depth and first_stage_negatives "
                                "must be >= 0")
        Ablation.parse(self.ablation)
        if "{title}" not in self.document_format and "{abstract}" not in self.document_format:
            raise CurationError(f"document_format {self.document_format!r} must contain "
                                "{title} and/or {abstract}")


@dataclass(frozen=True)
class Example:
    """One (query, document) pair with its class."""

    qid: str
    query: str
    doc_id: str
    positive: bool
    mu: float
    cls: str


@dataclass(frozen=True)
class ExampleSet:
    """The examples of one training round and their manifest."""

    schema: str
    examples: tuple[Example, ...]
    texts: dict[str, str] = field(repr=False)
    manifest: dict[str, Any] = field(repr=False)

    def text(self, doc_id: str) -> str:
        return self.texts[doc_id]


class CorpusDocs:
    """Document texts, annotation types and g(e, d) with a memo (each pair is matched once).

    Shared by the EDEL and BiCA builders. Attributes: ``raw`` (doc id -> "title abstract"),
    ``formatted`` (doc id -> text in the given format), ``ids`` (sorted doc ids), ``ws``.
    """

    def __init__(self, ws: Workspace, matcher: EntityMatcher, fmt: str) -> None:
        rows = Documents(ws).all_parts()
        self.raw = {r[0]: document_text(r[1], r[2]) for r in rows}
        self.formatted = {r[0]: fmt.format(title=r[1], abstract=r[2]).strip() for r in rows}
        self.ids = sorted(self.raw)
        self.matcher = matcher
        self._memo: dict[tuple[str, str], bool] = {}
        self._types: dict[str, set[str]] = {}
        for doc_id, etype in Documents(ws).annotation_types():
            self._types.setdefault(doc_id, set()).add(etype.lower())
        self.ws = ws

    def mentions(self, entities: Sequence[Entity], doc_id: str) -> bool:
        """g: the document mentions any of the slot's entities."""
        found = False
        for e in entities:
            key = (e.key, doc_id)
            if key not in self._memo:
                self._memo[key] = self.matcher.mentions(e, self.raw[doc_id])
            found = found or self._memo[key]
        return found

    def annotated_types(self, doc_id: str) -> set[str]:
        """The lower-cased annotation types of a document."""
        return self._types.get(doc_id, set())


def build_examples(ws: Workspace, schema: str, config: ExampleConfig | None = None, *,
                   matcher: EntityMatcher | None = None, task: EvalTask | None = None,
                   progress: bool = True) -> ExampleSet:
    """EDEL examples of a schema's train split (see the module docstring).

    Raises:
        CurationError: No train query has a cited abstract in the workspace.
    """
    config = config or ExampleConfig()
    sch = get_schema(schema, ws.schemas())
    task = task or build_task(ws, sch.name, seed=config.split_seed)
    table = margin_table(sch, ws.root)
    ablation = Ablation.parse(config.ablation)
    queries = task.split("train")
    if config.max_queries is not None:
        queries = random.Random(config.seed).sample(queries, min(config.max_queries, len(queries)))
        queries.sort(key=lambda q: q.qid)
    if not queries:
        raise CurationError(f"The train split of {sch.name} has no query with a cited abstract "
                            "in the workspace; import the cited documents first")
    docs = CorpusDocs(ws, matcher or EntityMatcher(), config.document_format)
    records = train_records(ws, sch, {q.qid for q in task.split("train")}, docs)
    builder = ExampleBuilder(sch, table, config, ablation, docs, records, queries)
    out: list[Example] = []
    for i, q in enumerate(tqdm(queries, desc=f"examples {sch.name}", disable=not progress,
                               mininterval=0.5)):
        out += builder.for_query(q, random.Random(f"{config.seed}:{i}:{q.qid}"))
    if not any(e.positive for e in out):
        raise CurationError(f"No positive example for {sch.name}: no train record with an answer "
                            "cites an abstract in the workspace")
    used = {e.doc_id for e in out}
    manifest = _manifest(sch, table, config, task, queries, out, builder.skipped)
    return ExampleSet(sch.name, tuple(out), {d: docs.formatted[d] for d in used}, manifest)


def train_records(ws: Workspace, sch: Schema, train_keys: set[str], docs: CorpusDocs
                  ) -> dict[str, list[Relation]]:
    """Train-split records of the schema by query key (PMIDs kept only when in the corpus).

    Returns:
        query key -> its records in import order, each with the PMIDs in ``docs`` only; records
        citing none of them are left out.
    """
    out: dict[str, list[Relation]] = {}
    for key, data in Relations(ws).rows(sch.name):
        if key not in train_keys:
            continue
        rel = Relation.from_json(json.loads(data))
        pmids = tuple(p for p in rel.pmids if p in docs.raw)
        if pmids:
            out.setdefault(key, []).append(
                Relation(rel.schema, rel.source, rel.record_id, rel.slots, pmids, rel.attributes))
    return out


class ExampleBuilder:
    """EDEL's positives and negatives per train query (see the module docstring); BiCA uses
    :meth:`cited_for_first_entity` and :meth:`bm25_negatives`."""

    def __init__(self, sch: Schema, table: MarginTable, config: ExampleConfig,
                 ablation: Ablation, docs: CorpusDocs, records: dict[str, list[Relation]],
                 queries: Sequence[EvalQuery]) -> None:
        self.sch, self.table, self.config, self.ablation = sch, table, config, ablation
        self.docs, self.records = docs, records
        self.first = sch.query_slots[0]
        self.by_first: dict[str, list[tuple[str, Relation]]] = {}
        for key, rels in records.items():
            for rel in rels:
                for e in rel.slots.get(self.first, ()):
                    self.by_first.setdefault(e.key, []).append((key, rel))
        self.all_records = [(k, r) for k, rels in sorted(records.items()) for r in rels]
        self.kb_docs = sorted({p for rels in records.values() for r in rels for p in r.pmids})
        self.skipped: Counter[str] = Counter()
        self._bm25: Any = None
        self.queries = queries

    # -- positives ---------------------------------------------------------------------------
    def positives(self, q: EvalQuery) -> dict[str, tuple[float, str]]:
        best: dict[str, tuple[float, str]] = {}
        for rel in self.records.get(q.qid, []):
            if not rel.slots.get(self.sch.answer):
                continue
            for pmid in rel.pmids:
                pattern = "".join(
                    "1" if self.docs.mentions(rel.slots.get(s, ()), pmid) else "0"
                    for s in (*self.sch.query_slots, self.sch.answer))
                mu = self.table.positive_mu(pattern)
                if pmid not in best or mu < best[pmid][0]:
                    best[pmid] = (mu, f"pos:{pattern}")
        if self.ablation is not Ablation.NONE:
            complete = "1" * (len(self.sch.query_slots) + 1)
            best = {p: (0.0, c) for p, (mu, c) in best.items()
                    if self.ablation is Ablation.NO_MULTIMARGIN or c == f"pos:{complete}"}
        return best

    # -- negatives ---------------------------------------------------------------------------
    def for_query(self, q: EvalQuery, rng: random.Random) -> list[Example]:
        pos = self.positives(q)
        if not pos:
            self.skipped["query without positive"] += 1
            return []
        exclude = set(pos) | self.cited_for_first_entity(q)
        cap = self.config.negatives_per_class * len(pos)
        negatives: dict[str, tuple[float, str]] = {}
        if self.ablation is Ablation.NO_HARDNEG:
            pool = [d for d in self.kb_docs if d not in exclude]
            for d in rng.sample(pool, min(len(pool), 3 * cap)):
                negatives[d] = (0.8, "neg:random-kb")
        else:
            classes: dict[str, list[tuple[str, float]]] = {}
            for pmid, mu, cls in self._kb_negatives(q, exclude, rng, cap):
                classes.setdefault(cls, []).append((pmid, mu))
            classes["neg:bm25"] = [(d, self.table.bm25) for d in self.bm25_negatives(q, exclude)]
            classes["neg:random"] = [(d, self.table.random) for d in rng.sample(
                self.docs.ids, min(len(self.docs.ids), 4 * cap + len(exclude)))
                if d not in exclude]
            dropped: set[str] = set()
            for cls, items in classes.items():
                items = [(d, mu) for d, mu in dict(items).items()
                         if d not in negatives and d not in dropped]
                for d, mu in rng.sample(items, min(len(items), cap)):
                    if self.ablation is not Ablation.NONE:
                        if mu < 0.6:  # -MultiMargin drops class-2 negatives (and their docs)
                            self.skipped["class-2 negative (ablation)"] += 1
                            dropped.add(d)
                            continue
                        mu = 0.8
                    negatives[d] = (mu, cls)
            first = [d for d in self.first_stage(q, exclude) if d not in negatives]
            for d in first[:self.config.first_stage_negatives]:
                negatives[d] = (self.table.bm25, "neg:first-stage")
        return ([Example(q.qid, q.text, d, True, mu, c) for d, (mu, c) in sorted(pos.items())]
                + [Example(q.qid, q.text, d, False, mu, c)
                   for d, (mu, c) in sorted(negatives.items())])

    def cited_for_first_entity(self, q: EvalQuery) -> set[str]:
        """PMIDs any train record with the query's first entity and an answer cites."""
        keys = {e.key for e in q.query.get(self.first, ())}
        return {p for k in keys for _, rel in self.by_first.get(k, ())
                if rel.slots.get(self.sch.answer) and self._same_query(q, rel)
                for p in rel.pmids}

    def _same_query(self, q: EvalQuery, rel: Relation) -> bool:
        return all({e.key for e in rel.slots.get(s, ())} & {e.key for e in q.query.get(s, ())}
                   for s in self.sch.query_slots)

    def _kb_negatives(self, q: EvalQuery, exclude: set[str], rng: random.Random, cap: int
                      ) -> Iterable[tuple[str, float, str]]:
        keys = {e.key for e in q.query.get(self.first, ())}
        near = [(k, r) for key in keys for k, r in self.by_first.get(key, ())]
        near_ids = {id(r) for _, r in near}
        others = [kr for kr in self.all_records if id(kr[1]) not in near_ids]
        far = rng.sample(others, min(len(others), 8 * cap))
        for _, rel in near + far:
            if rel.slots.get(self.sch.answer) and self._same_query(q, rel):
                continue  # all f = 1: another positive, never a negative
            for pmid in rel.pmids:
                if pmid in exclude:
                    continue
                found = self.table.negative_class(self._tokens(q, rel, pmid))
                if found is None:
                    self.skipped["record outside every negative class"] += 1
                    continue
                pattern, mu = found
                yield pmid, mu, f"neg:{pattern}"

    def _tokens(self, q: EvalQuery, rel: Relation, pmid: str) -> list[str]:
        tokens = []
        for s in self.sch.query_slots:
            same = bool({e.key for e in rel.slots.get(s, ())} & {e.key for e in q.query.get(s, ())})
            seen = self.docs.mentions(rel.slots.get(s, ()), pmid)
            tokens.append(("1" if same else "0") + ("" if seen else "*"))
        tokens.append("1" if rel.slots.get(self.sch.answer) else "0")
        return tokens

    def first_stage(self, q: EvalQuery, exclude: set[str]) -> list[str]:
        """BM25's top ``bm25_depth`` in rank order less ``exclude`` and hits naming a known
        answer (none when ``first_stage_negatives`` is 0)."""
        if self.config.first_stage_negatives == 0 or self.config.bm25_depth == 0:
            return []
        return [h.doc_id for h in self._bm25_hits(q.text)
                if h.doc_id not in exclude
                and not any(self.docs.mentions((a,), h.doc_id) for a in q.answers)]

    def _bm25_hits(self, text: str) -> list[Any]:
        if self._bm25 is None:
            from curation.search.indexing import get_index

            self._bm25 = get_index(self.docs.ws, "bm25", progress=False)
        return list(self._bm25.search(text, self.config.bm25_depth))

    def bm25_negatives(self, q: EvalQuery, exclude: set[str]) -> list[str]:
        """Top BM25 hits for the query text (``bm25_depth``) that are not excluded, carry no
        annotation of the answer type and mention none of the query's known answers."""
        if self.config.bm25_depth == 0:
            return []
        answer_type = self.sch.slot(self.sch.answer).type.lower()
        out = []
        for hit in self._bm25_hits(q.text):
            d = hit.doc_id
            if d in exclude or answer_type in self.docs.annotated_types(d):
                continue
            if any(self.docs.mentions((a,), d) for a in q.answers):
                continue
            out.append(d)
        return out


def _manifest(sch: Schema, table: MarginTable, config: ExampleConfig, task: EvalTask,
              queries: Sequence[EvalQuery], examples: Sequence[Example],
              skipped: Counter[str]) -> dict[str, Any]:
    return {
        "schema": sch.name, "recipe": "edel", "config": asdict(config),
        "margin_table": table.to_json(),
        "split": {"seed": task.seed, "fractions": list(task.fractions), "split": "train",
                  "queries": len(queries)},
        "examples": len(examples), "positives": sum(e.positive for e in examples),
        "negatives": sum(not e.positive for e in examples),
        "classes": dict(sorted(Counter(e.cls for e in examples).items())),
        "mu": {f"{k:.1f}": v for k, v in sorted(Counter(e.mu for e in examples).items())},
        "skipped": dict(skipped), "sha256": manifest_digest(examples),
    }


def manifest_digest(examples: Sequence[Example]) -> str:
    """SHA-256 over the examples (query, document, sign, mu, class), in order."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(f"{e.qid}\t{e.doc_id}\t{int(e.positive)}\t{e.mu:.3f}\t{e.cls}\n".encode())
    return digest.hexdigest()


def to_pairs(example_set: ExampleSet) -> list[Any]:
    """The examples as :class:`retrievers.training.config.PairExample` (texts filled in)."""
    from retrievers.training.config import PairExample

    return [PairExample(e.query, example_set.text(e.doc_id), e.positive, e.mu, e.cls)
            for e in example_set.examples]

