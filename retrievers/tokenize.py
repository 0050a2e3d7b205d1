"""A lexical tokenizer that keeps biomedical tokens whole.

General-purpose tokenizers break ``V600E``, ``p.V600E``, ``c.1799T>A``, ``EML4-ALK`` or ``5-FU``
into meaningless pieces. Here a token is a run of word characters joined by single connectors
(``- . > +``), so those stay whole. A compound token is emitted whole *and* as its parts, so
``EML4-ALK`` also matches ``EML4 ALK`` and ``p.V600E`` matches ``V600E``.

Steps: Unicode dash variants -> ``-``; Greek letters -> names (``TNF-α`` -> ``tnf-alpha``);
lower-case; find tokens; drop stopwords (bm25s' English list by default) and one-character tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from retrievers.errors import unknown_name

#: A word-character run, optionally joined to more runs by one connector each.
_TOKEN = re.compile(r"\w+(?:[-.>+]\w+)*")
_CONNECTOR = re.compile(r"[-.>+]")
_DASHES = str.maketrans({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2212\ufe63\uff0d"})
_GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "ζ": "zeta",
    "η": "eta", "θ": "theta", "ι": "iota", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu",
    "ξ": "xi", "π": "pi", "ρ": "rho", "σ": "sigma", "τ": "tau", "φ": "phi", "χ": "chi",
    "ψ": "psi", "ω": "omega",
}
_GREEK_RE = re.compile("|".join(_GREEK))


class StopwordSet(StrEnum):
    """Named stopword lists."""

    EN = "en"  #: bm25s' English list (Lucene's 33 words), as used for the DESIGN.md yardsticks
    NONE = "none"  #: keep every word


def stopword_list(stopwords: str | Iterable[str]) -> frozenset[str]:
    """Resolve a stopword option to a set of lower-case words.

    Args:
        stopwords: A :class:`StopwordSet` name ("en", "none") or the words themselves.

    Returns:
        The stopwords.

    Raises:
        RetrieverError: An unknown list name.
    """
    if isinstance(stopwords, str):
        try:
            kind = StopwordSet(stopwords.lower())
        except ValueError:
            raise unknown_name("stopword list", stopwords, [s.value for s in StopwordSet]) from None
        if kind is StopwordSet.NONE:
            return frozenset()
        from bm25s.stopwords import STOPWORDS_EN

        return frozenset(STOPWORDS_EN)
    return frozenset(w.lower() for w in stopwords)


def normalise(text: str) -> str:
    """Unify dashes, spell out Greek letters and lower-case."""
    text = text.translate(_DASHES)
    text = _GREEK_RE.sub(lambda m: _GREEK[m.group()], text.lower())
    return text


@dataclass(frozen=True)
class BiomedTokenizer:
    """Tokenizer for BM25 over biomedical text.

    Attributes:
        stopwords: Words to drop ("en" for bm25s' English list, "none", or the words).
        split_compounds: Also emit the parts of compound tokens (``eml4-alk`` -> ``eml4``,
            ``alk``); parts shorter than ``min_length`` are left out.
        min_length: Shortest token kept.

    Example:
        >>> BiomedTokenizer()("BRAF p.V600E and EML4-ALK")
        ['braf', 'p.v600e', 'v600e', 'eml4-alk', 'eml4', 'alk']
    """

    stopwords: str | tuple[str, ...] = "en"
    split_compounds: bool = True
    min_length: int = 2
    _stop: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_stop", stopword_list(self.stopwords))

    def __call__(self, text: str) -> list[str]:
        """Tokenize one text.

        Args:
            text: Any text.

        Returns:
            Tokens in text order; compounds are followed by their parts.
        """
        out: list[str] = []
        for token in _TOKEN.findall(normalise(text)):
            if len(token) >= self.min_length and token not in self._stop:
                out.append(token)
            if self.split_compounds and _CONNECTOR.search(token):
                out.extend(
                    p for p in _CONNECTOR.split(token)
                    if len(p) >= self.min_length and p not in self._stop
                )
        return out

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Tokenize several texts."""
        return [self(t) for t in texts]
