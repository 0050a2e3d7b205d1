"""The spellings papers use for a gene symbol (case and hyphen forms), for
:func:`curation.matching.normalize.surface_pattern`.

A KB stores a symbol in upper case (AKT1, BRAF, CASR, ERBB2); papers write it:

* as stored, or in upper case;
* capitalised ("Akt1", "Braf", "Btk") when it has 3+ letters and digits starting with a letter,
  and in lower case ("akt1", "tp53") when it also has a digit; an all-letter lower-case form
  ("braf") is left alone;
* in mixed case with a capital after its first character ("CaSR", "mTOR", "ErbB2", "PPARa",
  "GlyT1", "ExbD", "ChAT"): a spelling no English word has, so any such spelling of a symbol of
  3+ letters and digits is accepted, ordinary words included (:func:`mixed_case`, checked by
  :func:`has_inner_capital`);
* with a hyphen after the first letter ("B-Raf", "K-ras", "H-NS"; :func:`letter_split`) and
  with the "c-" prefix of a proto-oncogene ("c-Met", "c-myc"; in the pattern itself).

Symbols that are ordinary English words, amino-acid codes or other common capitalised tokens
(:data:`ORDINARY_WORDS`: MET, SET, CAT, ASP, COX ...) get neither the capitalised and lower-case
forms nor the hyphen after the first letter, so "Met in 1990", "a set of", "Ser to Asp" or "Cox
regression" never match.
"""

from __future__ import annotations

from curation.matching.ordinary_words import ORDINARY_WORDS

__all__ = ["ORDINARY_WORDS", "case_variants", "has_inner_capital", "letter_split", "mixed_case"]


def _alnum(toks: list[str]) -> str:
    return "".join(t for t in toks if t.isalnum())


def _guarded(toks: list[str]) -> bool:
    """True for symbols papers write only as stored or in upper case: shorter than 3, not
    starting with a letter, or an ordinary word."""
    alnum = _alnum(toks)
    return len(alnum) < 3 or not alnum[:1].isalpha() or alnum.lower() in ORDINARY_WORDS


def capitalised(toks: list[str]) -> list[str]:
    """The tokens with only the first letter in upper case (["AKT", "1"] -> ["Akt", "1"])."""
    return [t[:1].upper() + t[1:].lower() if i == 0 else t.lower() for i, t in enumerate(toks)]


def case_variants(toks: list[str]) -> list[list[str]]:
    """Token lists of the case forms of a symbol: as given, upper case, and (unless guarded)
    capitalised, plus lower case when it has a digit."""
    variants = [toks, [t.upper() for t in toks]]
    if not _guarded(toks):
        variants.append(capitalised(toks))
        if any(t.isdigit() for t in toks):  # akt1, tp53; an all-letter "braf" is left alone
            variants.append([t.lower() for t in toks])
    return variants


def mixed_case(toks: list[str]) -> bool:
    """Whether any spelling with a capital after its first character is accepted ("CaSR" for
    CASR, "ChAT" for CHAT): symbols of 3+ letters and digits starting with a letter and with 2+
    letters; ordinary words too, since no English word is spelled so."""
    alnum = _alnum(toks)
    return len(alnum) >= 3 and alnum[:1].isalpha() and sum(c.isalpha() for c in alnum) >= 2


def has_inner_capital(text: str) -> bool:
    """True when a letter after the first character is upper case ("CaSR", "c-erbB-2")."""
    return any(c.isupper() for c in text[1:])


def letter_split(toks: list[str]) -> tuple[str, str] | None:
    """(first letter, the rest) of an all-letter upper-case symbol of 3+ letters that papers
    also write with a hyphen after its first letter ("B-Raf" for BRAF, "H-NS" for HNS), else
    None (also for ordinary words)."""
    if len(toks) != 1 or not toks[0].isalpha() or not toks[0].isupper() or len(toks[0]) < 3:
        return None
    if toks[0].lower() in ORDINARY_WORDS:
        return None
    return toks[0][0], toks[0][1:]
