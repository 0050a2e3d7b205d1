"""The ranker at work on one workspace and schema: candidates -> features -> scores -> hits.

:class:`RankingContext` holds what every query of a schema shares (the answer-type tagger, the
documents' titles and abstracts, the KB citations by first query entity, the matcher) and the
first-stage retrievers the caller opened (BM25, and the dense version and base model where their
index exists). Feature rows are cached per (query, document) for the context's life, which is
one corpus state: the caller makes a new context when the corpus or the dense version changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from curation.matching.matcher import EntityMatcher
from curation.ranking.cross import CrossFeature, cross_columns
from curation.ranking.explain import Reason, reasons
from curation.ranking.features import (
    ANSWER_TYPES,
    DEFAULT_DEPTH,
    DENSE,
    LEXICAL,
    AnswerTagger,
    Candidates,
    FeatureBuilder,
    feature_names,
    gather,
)
from curation.ranking.model import Ranker
from curation.store.documents import Documents
from curation.store.entities import Entities
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.schema import Schema
from kb_sources.types import Entity
from retrievers.base import Hit, Retriever

logger = logging.getLogger(__name__)

#: Name of the ranked retriever in hits, reports and the app.
RANKED = "ranked"


class _Parts(dict):
    """doc id -> (title, abstract), loaded from the store in batches as candidates appear."""

    def __init__(self, ws: Workspace) -> None:
        super().__init__()
        self.ws = ws

    def load(self, doc_ids: Sequence[str], ws: Workspace | None = None) -> None:
        """Load the missing ones, through ``ws`` when given (a caller's own connection)."""
        missing = [d for d in doc_ids if d not in self]
        if missing:
            self.update(Documents(ws or self.ws).parts(missing))


@dataclass(frozen=True)
class Ranked:
    """One ranked document with its score and feature row."""

    hit: Hit
    features: np.ndarray


class RankingContext:
    """Candidates and features of one schema's queries over the workspace corpus.

    Args:
        ws: The workspace.
        schema: The schema whose partial relations are the queries.
        bm25: The BM25 index (always the first stage).
        dense: The active dense version's index, if built.
        base: The base model's dense index, if built.
        matcher: The process-wide matcher.
        depth: Candidates taken from each retriever (N).
        answer_keys: Only these entities count as answer-type entities (evaluation: the
            answers of train-split relations, so held-out relations put nothing in the
            dictionary); None: the whole entity dictionary of the answer type.
        cross: The cross-encoder block (:mod:`curation.ranking.cross`): its cached scores of
            the first stages' top K become features; None: no cross features (the names of
            versions trained before them).
    """

    def __init__(self, ws: Workspace, schema: Schema, bm25: Retriever, *,
                 dense: Retriever | None = None, base: Retriever | None = None,
                 matcher: EntityMatcher | None = None, depth: int = DEFAULT_DEPTH,
                 answer_keys: set[str] | None = None, cross: CrossFeature | None = None
                 ) -> None:
        self.ws, self.schema = ws, schema
        self.bm25, self.dense, self.base = bm25, dense, base
        self.depth = depth
        self.cross = cross
        self.answer_type = schema.slot(schema.answer).type
        forms = Entities(ws).forms(ANSWER_TYPES.get(self.answer_type, (self.answer_type,)))
        if answer_keys is not None:
            forms = {k: v for k, v in forms.items() if k in answer_keys}
        self.parts = _Parts(ws)
        siblings: dict[str, dict[str, set[str]]] = {}
        first = schema.query_slots[0]
        for p in Relations(ws).partial(schema.name):
            for e in p.query.get(first, ()):
                siblings.setdefault(e.key, {})[p.query_key] = set(p.pmids)
        self.builder = FeatureBuilder(schema.query_slots, self.answer_type, AnswerTagger(forms),
                                      matcher or EntityMatcher(), self.parts, siblings)
        self.names = feature_names(schema.query_slots, cross=cross is not None)
        logger.info("ranking context %s: %d answer-type forms, dense %s, base %s, cross %s",
                    schema.name, len(self.builder.tagger), "yes" if dense else "no",
                    "yes" if base else "no", cross.version or "gone" if cross else "no")

    def candidates(self, text: str, extra: Sequence[str] = ()) -> Candidates:
        """BM25's top N, the dense top N where an index is open, and ``extra`` ids."""
        bm25 = self.bm25.search(text, self.depth)
        dense = self.dense.search(text, self.depth) if self.dense is not None else None
        base = self.base.search(text, self.depth) if self.base is not None else None
        return gather(bm25, dense, base, depth=self.depth, extra=extra, text=text)

    def features(self, query: Mapping[str, Sequence[Entity]], candidates: Candidates,
                 query_key: str = "", *, ws: Workspace | None = None) -> np.ndarray:
        """Feature rows of the candidates (rows in ``candidates.doc_ids`` order); documents
        are read through ``ws`` when given (default: the context's workspace). The cross
        block reads the cache for ``candidates.text`` (a score not there is missing)."""
        self.parts.load(candidates.doc_ids, ws)
        x = self.builder.matrix(query, candidates, query_key)
        if self.cross is None:
            return x
        scores = self.cross.scores(ws or self.ws, candidates.text, candidates, self.parts)
        at = len(LEXICAL) + len(DENSE)
        return np.hstack([x[:, :at], cross_columns(candidates.doc_ids, scores), x[:, at:]])

    def rank(self, ranker: Ranker, text: str, query: Mapping[str, Sequence[Entity]], k: int,
             query_key: str = "", *, ws: Workspace | None = None) -> list[Ranked]:
        """The top ``k`` candidates by the ranker's score (ties: the first stage's order)."""
        cands = self.candidates(text)
        x = self.features(query, cands, query_key, ws=ws)
        scores = ranker.score(x)
        order = sorted(range(len(cands.doc_ids)), key=lambda i: (-scores[i], i))[:k]
        return [Ranked(Hit(cands.doc_ids[i], float(scores[i]), r, RANKED), x[i])
                for r, i in enumerate(order, start=1)]

    def explain(self, ranker: Ranker, row: np.ndarray, query: Mapping[str, Sequence[Entity]],
                top: int = 3) -> list[Reason]:
        """The top reasons of one feature row, in words."""
        contributions = ranker.contributions(row.reshape(1, -1))[0]
        return reasons(self.names, row, contributions, query, self.answer_type, top)
