"""Abbreviations defined in a text ("epidermal growth factor receptor (EGFR)").

Uses scispacy's AbbreviationDetector (Schwartz & Hearst) on a blank English pipeline: the detector
needs no model download, only the tokenizer. The pipeline loads once per process, on first use, via
an ``lru_cache``'d factory (no module-level state); scispacy is imported lazily.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

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
        key = (short.text, long.start_char, long.end_char)
        candidate = Abbreviation(short.text, long.text, short.start_char + offset,
                                 short.end_char + offset, long.start_char + offset,
                                 long.end_char + offset)
        best = found.get(key)
        if best is None or _distance(candidate) < _distance(best):
            found[key] = candidate
    return tuple(sorted(found.values(), key=lambda a: (a.long_start, a.short_start)))


def _distance(abbreviation: Abbreviation) -> int:
    """Characters between the long form and this occurrence of the short form."""
    if abbreviation.short_start >= abbreviation.long_end:
        return abbreviation.short_start - abbreviation.long_end
    return max(0, abbreviation.long_start - abbreviation.short_end)


def abbreviation_map(text: str) -> dict[str, str]:
    """Short form -> long form for every abbreviation defined in ``text``."""
    return {a.short: a.long for a in find_abbreviations(text)}
