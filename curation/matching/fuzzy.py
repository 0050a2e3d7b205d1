"""Near-spellings of long words ("vemurafinib" for "vemurafenib") with rapidfuzz.

Fuzzy matching is for words only, never for symbols (the matcher passes only lower-case words of
at least ``min_length`` letters), so CTAG2 can never match STAG2. A hit must reach
``fuzz.ratio >= threshold`` and keep the first letter and the last two letters (a plural "s"
aside), which rejects different words that differ in a suffix ("cholesterol"/"cholesteryl").

Cost: a document is only searched when it contains one of the form's pigeonhole chunks (with at
most d edits, one of d + 1 chunks of the form survives intact), then only words with the form's
first and last letters and a close length are scored, each (form, word) pair once; so g over a
large pool stays cheap.
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz

_WORD = re.compile(r"[^\W\d_]+")


def is_near_spelling(form: str, word: str) -> bool:
    """Rules a fuzzy hit must pass besides the ratio: another word with the same first letter
    and the same last two letters (a plural "s" aside)."""
    if word == form or word[:1] != form[:1]:
        return False
    return word.rstrip("s")[-2:] == form.rstrip("s")[-2:]


def max_edits(form: str, threshold: float) -> int:
    """Largest indel distance of a word whose ``fuzz.ratio`` with ``form`` reaches threshold."""
    t = threshold / 100.0
    return int(2 * len(form) * (1 - t) / t + 1e-9) if t > 0 else len(form)


def pigeonhole_chunks(form: str, threshold: float) -> tuple[str, ...]:
    """Substrings of ``form`` of which every near-spelling contains at least one.

    ``fuzz.ratio >= t`` bounds the indel distance d by ``2 * len(form) * (1 - t) / t``; d edits
    touch at most d characters, so one of d + 1 consecutive chunks is left intact. Returns ()
    when the chunks would be shorter than two characters (no useful pre-filter).
    """
    parts = max_edits(form, threshold) + 1
    size = len(form) // parts
    if size < 2:
        return ()
    bounds = [round(i * len(form) / parts) for i in range(parts + 1)]
    return tuple(form[bounds[i]:bounds[i + 1]] for i in range(parts))


class FuzzyVocabulary:
    """Near-spellings of forms in documents, with every (form, word) ratio computed once.

    Args:
        threshold: Minimum ``fuzz.ratio`` (0-100).
        min_length: Shortest form (characters) that gets fuzzy matching.
    """

    def __init__(self, threshold: float = 90.0, min_length: int = 6) -> None:
        self.threshold = threshold
        self.min_length = min_length
        self._forms: dict[str, tuple[tuple[str, ...], re.Pattern[str]]] = {}
        self._scores: dict[tuple[str, str], float] = {}

    def eligible(self, forms: tuple[str, ...]) -> list[str]:
        """The forms long enough for fuzzy matching."""
        return [f for f in forms if len(f) >= self.min_length]

    def _compiled(self, form: str) -> tuple[tuple[str, ...], re.Pattern[str]]:
        """Pigeonhole chunks and a candidate-word regex (same first and last letters)."""
        compiled = self._forms.get(form)
        if compiled is None:
            chunks = pigeonhole_chunks(form, self.threshold)
            edits = max_edits(form, self.threshold)
            stem = form[:-1] if form.endswith("s") else form
            lo, hi = max(0, len(stem) - 3 - edits), len(stem) - 3 + edits
            first = re.escape(stem[0])  # a literal first: re's fast prefix search
            pattern = re.compile(rf"{first}(?<![^\W\d_]{first})[^\W\d_]{{{lo},{hi}}}"
                                 rf"{re.escape(stem[-2:])}s?(?![^\W\d_])")
            compiled = self._forms[form] = (chunks, pattern)
        return compiled

    def find(self, form: str, lower: str) -> dict[str, float]:
        """Near-spellings of ``form`` among the words of a lower-cased text -> ratio."""
        chunks, pattern = self._compiled(form)
        if chunks and not any(c in lower for c in chunks):
            return {}
        hits: dict[str, float] = {}
        for word in set(pattern.findall(lower)):
            score = self._scores.get((form, word))
            if score is None:
                ratio = fuzz.ratio(form, word, score_cutoff=self.threshold)
                score = ratio if ratio and is_near_spelling(form, word) else 0.0
                self._scores[(form, word)] = score
            if score:
                hits[word] = score
        return hits

    @staticmethod
    def positions(text: str, hits: dict[str, float]) -> list[tuple[int, int, float]]:
        """(start, end, ratio) of every word of ``text`` whose lower case is in ``hits``."""
        return [(m.start(), m.end(), hits[m.group().lower()])
                for m in _WORD.finditer(text) if m.group().lower() in hits]
