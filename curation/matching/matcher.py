"""Find where a relation's entities are mentioned in a text (highlighting and EDEL's g(e, d)).

Each entity is compiled once (:func:`curation.matching.patterns.compile_entity`): one regex per
surface form (:mod:`curation.matching.normalize`: case, hyphens, Greek letters, inflection,
residues, PTM types) plus the canonical keys of its variants (:mod:`curation.matching.variants`).
A text is searched in steps, cheapest first:

1. per form, a pre-filter: a lower-case substring every match contains ("braf", "600");
2. the form's regex (kinds ``exact``, ``synonym``, ``normalised``);
3. variant mentions near the key's anchor whose keys equal the entity's (``normalised``);
4. rapidfuzz near-spellings of long words (``fuzzy``, :mod:`curation.matching.fuzzy`), never of
   symbols: CTAG2 is not STAG2;
5. abbreviations the text defines next to a match (``abbreviation``; spans only, since a
   definition contains both forms and so never changes g).

A match inside the name of a laboratory technique ("polymerase" of "polymerase chain reaction",
:mod:`curation.matching.lab_phrases`) is no mention, in :meth:`EntityMatcher.spans` and in g.

A span is a well-formed phrase: one that would open or close a bracket outside itself
("EGF) receptor") is dropped (:func:`curation.matching.normalize.is_well_formed`).

Per-document work (lower-casing, variant scans per anchor, abbreviation windows) is cached in
the :class:`EntityMatcher` (bounded LRU), and each (form, word) fuzzy ratio is computed once, so
g over a 12k-abstract pool costs little more than the substring pre-filters. Keep one matcher
per process (e.g. ``st.cache_resource``) and reuse it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from curation.matching.abbreviations import find_abbreviations
from curation.matching.fuzzy import FuzzyVocabulary
from curation.matching.lab_phrases import in_technique, technique_spans
from curation.matching.normalize import is_well_formed
from curation.matching.patterns import (
    PTM_TYPES,
    RESIDUE_TYPES,
    VARIANT_TYPES,
    CompiledEntity,
    MatchKind,
    compile_entity,
)
from curation.matching.variants import VariantMention, scan_variants
from kb_sources.types import Document, Entity

__all__ = ["PTM_TYPES", "RESIDUE_TYPES", "VARIANT_TYPES", "CompiledEntity", "EntityMatcher",
           "MatchConfig", "MatchKind", "Span", "compile_entity", "find_spans", "mentions",
           "resolve_overlaps"]

logger = logging.getLogger(__name__)

_RANK = {kind: i for i, kind in enumerate(MatchKind)}
_SCORE = {MatchKind.EXACT: 1.0, MatchKind.SYNONYM: 1.0, MatchKind.NORMALISED: 0.95,
          MatchKind.ABBREVIATION: 0.9}


@dataclass(frozen=True)
class Span:
    """One mention of an entity: offsets into the text (title + " " + abstract).

    ``name`` (the entity's preferred name, "BRAF") and ``etype`` (its type, "gene") are what a
    highlight's tooltip shows; "" when whoever built the span did not know them.
    """

    start: int
    end: int
    slot: str
    entity_id: str
    kind: MatchKind
    score: float
    text: str
    name: str = ""
    etype: str = ""


@dataclass(frozen=True)
class MatchConfig:
    """Matcher options.

    Attributes:
        fuzzy: Run the rapidfuzz step.
        fuzzy_threshold: Minimum ``fuzz.ratio`` (0-100) of a near-spelling.
        fuzzy_min_length: Shortest word (characters) eligible for fuzzy matching.
        abbreviations: Add abbreviation spans (scispacy) in :meth:`EntityMatcher.spans`.
        cache_size: Documents whose preparation is cached.
    """

    fuzzy: bool = True
    fuzzy_threshold: float = 90.0
    fuzzy_min_length: int = 6
    abbreviations: bool = True
    cache_size: int = 20_000


@dataclass
class _Prepared:
    """Cached per-document work (internal; filled lazily)."""

    text: str
    lower: str
    variants: dict[tuple[str, frozenset[str]], tuple[VariantMention, ...]] = field(
        default_factory=dict)
    windows: dict[tuple[int, int], tuple] = field(default_factory=dict)
    techniques: tuple[tuple[int, int], ...] | None = None

    def in_technique(self, start: int, end: int) -> bool:
        """Whether [start, end) is part of a laboratory technique's name (computed once)."""
        if self.techniques is None:
            self.techniques = technique_spans(self.text, self.lower)
        return bool(self.techniques) and in_technique(start, end, self.techniques)


_Candidate = tuple[int, int, MatchKind, float]
_OPEN_AFTER = re.compile(r"\s{1,2}\(")  # "long form (SHORT)": a space before the parenthesis
_OPEN_BEFORE = re.compile(r"\s\(\s{0,2}$")
_VARIANT_WINDOW = 110  # characters around a variant anchor (the longest spelled-out forms ~70)


class EntityMatcher:
    """Finds entity mentions; holds the per-document and fuzzy-vocabulary caches.

    Example:
        >>> m = EntityMatcher()
        >>> m.mentions(Entity("V600E", "variant"), "BRAF Val600Glu was found.")
        True
    """

    def __init__(self, config: MatchConfig | None = None) -> None:
        self.config = config or MatchConfig()
        self._docs: OrderedDict[str, _Prepared] = OrderedDict()
        self._lock = threading.Lock()  # one matcher may serve several app sessions
        self._fuzzy = FuzzyVocabulary(self.config.fuzzy_threshold, self.config.fuzzy_min_length)

    # -- public API ------------------------------------------------------------------------
    def spans(self, entity: Entity, text: str | Document, slot: str = "") -> list[Span]:
        """Non-overlapping mentions of one entity in a text, sorted by offset."""
        ce = compile_entity(entity)
        doc = self._prepare(_text(text))
        candidates = self._exact_candidates(ce, doc)
        hits = self._fuzzy_words(ce, doc)
        if hits:
            candidates += [(s, e, MatchKind.FUZZY, r / 100.0)
                           for s, e, r in FuzzyVocabulary.positions(doc.text, hits)]
        candidates = [c for c in candidates if not doc.in_technique(c[0], c[1])]
        if self.config.abbreviations and candidates:
            candidates += self._abbreviation_candidates(doc, candidates)
        well_formed = [c for c in candidates if is_well_formed(doc.text[c[0]:c[1]])]
        return [Span(s, e, slot, ce.entity_id, kind, score, doc.text[s:e], ce.entity.text,
                     ce.entity.type) for s, e, kind, score in resolve_overlaps(well_formed)]

    def find_spans(self, slot_entities: Mapping[str, Sequence[Entity]],
                   text: str | Document) -> list[Span]:
        """Mentions of every entity of every slot, sorted by (start, end); slots may overlap."""
        spans = [span for slot, entities in slot_entities.items() for entity in entities
                 for span in self.spans(entity, text, slot)]
        return sorted(spans, key=lambda s: (s.start, s.end, s.slot))

    def mentions(self, entity: Entity, text: str | Document) -> bool:
        """EDEL's g(e, d): does the text mention the entity (or a synonym, or a variant of it)?"""
        ce = compile_entity(entity)
        doc = self._prepare(_text(text))
        for form in ce.patterns:
            if any(not doc.in_technique(s, e) for s, e in form.finditer(doc.text, doc.lower)):
                return True
        if ce.variant_keys and self._variant_hits(ce, doc):
            return True
        hits = self._fuzzy_words(ce, doc)
        return bool(hits) and any(not doc.in_technique(s, e)
                                  for s, e, _ in FuzzyVocabulary.positions(doc.text, hits))

    # -- steps -----------------------------------------------------------------------------
    def _prepare(self, text: str) -> _Prepared:
        """The cached preparation of a text (least recently used texts are evicted)."""
        with self._lock:
            doc = self._docs.get(text)
            if doc is not None:
                self._docs.move_to_end(text)
                return doc
            doc = self._docs[text] = _Prepared(text, text.lower())
            if len(self._docs) > self.config.cache_size:
                self._docs.popitem(last=False)
            return doc

    def _exact_candidates(self, ce: CompiledEntity, doc: _Prepared) -> list[_Candidate]:
        out: list[_Candidate] = []
        spans = [span for form in ce.patterns for span in form.finditer(doc.text, doc.lower)]
        if ce.variant_keys:
            spans += [(m.start, m.end) for m in self._variant_hits(ce, doc)]
        for start, end in spans:
            kind = ce.kind_of(doc.text[start:end])
            out.append((start, end, kind, _SCORE[kind]))
        return out

    def _variant_hits(self, ce: CompiledEntity, doc: _Prepared) -> list[VariantMention]:
        """Variant mentions of the document whose (broader) keys include one of the entity's."""
        hits: dict[tuple[int, int], VariantMention] = {}
        for anchor in ce.variant_anchors:
            for m in self._variants_near(doc, anchor, ce.variant_families):
                if not ce.variant_keys.isdisjoint(m.keys) \
                        or not ce.variant_keys.isdisjoint(m.broader):
                    hits[(m.start, m.end)] = m
        return list(hits.values())

    def _variants_near(self, doc: _Prepared, anchor: str,
                       families: frozenset[str]) -> tuple[VariantMention, ...]:
        """Variant mentions that contain ``anchor``: only windows around it are scanned."""
        cached = doc.variants.get((anchor, families))
        if cached is not None:
            return cached
        found: list[VariantMention] = []
        if len(doc.lower) != len(doc.text):  # lower() changed offsets: scan everything
            found = list(scan_variants(doc.text, families))
        else:
            for lo, hi in _windows(doc.lower, anchor, _VARIANT_WINDOW):
                found += [replace(m, start=m.start + lo, end=m.end + lo)
                          for m in scan_variants(doc.text[lo:hi], families)]
        occurrences = _occurrences(doc.lower, anchor)
        mentions = tuple(m for m in found if any(m.start <= i < m.end for i in occurrences))
        doc.variants[(anchor, families)] = mentions
        return mentions

    def _fuzzy_words(self, ce: CompiledEntity, doc: _Prepared) -> dict[str, float]:
        """Words of the document that are near-spellings of one of the entity's words."""
        if not self.config.fuzzy:
            return {}
        hits: dict[str, float] = {}
        for form in self._fuzzy.eligible(ce.fuzzy_forms):
            hits.update(self._fuzzy.find(form, doc.lower))
        return hits

    def _abbreviation_candidates(self, doc: _Prepared,
                                 found: list[_Candidate]) -> list[_Candidate]:
        out: list[_Candidate] = []
        known = [(s, e) for s, e, kind, _ in found if kind is not MatchKind.FUZZY]
        for start, end in known:
            for abbr in self._definitions_near(doc, start, end, known):
                if _covers(start, end, abbr.long_start, abbr.long_end):
                    other, case = abbr.short, 0
                elif _covers(start, end, abbr.short_start, abbr.short_end):
                    if any(abbr.long_start <= s and e <= abbr.long_end for s, e in known):
                        continue  # the "long form" holds a mention: "p.(Val600Glu) and ..."
                    other, case = abbr.long, re.IGNORECASE
                else:
                    continue
                if len(other) < 2 or any(sep in other for sep in (",", ";")):
                    continue  # "eIF4A (eIF4G, RNA, ATP)" lists partners, defines nothing
                pattern = re.compile(rf"(?<!\w){re.escape(other)}(?!\w)", case)
                out += [(m.start(), m.end(), MatchKind.ABBREVIATION,
                         _SCORE[MatchKind.ABBREVIATION]) for m in pattern.finditer(doc.text)]
        return out

    def _definitions_near(self, doc: _Prepared, start: int, end: int,
                          known: list[tuple[int, int]]) -> tuple:
        """Abbreviations defined at a match: "LONG (short)" or "long (SHORT)" (capitals = the
        match), skipped when the other form is already a match of the entity."""
        text = doc.text
        after = _OPEN_AFTER.match(text, end)
        before = _OPEN_BEFORE.search(text, max(0, start - 4), start)
        close = text.find(")", end, end + 120)
        if close < 0 or not (after or before):
            return ()
        if after:
            inner = (after.end(), close)
            if not _could_abbreviate(text[start:end], text[inner[0]:inner[1]]) \
                    or any(_covers(s, e, *inner) for s, e in known):
                return ()
            window = (max(0, start - 40), close + 1)
        else:
            if text[before.end():close].strip() != text[start:end] \
                    or any(before.start() - 2 <= e <= before.start() for _, e in known):
                return ()
            window = (max(0, start - 160), close + 1)
        if window not in doc.windows:
            doc.windows[window] = find_abbreviations(text[window[0]:window[1]], window[0])
        return doc.windows[window]


def _could_abbreviate(long: str, short: str) -> bool:
    """Schwartz-Hearst pre-check: "long (short)" can only define an abbreviation when the short
    form starts with the long form's first letter (either order: "EGFR (epidermal ...)")."""
    short, long = short.strip().lower(), long.strip().lower()
    return bool(short) and bool(long) and short[0] == long[0]


def _occurrences(lower: str, needle: str) -> list[int]:
    found, i = [], lower.find(needle)
    while i >= 0:
        found.append(i)
        i = lower.find(needle, i + 1)
    return found


def _windows(lower: str, needle: str, margin: int) -> list[tuple[int, int]]:
    """Merged [lo, hi) windows of ``margin`` characters around each occurrence of ``needle``."""
    merged: list[tuple[int, int]] = []
    for i in _occurrences(lower, needle):
        lo, hi = max(0, i - margin), min(len(lower), i + len(needle) + margin)
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def resolve_overlaps(candidates: Sequence[_Candidate]) -> list[_Candidate]:
    """Greedy non-overlapping selection: leftmost first, then longest, then best kind."""
    ordered = sorted(set(candidates), key=lambda c: (c[0], -(c[1] - c[0]), _RANK[c[2]]))
    kept: list[_Candidate] = []
    last_end = -1
    for cand in ordered:
        if cand[0] >= last_end:
            kept.append(cand)
            last_end = cand[1]
    return kept


def _covers(start: int, end: int, other_start: int, other_end: int) -> bool:
    """True when [start, end) covers at least 80 % of [other_start, other_end)."""
    overlap = min(end, other_end) - max(start, other_start)
    return overlap > 0 and overlap >= 0.8 * (other_end - other_start)


def _text(text: str | Document) -> str:
    return text.text if isinstance(text, Document) else text


def find_spans(slot_entities: Mapping[str, Sequence[Entity]], text: str | Document,
               matcher: EntityMatcher | None = None) -> list[Span]:
    """Spans of every slot's entities in a text (see :meth:`EntityMatcher.find_spans`)."""
    return (matcher or EntityMatcher()).find_spans(slot_entities, text)


def mentions(entity: Entity, doc_or_text: str | Document,
             matcher: EntityMatcher | None = None) -> bool:
    """EDEL's text-match function g(e, d) (see :meth:`EntityMatcher.mentions`)."""
    return (matcher or EntityMatcher()).mentions(entity, doc_or_text)
