"""Evidence sentences: where the query entities and an answer meet within one sentence.

Under each result card the curator reads the sentence(s) naming a query entity (BRAF, V600E)
together with an answer-slot entity (a known or candidate treatment), so the abstract can be
judged without reading all of it.

Sentences come from a rule-based splitter (:func:`split_sentences`), written for abstracts. A
sentence ends at ".", "!" or "?" (with any closing quotes or brackets) followed by white space,
or at a blank line, unless the next word shows that it goes on:

* a plain lower-case word never starts a sentence ("E. coli", "et al. reported", "10 pts. and");
  a lower-case word with a capital or a digit does ("mTOR", "p53", "miR-21", "cAMP"), as does a
  Greek letter ("β-catenin");
* after an abbreviation of :data:`NEVER_LAST` ("e.g.", "i.e.", "vs.", "cf.", "et al.", "Fig.",
  "approx.", "ca.", "U.S.") the sentence always goes on;
* before a digit it goes on also after :data:`NOT_BEFORE_DIGIT` ("No. 5", "pts. 20") and dotted
  abbreviations ("b.i.d. 3"), else a digit starts a sentence.

A full stop with no white space after it never ends a sentence: decimals ("1.5", "P = .03"),
mutation names ("p.V600E", "c.1799T>A"). A single capital before a full stop is not taken for an
initial ("vitamin D. The" ends a sentence; abstracts name genes and vitamins, rarely people).
The title and the abstract are split separately: a sentence never spans both.
pysbd (installed with scispacy) was tried and left: it splits enumerations mid-sentence
("confirmed (i) by ... (ii) by"), after "approx." and "pts.", and takes 15-40 ms per abstract
(this splitter: well under 1 ms); spaCy's sentencizer splits after "Fig." and "et al.".

Selection (:func:`select_evidence`): a sentence qualifies when it contains (whole spans only) at
least one query-slot span and one answer-slot span; the best come first: more distinct query
slots, then more distinct answer entities, then earlier in the text; at most ``limit``. When no
sentence qualifies, the one sentence with the most query slots (then query entities, then the
earliest) is returned instead, marked by ``co_occurs`` False, so the curator still sees where the
query entities are discussed and that no answer is named with them; nothing when no sentence
mentions a query entity.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from curation.matching.highlight import render_highlighted
from curation.matching.matcher import Span
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Evidence sentences shown per document.
DEFAULT_LIMIT = 2
#: Abbreviations (lower case, without the final ".") that never end a sentence.
NEVER_LAST = frozenset({
    "al", "approx", "ca", "cf", "dr", "e.g", "eq", "eqs", "fig", "figs", "i.e", "mr", "mrs", "ms",
    "prof", "ref", "refs", "st", "u.k", "u.s", "viz", "vs"})
#: Abbreviations that end a sentence before a capital but not before a digit.
NOT_BEFORE_DIGIT = frozenset({
    "etc", "hr", "hrs", "incl", "max", "min", "mo", "mos", "no", "nos", "pt", "pts", "resp",
    "sec", "sp", "spp", "vol", "wk", "wks", "yr", "yrs"})
_STOP = re.compile(r"(?P<stop>[.!?])[\"'\u201d\u2019)\]]*(?=\s)|(?P<blank>\n[^\S\n]*\n)")
_WORD_BEFORE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z][A-Za-z.]*$")
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_NEXT_WORD = re.compile(r"\S+")
_MARK_TAG = re.compile(r"<mark\b[^>]*>")
_SLOT_ATTR = re.compile(r'\bdata-slot="([^"]*)"')
_COLOUR_ATTR = re.compile(r'\bstyle="background-color:([^";]*)')
_SLOTS_ATTR = re.compile(r'\bdata-slots="([^"]*)"')
_BANDS = re.compile(r"background-image:linear-gradient\(to bottom,([^\"]*)\)")
_BAND_COLOUR = re.compile(r"(?:^|,)([^,\s]+) [\d.]+% [\d.]+%")


@dataclass(frozen=True)
class Evidence:
    """One evidence sentence of a document.

    Attributes:
        start: Offset of the sentence in the document text (``title + " " + abstract``).
        end: End offset (exclusive).
        query_slots: The distinct query slots mentioned in it, in the order given to
            :func:`select_evidence`.
        answers: Entity ids of the answer-slot mentions in it, first-seen order (empty for a
            sentence that names only query entities).
    """

    start: int
    end: int
    query_slots: tuple[str, ...]
    answers: tuple[str, ...]

    @property
    def co_occurs(self) -> bool:
        """A query entity and an answer in the same sentence."""
        return bool(self.query_slots and self.answers)


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence offsets ``(start, end)`` of ``text``, in order, without surrounding white space
    (rules: module docstring).

    Example:
        >>> t = "BRAF p.V600E (e.g. in melanoma) vs. wild type. Approx. 40% responded."
        >>> [t[s:e] for s, e in split_sentences(t)]
        ['BRAF p.V600E (e.g. in melanoma) vs. wild type.', 'Approx. 40% responded.']
    """
    return list(_split_cached(text))


@lru_cache(maxsize=4096)
def _split_cached(text: str) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    start = 0
    for match in _STOP.finditer(text):
        if match.group("stop") and not _ends_sentence(text, match):
            continue
        _add_stripped(out, text, start, match.start() if match.group("blank") else match.end())
        start = match.end()
    _add_stripped(out, text, start, len(text))
    return tuple(out)


def _add_stripped(out: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    core = piece.strip()
    if core:
        first = start + len(piece) - len(piece.lstrip())
        out.append((first, first + len(core)))


def _ends_sentence(text: str, stop: re.Match[str]) -> bool:
    """Whether the stop (".", "!" or "?" with its closers, white space after it) ends a
    sentence, judged by the next word and, for ".", the word before it."""
    following = _NEXT_WORD.search(text, stop.end())
    if following is None:
        return True
    word = following.group().lstrip("\"'\u201c\u2018([")
    first = word[:1]
    if first.islower() and not any(c.isupper() or c.isdigit() for c in word) \
            and not "\u0370" <= first <= "\u03ff":
        return False  # a plain lower-case word goes on the sentence
    if stop.group("stop") != ".":
        return True
    before = _WORD_BEFORE.search(text, max(0, stop.start() - 30), stop.start())
    abbreviation = before.group().lower() if before else ""
    if abbreviation in NEVER_LAST:
        return False
    if first.isdigit():
        return abbreviation not in NOT_BEFORE_DIGIT and not _DOTTED.fullmatch(abbreviation)
    return True


def document_sentences(title: str, abstract: str) -> list[tuple[int, int]]:
    """Sentence offsets into the document text (``title + " " + abstract``, or whichever is
    not empty, as :attr:`kb_sources.types.Document.text`): the title's, then the abstract's."""
    if not title or not abstract:
        return split_sentences(title or abstract)
    shift = len(title) + 1
    return split_sentences(title) + [(s + shift, e + shift) for s, e in split_sentences(abstract)]


def select_evidence(
    sentences: Sequence[tuple[int, int]],
    spans: Sequence[Span],
    query_slots: Sequence[str],
    answer_slot: str,
    limit: int = DEFAULT_LIMIT,
) -> tuple[Evidence, ...]:
    """The sentences where a query entity and an answer co-occur, best first (rules: module
    docstring), or the one sentence with the most query entities when none does.

    Args:
        sentences: Sentence offsets (:func:`document_sentences`).
        spans: Entity mentions with slot names (:meth:`EntityMatcher.find_spans`), same offsets.
        query_slots: The schema's query slots ("gene", "variant").
        answer_slot: The schema's answer slot ("treatment").
        limit: Most co-occurrence sentences returned (0: none).

    Raises:
        CurationError: A negative ``limit``.
    """
    if limit < 0:
        raise CurationError(f"Evidence limit {limit} is negative; ask for 0 or more sentences "
                            f"(default {DEFAULT_LIMIT})")
    scored: list[tuple[Evidence, int]] = []
    for start, end in sentences:
        inside = [s for s in spans if start <= s.start and s.end <= end]
        slots = tuple(q for q in query_slots if any(s.slot == q for s in inside))
        if not slots:
            continue
        answers = tuple(dict.fromkeys(s.entity_id for s in inside if s.slot == answer_slot))
        n_query = len({(s.slot, s.entity_id) for s in inside if s.slot in slots})
        scored.append((Evidence(start, end, slots, answers), n_query))
    both = [e for e, _ in scored if e.answers]
    if both:
        both.sort(key=lambda e: (-len(e.query_slots), -len(e.answers), e.start))
        return tuple(both[:limit])
    scored.sort(key=lambda item: (-len(item[0].query_slots), -item[1], item[0].start))
    return tuple(e for e, _ in scored[:min(limit, 1)])


def find_evidence(title: str, abstract: str, spans: Sequence[Span], query_slots: Sequence[str],
                  answer_slot: str, limit: int = DEFAULT_LIMIT) -> tuple[Evidence, ...]:
    """:func:`select_evidence` over the sentences of a title and abstract (not split at all
    when no span is of a query slot: there is no evidence to find)."""
    if not any(s.slot in query_slots for s in spans):
        return ()
    return select_evidence(document_sentences(title, abstract), spans, query_slots, answer_slot,
                           limit)


def render_evidence(
    text: str,
    evidence: Sequence[Evidence],
    spans: Sequence[Span],
    slot_colours: Mapping[str, str] | None = None,
    enabled_slots: Collection[str] | None = None,
) -> str:
    """Escaped HTML of the evidence sentences with their spans marked as in the abstract.

    Args:
        text: The document text the offsets point into (untrusted: every character escaped).
        evidence: From :func:`select_evidence`.
        spans: The document's spans (offsets into ``text``).
        slot_colours: Slot -> CSS colour (:func:`curation.matching.highlight.render_highlighted`).
        enabled_slots: Slots to highlight (default: all).

    Returns:
        ``<div class="kb-evidence">`` with a small label ("Evidence", or "Query entities only"
        for a sentence without an answer) and one ``kb-evidence-sentence`` per sentence; "" when
        ``evidence`` is empty.

    Raises:
        CurationError: A colour is not a CSS colour literal.
    """
    if not evidence:
        return ""
    sentences = []
    for ev in evidence:
        inside = [replace(s, start=s.start - ev.start, end=s.end - ev.start)
                  for s in spans if ev.start <= s.start and s.end <= ev.end]
        marked = render_highlighted("", text[ev.start:ev.end], inside, slot_colours,
                                    enabled_slots)
        sentences.append(f'<div class="kb-evidence-sentence">{marked}</div>')
    if all(ev.co_occurs for ev in evidence):
        head = '<div class="kb-evidence"><span class="kb-evidence-label">Evidence</span>'
    else:
        head = ('<div class="kb-evidence kb-evidence-weak"><span class="kb-evidence-label">'
                "Query entities only (no answer in the same sentence)</span>")
    return head + "".join(sentences) + "</div>"


def mark_colours(highlighted: str) -> dict[str, str]:
    """Slot -> colour of the ``<mark>`` tags in HTML from
    :func:`~curation.matching.highlight.render_highlighted` (first mark of a slot wins): the
    slots switched on there and their colours; a mark of several slots (``data-slots``, colour
    bands) gives each of them its band's colour."""
    out: dict[str, str] = {}
    for tag in _MARK_TAG.findall(highlighted):
        slot, colour = _SLOT_ATTR.search(tag), _COLOUR_ATTR.search(tag)
        slots, bands = _SLOTS_ATTR.search(tag), _BANDS.search(tag)
        if slots and bands:
            names = html.unescape(slots.group(1)).split(" ")
            colours = _BAND_COLOUR.findall(bands.group(1))
            if len(names) == len(colours):
                for name, band in zip(names, colours, strict=True):
                    out.setdefault(name, band)
                continue
        if slot and colour:
            out.setdefault(html.unescape(slot.group(1)), colour.group(1))
    return out
