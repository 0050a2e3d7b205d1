"""Abbreviations defined in a text ("epidermal growth factor receptor (EGFR)").

Uses scispacy's AbbreviationDetector (Schwartz & Hearst) on a blank English pipeline: the detector
needs no model download, only the tokenizer. Two kinds it misses are found by their brackets:
an abbreviation inside a name ("interleukin (IL)-6", :func:`infix_abbreviations`) and a short form
in hyphenated parts ("(GEP-NETs)", :func:`compound_abbreviations`). The pipeline loads once per
process, on first use, via an ``lru_cache``'d factory (no module-level state); scispacy is
imported lazily.
"""

from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from curation.matching.normalize import is_well_formed, unmatched_brackets

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Abbreviation:
    """One short form and the long form it abbreviates, with offsets into the text.

    Attributes:
        short: The short form as written ("EGFR").
        long: The long form as written ("epidermal growth factor receptor").
        short_start: Offset of the short form's definition (the occurrence next to the long form).
        short_end: End offset of that occurrence.
        long_start: Offset of the long form.
        long_end: End offset of the long form.
    """

    short: str
    long: str
    short_start: int
    short_end: int
    long_start: int
    long_end: int


@lru_cache(maxsize=1)
def abbreviation_pipeline() -> Any:
    """spaCy ``blank("en")`` with scispacy's ``abbreviation_detector`` (loaded once per process).

    Raises:
        ImportError: scispacy (or spaCy) is not installed; the message names the package.
    """
    try:
        import spacy
        from scispacy.abbreviation import AbbreviationDetector  # noqa: F401  (registers the pipe)
    except ImportError as exc:  # pragma: no cover - scispacy is a core dependency
        raise ImportError(
            "abbreviation detection needs scispacy and spaCy: pip install 'scispacy>=0.5.5'"
        ) from exc
    nlp = spacy.blank("en")
    nlp.add_pipe("abbreviation_detector")
    logger.debug("loaded the scispacy abbreviation detector on a blank pipeline")
    return nlp


def find_abbreviations(text: str, offset: int = 0) -> tuple[Abbreviation, ...]:
    """Abbreviation definitions in ``text``, one per (short form, long form) pair.

    Both forms are well-formed phrases: the detector may start a long form inside a parenthesis
    ("EGF) receptor" of "epidermal growth factor (EGF) receptor (EGFR)"); such a long form is
    widened to the whole phrase, or dropped when no word before the parenthesis starts with the
    short form's first letter (see :func:`balanced_long_form`).

    Args:
        text: Any text (an abstract, or a window of one).
        offset: Added to every offset (when ``text`` is a window of a longer document).

    Returns:
        Definitions in order of the long form.
    """
    if "(" not in text:
        return ()
    nlp = abbreviation_pipeline()  # first: importing spaCy installs its own warning filters
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*\[W036\]")
        doc = nlp(text)
    found: dict[tuple[str, int, int], Abbreviation] = {}
    for short in doc._.abbreviations:
        long = short._.long_form
        bounds = balanced_long_form(text, short.text, long.start_char, long.end_char)
        if bounds is None or not is_well_formed(short.text):
            logger.debug("dropped the malformed abbreviation %r = %r", short.text, long.text)
            continue
        key = (short.text, *bounds)
        candidate = Abbreviation(short.text, text[bounds[0]:bounds[1]], short.start_char + offset,
                                 short.end_char + offset, bounds[0] + offset, bounds[1] + offset)
        best = found.get(key)
        if best is None or _distance(candidate) < _distance(best):
            found[key] = candidate
    return tuple(sorted(found.values(), key=lambda a: (a.long_start, a.short_start)))


_WORD = re.compile(r"\S+")
_PHRASE_END = re.compile(r"[()\[\]]|[.;:]$")
_LOOKBACK = 160  # characters searched for the opening bracket and the first word


def balanced_long_form(text: str, short: str, start: int, end: int) -> tuple[int, int] | None:
    """Offsets of a long form whose brackets are all closed inside it, or None.

    A long form that starts inside a parenthesis ("EGF) receptor") is widened to the bracket's
    opening and then, Schwartz-Hearst style, to the nearest word before it that starts with the
    short form's first letter, within their limit of ``min(len(short) + 5, 2 * len(short))``
    words ("epidermal growth factor (EGF) receptor" for "EGFR"). A long form with a bracket
    left open, or with no such word, is None.

    Args:
        text: The text the offsets point into.
        short: The short form ("EGFR").
        start: Start offset of the detected long form.
        end: End offset of the detected long form.
    """
    if is_well_formed(text[start:end]):
        return start, end
    closers, openers = unmatched_brackets(text[start:end])
    if openers or not short[:1].isalnum():
        return None
    opening = _opening_bracket(text, start, closers)
    if opening is None:
        return None
    first = None
    for word in reversed(list(_WORD.finditer(text, max(0, opening - _LOOKBACK), opening))):
        if _PHRASE_END.search(word.group()):
            break
        if word.group()[0].lower() == short[0].lower():
            first = word.start()
            break
    max_words = min(len(short) + 5, 2 * len(short))
    if first is None or len(_WORD.findall(text, first, end)) > max_words \
            or not is_well_formed(text[first:end]):
        return None
    return first, end


def _opening_bracket(text: str, start: int, needed: int) -> int | None:
    """Offset of the ``needed``-th unclosed opening bracket before ``start``, or None."""
    depth = 0
    for i in range(start - 1, max(-1, start - 1 - _LOOKBACK), -1):
        ch = text[i]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            if depth:
                depth -= 1
                continue
            needed -= 1
            if needed == 0:
                return i
    return None


def _distance(abbreviation: Abbreviation) -> int:
    """Characters between the long form and this occurrence of the short form."""
    if abbreviation.short_start >= abbreviation.long_end:
        return abbreviation.short_start - abbreviation.long_end
    return max(0, abbreviation.long_start - abbreviation.short_end)


_INFIX = re.compile(r"\((?P<short>[A-Za-z][A-Za-z0-9]{0,9})\)(?=-?[^\W_])")
#: A parenthesised short form in hyphenated parts, with a plural "s" or not: "(GEP-NETs)".
_COMPOUND = re.compile(r"\((?P<short>[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+)\)")
#: A plural "s" after a capital, no letter of the short form ("NETs").
_PLURAL = re.compile(r"(?<=[A-Z])s$")


def infix_abbreviations(text: str, offset: int = 0) -> tuple[Abbreviation, ...]:
    """Abbreviations defined inside a name: "interleukin (IL)-6", "tumor necrosis factor
    (TNF)-alpha" (the parenthesis closes right before the name goes on, so the detector of
    :func:`find_abbreviations` sees no definition).

    The long form is, Schwartz-Hearst style, the nearest run of words before the parenthesis
    whose first word starts with the short form's first letter and that holds the short form's
    letters in order, within ``min(len(short) + 5, 2 * len(short))`` words.

    Example:
        >>> [(a.short, a.long) for a in infix_abbreviations("serum interleukin (IL)-6 rose")]
        [('IL', 'interleukin')]
    """
    found = (_bracketed(text, m, m["short"], offset) for m in _INFIX.finditer(text))
    return tuple(a for a in found if a is not None)


def compound_abbreviations(text: str, offset: int = 0) -> tuple[Abbreviation, ...]:
    """Short forms in hyphenated parts, which the detector of :func:`find_abbreviations` does
    not see (its tokenizer splits them): "gastroenteropancreatic neuroendocrine tumors
    (GEP-NETs)". The long form is found as in :func:`infix_abbreviations`; a plural "s" after
    a capital is no letter of the short form.

    Example:
        >>> t = "of gastroenteropancreatic neuroendocrine tumors (GEP-NETs) in"
        >>> [(a.short, a.long) for a in compound_abbreviations(t)]
        [('GEP-NETs', 'gastroenteropancreatic neuroendocrine tumors')]
    """
    found = (_bracketed(text, m, _PLURAL.sub("", m["short"]), offset)
             for m in _COMPOUND.finditer(text))
    return tuple(a for a in found if a is not None)


def _bracketed(text: str, m: re.Match[str], letters: str, offset: int) -> Abbreviation | None:
    """The abbreviation of the short form in ``m``'s group "short", its long form found by
    :func:`_long_form_before` for ``letters``; None without one."""
    found = _long_form_before(text, m.start(), letters)
    if found is None:
        return None
    start, long = found
    return Abbreviation(m["short"], long, m.start("short") + offset, m.end("short") + offset,
                        start + offset, start + len(long) + offset)


def _long_form_before(text: str, end: int, short: str) -> tuple[int, str] | None:
    """(offset, text) of the long form that ends before ``end``: the nearest run of words
    that starts with the short form's first letter and holds its letters in order, within
    ``min(len(short) + 5, 2 * len(short))`` words of it (letters and digits counted); None
    when there is none before a phrase ends."""
    words = list(_WORD.finditer(text, max(0, end - _LOOKBACK), end))
    n = sum(c.isalnum() for c in short)
    for word in reversed(words[-min(n + 5, 2 * n):]):
        if _PHRASE_END.search(word.group()):
            return None
        long = text[word.start():end].rstrip()
        if word.group()[0].lower() == short[0].lower() and _in_order(short, long):
            return word.start(), long
    return None


def _in_order(short: str, long: str) -> bool:
    """Whether the short form's letters and digits appear in the long form in order."""
    rest = iter(long.lower())
    return all(ch in rest for ch in short.lower() if ch.isalnum())


def abbreviation_map(text: str) -> dict[str, str]:
    """Short form -> long form for every abbreviation defined in ``text``."""
    return {a.short: a.long for a in find_abbreviations(text)}
