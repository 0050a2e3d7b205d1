"""Where a screening queue's prior comes from: the calibration of what ranks the relation.

- **The learned ranker** (the page ranks by a ranker version): the version's own calibration,
  fitted by its round on the held-out pool (:func:`version_source`), else
  :data:`~curation.screening.calibration.DEFAULT_CALIBRATION`.
- **Any other ranking** (BM25, BM25 + the entity rerank, dense, hybrid; :class:`RankingOrder`):
  a rank-only calibration (``log-odds = a + c * ln(rank)``: such scores are not comparable across
  queries, nor across the rerank's cut) fitted on the lists that very ranking gives the held-out
  queries (the evaluation harness's dev and test queries; gold: the documents the KB cites),
  chosen by :func:`choose_calibration`: the schema's own when at least
  :data:`MIN_OWN_QUERIES` of its held-out queries have a relevant candidate; else pooled over
  every schema of the workspace with held-out queries (the same ranking on each) when those
  reach that count; else :data:`~curation.screening.calibration.DEFAULT_RANK_CALIBRATION`.
  :attr:`CalibrationSource.words` says which, for the panel.

Cost and cache (:func:`ranking_source`): one schema's lists are one search to the queue's depth
(and the rerank of its head) per held-out query, a seeded sample of at most
:data:`HELDOUT_SAMPLE` (about 15 ms a query with BM25 + rerank on the demo's 12,471
documents); they are kept in the workspace (``meta`` key per ranking and schema: the relevant
candidates' ranks, a few kB) with the documents and relations stamp, and fitting from them takes
milliseconds. So a schema's lists are searched once per ranking and corpus state, and every
schema that borrows reuses them.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from curation.screening.calibration import (
    DEFAULT_CALIBRATION,
    DEFAULT_RANK_CALIBRATION,
    Calibration,
    fit_calibration,
)
from curation.screening.queue import SCREENING_DEPTH
from curation.store.documents import Documents
from curation.store.errors import WorkspaceError
from curation.store.relations import Relations
from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.types import Entity
from retrievers.base import Hit

logger = logging.getLogger(__name__)

#: Held-out queries with a relevant candidate a schema needs for a calibration of its own.
MIN_OWN_QUERIES = 20
#: Held-out queries searched per schema and ranking at most (a seeded sample).
HELDOUT_SAMPLE = 40
HELDOUT_SEED = 13
#: Sources of a calibration.
VERSION, OWN, POOLED, DEFAULT = "version", "own", "pooled", "default"
_KEY = "screening_heldout"


class HeldoutQuery(Protocol):
    """A held-out query as the evaluation harness gives it (``EvalQuery``)."""

    qid: str
    text: str
    query: Mapping[str, Sequence[Entity]]
    gold: Sequence[str]


@dataclass(frozen=True)
class RankingOrder:
    """A ranking other than the learned ranker, as the Curate page runs it.

    Attributes:
        key: What names it in caches ("bm25+rerank", "dense · PO-edel@2").
        label: The curator's name of it ("BM25 + entity rerank").
        search: The first stage: ``search(text, k)`` -> hits, best first.
        head: The page's reorder of the first stage's top (the entity rerank):
            ``head(text, entities)`` -> hits; None when the page shows the first stage as is.
    """

    key: str
    label: str
    search: Callable[[str, int], Sequence[Hit]]
    head: Callable[[str, Sequence[Entity]], Sequence[Hit]] | None = None

    def order(self, text: str, entities: Sequence[Entity], depth: int
              ) -> list[tuple[str, float]]:
        """(doc id, score) best first: the head as the page ranks it, then the first stage's
        rest to ``depth``."""
        deep = [(h.doc_id, h.score) for h in self.search(text, depth)]
        if self.head is None:
            return deep
        head = {h.doc_id: h.score for h in self.head(text, entities)}
        return [*head.items(), *((d, s) for d, s in deep if d not in head)]


@dataclass(frozen=True)
class HeldoutLists:
    """One schema's held-out queries under one ranking.

    Attributes:
        schema: The schema.
        lengths: Per query, how many candidates the ranking gave.
        relevant: Per query, the 1-based ranks of its gold documents among them.
    """

    schema: str
    lengths: tuple[int, ...] = ()
    relevant: tuple[tuple[int, ...], ...] = ()

    @property
    def queries(self) -> int:
        """Queries with at least one relevant candidate."""
        return sum(bool(r) for r in self.relevant)

    def flags(self) -> list[np.ndarray]:
        """Per query with candidates, whether each candidate (in rank order) is relevant."""
        out = []
        for n, ranks in zip(self.lengths, self.relevant, strict=True):
            if n:
                y = np.zeros(n, dtype=bool)
                y[np.asarray(ranks, dtype=np.int64) - 1] = True
                out.append(y)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), "relevant": [list(r) for r in self.relevant]}

    @classmethod
    def from_json(cls, schema: str, data: Any) -> HeldoutLists | None:
        """The lists :meth:`to_json` wrote, or None when ``data`` is not such JSON."""
        try:
            lengths = tuple(int(n) for n in data["lengths"])
            relevant = tuple(tuple(int(r) for r in ranks) for ranks in data["relevant"])
        except (KeyError, TypeError, ValueError):
            return None
        ok = len(lengths) == len(relevant) and all(
            all(1 <= r <= n for r in ranks) for n, ranks in zip(lengths, relevant, strict=True))
        return cls(schema, lengths, relevant) if ok else None


def heldout_lists(schema: str, queries: Sequence[HeldoutQuery], order: RankingOrder, *,
                  depth: int, sample: int = HELDOUT_SAMPLE) -> HeldoutLists:
    """``order``'s candidate lists of a seeded sample of at most ``sample`` ``queries`` (to
    ``depth``), as the ranks of each query's gold documents."""
    chosen = sorted(queries, key=lambda q: q.qid)
    if len(chosen) > sample:
        chosen = sorted(random.Random(HELDOUT_SEED).sample(chosen, sample), key=lambda q: q.qid)
    lengths, relevant = [], []
    for q in chosen:
        ids = [d for d, _ in order.order(q.text, [e for ents in q.query.values() for e in ents],
                                         depth)]
        gold = set(q.gold)
        lengths.append(len(ids))
        relevant.append(tuple(i + 1 for i, d in enumerate(ids) if d in gold))
    return HeldoutLists(schema, tuple(lengths), tuple(relevant))


@dataclass(frozen=True)
class CalibrationSource:
    """A queue's calibration and where it comes from.

    Attributes:
        calibration: Score and rank -> prior log-odds.
        kind: :data:`VERSION`, :data:`OWN`, :data:`POOLED` or :data:`DEFAULT`.
        schema: The relation's schema.
        ranking: The curator's name of what ranks the relation.
        queries: Held-out queries with a relevant candidate it was fitted on (pooled: all
            schemas'; default: what the workspace had).
        schemas: Schemas those queries come from.
        own: The schema's own held-out queries with a relevant candidate.
        needed: Queries with a relevant candidate a fit of its own needed.
    """

    calibration: Calibration
    kind: str
    schema: str
    ranking: str
    queries: int = 0
    schemas: int = 0
    own: int = 0
    needed: int = MIN_OWN_QUERIES

    def words(self) -> str:
        """Where the prior comes from, in one sentence (plain text: the caller escapes it)."""
        if self.kind == OWN:
            return (f"Calibrated on {self.schema}'s {self.queries:d} held-out queries "
                    f"({self.ranking}).")
        if self.kind == POOLED:
            return (f"Borrowed: pooled over {self.schemas:d} schemas' {self.queries:d} held-out "
                    f"queries ({self.ranking}); {self.schema} has too few ({self.own:d} of the "
                    f"{self.needed:d} needed).")
        if self.kind == VERSION and self.queries:
            return (f"Calibrated on {self.schema}'s {self.queries:d} held-out queries "
                    f"({self.ranking}).")
        if self.kind == VERSION:
            return (f"Default calibration (built in): {self.ranking} has none of its own; a "
                    "new ranker round fits one.")
        return (f"Default calibration (built in: disease_gene dev queries, BM25): the "
                f"workspace has too few held-out queries for {self.ranking} ({self.queries:d} "
                f"of the {self.needed:d} needed).")


def version_source(schema: str, ranking: str, manifest: Mapping[str, Any]) -> CalibrationSource:
    """The calibration a learned ranker version keeps (its manifest's ``calibration``, fitted
    by its round on the held-out pool), else :data:`DEFAULT_CALIBRATION`."""
    fitted = Calibration.from_json(manifest.get("calibration"))
    return CalibrationSource(fitted or DEFAULT_CALIBRATION, VERSION, schema, ranking,
                             fitted.queries if fitted else 0, 1 if fitted else 0)


def choose_calibration(schema: str, ranking: str, lists: Mapping[str, HeldoutLists], *,
                       min_queries: int = MIN_OWN_QUERIES) -> CalibrationSource:
    """The rank-only calibration of a ranking other than the learned ranker.

    Args:
        schema: The relation's schema.
        ranking: The curator's name of the ranking.
        lists: Per schema (``schema`` itself among them when it has held-out queries), its
            held-out lists under that ranking.
        min_queries: Queries with a relevant candidate a fit needs.

    Returns:
        The schema's own fit when it has ``min_queries``; else the fit pooled over every
        schema's lists when they have as many together; else the built-in default.
    """
    own = lists.get(schema, HeldoutLists(schema))
    if own.queries >= min_queries:
        return CalibrationSource(_fit([own]), OWN, schema, ranking, own.queries, 1, own.queries,
                                 min_queries)
    used = [x for x in lists.values() if x.queries]
    total = sum(x.queries for x in used)
    if total >= min_queries:
        return CalibrationSource(_fit(used), POOLED, schema, ranking, total, len(used),
                                 own.queries, min_queries)
    return CalibrationSource(DEFAULT_RANK_CALIBRATION, DEFAULT, schema, ranking, total,
                             len(used), own.queries, min_queries)


def _fit(lists: Sequence[HeldoutLists]) -> Calibration:
    flags = [y for x in lists for y in x.flags()]
    return fit_calibration([np.zeros(len(y)) for y in flags], flags, rank_only=True)


def ranking_source(ws: Workspace, schema: str, order: RankingOrder,
                   queries_of: Callable[[str], Sequence[HeldoutQuery]], *,
                   depth: int = SCREENING_DEPTH,
                   min_queries: int = MIN_OWN_QUERIES) -> CalibrationSource:
    """:func:`choose_calibration` for ``order`` on ``schema``, from the held-out lists kept in
    the workspace (:func:`cached_lists`); the other schemas' lists are read (or searched) only
    when ``schema`` has too few of its own.

    Args:
        ws: The workspace (its ``meta`` keeps the lists).
        schema: The relation's schema.
        order: The ranking.
        queries_of: A schema's held-out queries (the evaluation harness's dev and test
            queries); a :class:`CurationError` when it has none.
        depth: Candidates per list (the queue's depth).
        min_queries: Queries with a relevant candidate a fit needs.
    """
    def lists_of(name: str) -> HeldoutLists:
        return heldout_lists(name, queries_of(name), order, depth=depth)

    stamp = heldout_stamp(ws)
    lists = {schema: cached_lists(ws, schema, order.key, stamp, lists_of)}
    if lists[schema].queries < min_queries:
        for other in Relations(ws).evaluable_schemas():
            if other != schema:
                lists[other] = cached_lists(ws, other, order.key, stamp, lists_of)
    return choose_calibration(schema, order.label, lists, min_queries=min_queries)


def heldout_stamp(ws: Workspace) -> str:
    """Changes when documents or relations change (and so the held-out queries and lists)."""
    n, last = Documents(ws).marker()
    return f"{n}:{last}|{Relations(ws).stamp()}|{HELDOUT_SAMPLE}"


def cached_lists(ws: Workspace, schema: str, ranking: str, stamp: str,
                 lists_of: Callable[[str], HeldoutLists]) -> HeldoutLists:
    """``schema``'s held-out lists under ``ranking`` as kept in the workspace for ``stamp``;
    searched with ``lists_of`` and kept when missing or stale (a busy or read-only workspace
    keeps nothing: the next queue searches again)."""
    settings, key = Settings(ws), f"{_KEY}:{ranking}:{schema}"
    try:
        kept = json.loads(settings.value(key) or "null")
    except ValueError:
        kept = None
    if isinstance(kept, dict) and kept.get("stamp") == stamp:
        lists = HeldoutLists.from_json(schema, kept)
        if lists is not None:
            return lists
    try:
        lists = lists_of(schema)
    except CurationError as exc:  # e.g. no relation of the schema cites a document here
        logger.warning("held-out lists of %s under %s: %s", schema, ranking, exc)
        lists = HeldoutLists(schema)
    try:
        with ws.transaction():
            settings.put(key, json.dumps({"stamp": stamp, **lists.to_json()}))
    except WorkspaceError as exc:
        logger.warning("held-out lists of %s under %s not kept: %s", schema, ranking, exc)
    return lists
