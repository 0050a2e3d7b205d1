"""Laboratory techniques whose names hold an entity word: "polymerase chain reaction".

"polymerase", "ligase", "luciferase" or "transferase" name a gene product on their own (BioRED
annotates "polymerase" as a gene), but inside the name of a laboratory technique they name the
method, not an entity the abstract is about: "by polymerase chain reaction" says nothing about a
polymerase. :func:`technique_spans` finds these names in a text; the matcher
(:mod:`curation.matching.matcher`) drops an entity match that lies in one, or crosses its edge,
unless the match covers the whole name (an entity named "Polymerase Chain Reaction", the MeSH
descriptor, still matches it).

A name is matched whole-word, case-insensitive, with any run of spaces or hyphens between its
words and an optional plural "s" ("polymerase chain reactions", "Western-blotting" is listed).
"""

from __future__ import annotations

import re
from functools import lru_cache

#: Technique names (lower case, words separated by one space) that contain an entity word.
TECHNIQUES = (
    "polymerase chain reaction",
    "ligase chain reaction",
    "ligase detection reaction",
    "ligation detection reaction",
    "recombinase polymerase amplification",
    "reverse transcriptase polymerase chain reaction",
    "reverse transcription polymerase chain reaction",
    "luciferase reporter assay",
    "luciferase reporter gene assay",
    "luciferase assay",
    "dual luciferase reporter assay",
    "dual luciferase assay",
    "terminal deoxynucleotidyl transferase dutp nick end labeling",
    "terminal deoxynucleotidyl transferase mediated dutp nick end labeling",
    "horseradish peroxidase conjugated",
    "enzyme linked immunosorbent assay",
    "western blot",
    "western blotting",
    "northern blot",
    "northern blotting",
    "southern blot",
    "southern blotting",
)


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    names = sorted(TECHNIQUES, key=len, reverse=True)
    body = "|".join(r"[\s\-]+".join(re.escape(w) for w in name.split()) for name in names)
    return re.compile(rf"(?<![\w-])(?:{body})s?(?![\w-])", re.IGNORECASE)


#: Lower-case words one of which every technique name holds (a cheap pre-filter).
ANCHORS = ("reaction", "assay", "blot", "labeling", "amplification", "conjugated")


def technique_spans(text: str, lower: str | None = None) -> tuple[tuple[int, int], ...]:
    """``(start, end)`` of each technique name in ``text`` (:data:`TECHNIQUES`), in order;
    ``lower`` is ``text.lower()`` when the caller has it.

    Example:
        >>> technique_spans("Tested by polymerase chain reaction (PCR).")
        ((10, 35),)
    """
    lower = text.lower() if lower is None else lower
    if not any(a in lower for a in ANCHORS):
        return ()
    return tuple(m.span() for m in _pattern().finditer(text))


def in_technique(start: int, end: int, spans: tuple[tuple[int, int], ...]) -> bool:
    """True when [start, end) overlaps a technique name without covering all of it."""
    return any(s < end and start < e and not (start <= s and e <= end) for s, e in spans)


def mentions_technique(text: str) -> bool:
    """True when ``text`` contains a technique name ("polymerase chain reaction (PCR)")."""
    return _pattern().search(text) is not None
