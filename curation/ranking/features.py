"""Candidates and features of the learned ranker: what a (query, document) pair says.

The candidates of a partial relation are the union of BM25's top N and the dense retriever's top N
(BM25 alone when no dense index is given). Each pair gets one vector, named by
:func:`feature_names` (per schema: one block per query slot):

* lexical: BM25 score over the query's best BM25 score, BM25 rank (N + 1 when absent), reciprocal
  rank fusion over the retrievers given;
* dense: cosine to the trained version and to the base model where given, and a flag when the
  document is outside the dense top N (then the cosine is missing, never an error);
* cross-encoder (only in versions trained with it, :mod:`curation.ranking.cross`): the score of
  the active cross version, read from the workspace's cache for the first stages' top K, the
  document's place among the scored ones, and a flag when there is no score (outside the top K,
  not computed yet, or no cross version: a missing feature, never an error);
* entity evidence per query slot, from the :class:`~curation.matching.matcher.EntityMatcher`:
  named in the title, in the abstract, mentions (log), how (exact/synonym 4, normalised 3,
  abbreviation 2, fuzzy 1, none 0), first mention as a share of the text; plus the share of query
  slots named anywhere and in the title;
* answer evidence: distinct entities of the answer slot's type (the workspace's entity
  dictionary, tagged in the text: genes for a gene slot, drugs for a treatment slot), whether one
  of them shares a sentence with every query slot's mention, and how many such sentences;
* KB context: the KB cites the document for another relation sharing the first query entity.

Never a feature that tells where a document came from rather than what it says (the words of
:data:`FORBIDDEN`; a test checks every schema's list): the sample pool merges collections of
different styles, and such features score the artifact. The tagger
reads the text, not PubTator annotations, for the same reason: only some corpora carry them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from curation.matching.evidence import document_sentences
from curation.matching.matcher import EntityMatcher, Span
from curation.matching.patterns import MatchKind
from kb_sources.types import Entity, joined_text
from retrievers.base import Hit

#: Default depth of each first-stage retriever.
DEFAULT_DEPTH = 100
#: Reciprocal rank fusion constant (Cormack et al.).
RRF_K = 60
#: Words no feature name may contain: they describe a document's origin, not its content.
FORBIDDEN = ("length", "source", "corpus", "has_title", "year", "journal", "words", "chars")
#: Answer slot type -> the entity types that fill it (a drug is a chemical, and vice versa).
ANSWER_TYPES: dict[str, tuple[str, ...]] = {"chemical": ("chemical", "drug"),
                                            "drug": ("drug", "chemical")}
_KIND = {MatchKind.EXACT: 4, MatchKind.SYNONYM: 4, MatchKind.NORMALISED: 3,
         MatchKind.ABBREVIATION: 2, MatchKind.FUZZY: 1}
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-'][A-Za-z0-9]+)*")
_MAX_NGRAM = 5

LEXICAL = ("bm25_score", "bm25_rank", "rrf")
DENSE = ("dense_cos", "base_cos", "dense_missing")
CROSS = ("cross_score", "cross_share", "cross_missing")
SLOT_PARTS = ("title", "abstract", "mentions", "kind", "first")
COVERAGE = ("slots_named", "slots_in_title")
ANSWER = ("answer_entities", "answer_with_query", "evidence_sentences")
KB = ("kb_sibling_cited",)


def feature_names(query_slots: Sequence[str], *, cross: bool = False) -> list[str]:
    """The ordered feature names of a schema with these query slots (``cross``: with the
    cross-encoder's block after the dense one; versions trained before it have none)."""
    return [*LEXICAL, *DENSE, *(CROSS if cross else ()),
            *(f"slot:{slot}:{part}" for slot in query_slots for part in SLOT_PARTS),
            *COVERAGE, *ANSWER, *KB]


def monotone_constraints(names: Sequence[str]) -> list[int]:
    """+1 where more evidence never lowers the score, -1 for ranks, 0 elsewhere."""
    up = {"bm25_score", "rrf", "slots_named", "slots_in_title", "answer_with_query",
          "cross_score"}
    out = []
    for name in names:
        part = name.rsplit(":", 1)[-1]
        if name in up or (name.startswith("slot:") and part in ("title", "abstract")):
            out.append(1)
        elif name in ("bm25_rank", "cross_share"):
            out.append(-1)
        else:
            out.append(0)
    return out


class AnswerTagger:
    """Finds entities of the answer type in a text by their dictionary surface forms.

    Longest match first over word n-grams. Forms of 2 characters or fewer are ignored; forms of
    up to 5 characters in capitals or digits (gene symbols: MET, CAT, ALK) match only in that
    case, so "met" and "cat" are not genes; longer forms match case-insensitively.
    """

    def __init__(self, forms: Mapping[str, Sequence[str]], exclude: Sequence[str] = ()) -> None:
        self.exact: dict[tuple[str, ...], str] = {}
        self.folded: dict[tuple[str, ...], str] = {}
        skip = set(exclude)
        for key in sorted(forms):
            if key in skip:
                continue
            for form in forms[key]:
                tokens = tuple(_TOKEN.findall(form))
                if not tokens or len(tokens) > _MAX_NGRAM or len(form.strip()) <= 2:
                    continue
                if len(form.strip()) <= 5 and form.upper() == form:
                    self.exact.setdefault(tokens, key)
                else:
                    self.folded.setdefault(tuple(t.lower() for t in tokens), key)

    def __len__(self) -> int:
        return len(self.exact) + len(self.folded)

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, entity key)`` of each mention, left to right, never overlapping."""
        matches = list(_TOKEN.finditer(text))
        words = [m.group() for m in matches]
        lower = [w.lower() for w in words]
        out, i = [], 0
        while i < len(words):
            for n in range(min(_MAX_NGRAM, len(words) - i), 0, -1):
                key = (self.exact.get(tuple(words[i:i + n]))
                       or self.folded.get(tuple(lower[i:i + n])))
                if key:
                    out.append((matches[i].start(), matches[i + n - 1].end(), key))
                    i += n
                    break
            else:
                i += 1
        return out


@dataclass(frozen=True)
class Candidates:
    """The first-stage evidence of one query: doc id -> rank and score per retriever, and the
    query text they answered (the cross-encoder reads it with each document)."""

    doc_ids: tuple[str, ...]
    bm25: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    dense: Mapping[str, tuple[int, float]] | None = None
    base: Mapping[str, tuple[int, float]] | None = None
    depth: int = DEFAULT_DEPTH
    text: str = ""


def gather(bm25: Sequence[Hit], dense: Sequence[Hit] | None = None,
           base: Sequence[Hit] | None = None, *, depth: int = DEFAULT_DEPTH,
           extra: Sequence[str] = (), text: str = "") -> Candidates:
    """The union of the retrievers' top ``depth`` (BM25 first, then the dense version's, then
    the base model's), plus ``extra`` ids (labelled documents the first stage missed), for the
    query ``text``."""
    def table(hits: Sequence[Hit] | None) -> dict[str, tuple[int, float]] | None:
        if hits is None:
            return None
        return {h.doc_id: (h.rank, float(h.score)) for h in list(hits)[:depth]}

    b, d, z = table(bm25) or {}, table(dense), table(base)
    ids = list(dict.fromkeys([*b, *(d or {}), *(z or {}), *extra]))
    return Candidates(tuple(ids), b, d, z, depth, text)


class FeatureBuilder:
    """Feature vectors for one schema's (query, document) pairs.

    Args:
        query_slots: The schema's query slots, in order.
        answer_type: The answer slot's entity type.
        tagger: Answer-type entities by their dictionary forms.
        matcher: The process-wide matcher (its per-document cache is shared).
        parts: doc id -> (title, abstract).
        sibling_cited: first query entity key -> {query_key: PMIDs the KB cites for it}.
    """

    def __init__(self, query_slots: Sequence[str], answer_type: str, tagger: AnswerTagger,
                 matcher: EntityMatcher, parts: Mapping[str, tuple[str, str]],
                 sibling_cited: Mapping[str, Mapping[str, set[str]]] | None = None) -> None:
        self.query_slots = tuple(query_slots)
        self.answer_type = answer_type
        self.names = feature_names(self.query_slots)
        self.tagger = tagger
        self.matcher = matcher
        self.parts = parts
        self.sibling_cited = sibling_cited or {}
        self._tags = lru_cache(maxsize=50_000)(self._tag)

    def _tag(self, doc_id: str) -> tuple[tuple[int, int, str], ...]:
        title, abstract = self.parts.get(doc_id, ("", ""))
        return tuple(self.tagger.find(joined_text(title, abstract)))

    def matrix(self, query: Mapping[str, Sequence[Entity]], candidates: Candidates,
               query_key: str = "") -> np.ndarray:
        """One row per candidate (in ``candidates.doc_ids`` order), columns :attr:`names`."""
        top = max((s for _, s in candidates.bm25.values()), default=0.0)
        first = next((e.key for e in query.get(self.query_slots[0], ())), "") \
            if self.query_slots else ""
        siblings = {p for key, pmids in self.sibling_cited.get(first, {}).items()
                    if key != query_key for p in pmids}
        query_keys = {e.key for ents in query.values() for e in ents}
        rows = [self._row(d, query, candidates, top, siblings, query_keys)
                for d in candidates.doc_ids]
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(self.names))

    def _row(self, doc_id: str, query: Mapping[str, Sequence[Entity]], c: Candidates,
             top: float, siblings: set[str], query_keys: set[str]) -> list[float]:
        title, abstract = self.parts.get(doc_id, ("", ""))
        text = joined_text(title, abstract)
        shift = len(title) + 1 if title and abstract else (len(title) if title else 0)
        nan = math.nan
        bm_rank, bm_score = c.bm25.get(doc_id, (c.depth + 1, 0.0))
        rrf = sum(1.0 / (RRF_K + t[doc_id][0]) for t in (c.bm25, c.dense, c.base)
                  if t and doc_id in t)
        dense = c.dense.get(doc_id) if c.dense is not None else None
        base = c.base.get(doc_id) if c.base is not None else None
        row = [bm_score / top if top > 0 else 0.0, float(bm_rank), rrf,
               dense[1] if dense else nan, base[1] if base else nan, 0.0 if dense else 1.0]
        spans_by_slot: dict[str, list[Span]] = {}
        named = in_title = 0
        for slot in self.query_slots:
            spans = [s for e in query.get(slot, ()) for s in self.matcher.spans(e, text, slot)]
            spans_by_slot[slot] = spans
            t = any(s.start < shift for s in spans) if title else False
            a = any(s.start >= shift for s in spans)
            named += bool(spans)
            in_title += t
            row += [float(t), float(a), math.log1p(len(spans)),
                    float(max((_KIND.get(s.kind, 0) for s in spans), default=0)),
                    min(s.start for s in spans) / max(len(text), 1) if spans else 1.0]
        n = max(len(self.query_slots), 1)
        row += [named / n, in_title / n]
        tags = [t for t in self._tags(doc_id) if t[2] not in query_keys]
        evidence = _evidence_sentences(title, abstract, spans_by_slot, tags)
        row += [math.log1p(len({k for *_, k in tags})), float(evidence > 0),
                math.log1p(evidence)]
        row += [float(doc_id in siblings)]
        return row


def _evidence_sentences(title: str, abstract: str, spans: Mapping[str, Sequence[Span]],
                        tags: Sequence[tuple[int, int, str]]) -> int:
    """Sentences holding an answer-type entity and a mention of every query slot."""
    if not tags or not spans or not all(spans.values()):
        return 0
    count = 0
    for start, end in document_sentences(title, abstract):
        if all(any(start <= s.start < end for s in slot_spans) for slot_spans in spans.values()) \
                and any(start <= t[0] < end for t in tags):
            count += 1
    return count
