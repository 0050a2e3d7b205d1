"""Pure normalisation of biomedical surface forms into regular expressions and keys.

The matcher (:mod:`curation.matching.matcher`) never compares strings directly: every surface form
of an entity is turned into a regular expression that accepts the spellings curators treat as equal.

* Case: words match case-insensitively; symbols in their own case, upper case, and the forms
  papers use (:mod:`curation.matching.symbols`): capitalised ("Akt1", "Braf"), lower case when
  they have a digit ("akt1"), mixed case ("CaSR", "mTOR", "ErbB2"), never for symbols that are
  ordinary words (MET, SET, CAT), so English words do not collide; "B-Raf" / "K-ras" for BRAF /
  KRAS, and the "c-" prefix ("c-Met", "c-MYC"). A symbol ending in a letter is not the start
  of a numbered one: FGFR is not found in "FGFR-4", nor PAR in "PAR-1".
* Hyphens and spaces: "TNF-alpha" = "TNF alpha" = "TNFalpha"; "HNF-6" = "HNF6" = "HNF 6".
* Greek letters: "TNF-alpha" = "TNFα", "PKCdelta" = "PKCδ".
* Simple inflection: "kinase" = "kinases", "therapy" = "therapies", "ERK" = "ERKs".
* Residues: S473 = Ser473 = Ser-473 = Ser 473 = serine 473 = pS473.
* PTM types: phosphorylation = phosphorylated = phosphorylates = phospho- = phosphoserine;
  acetylation, methylation, ubiquitination/ubiquitylation, sumoylation and every "-ylation".

Variants (V600E = Val600Glu = p.V600E ...) live in :mod:`curation.matching.variants`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from curation.matching.symbols import (
    capitalised,
    case_variants,
    letter_split,
    mixed_case,
)

#: Greek letters and their spelled-out names (lower and upper case letters).
GREEK: dict[str, str] = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "ζ": "zeta",
    "η": "eta", "θ": "theta", "ι": "iota", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu",
    "ξ": "xi", "ο": "omicron", "π": "pi", "ρ": "rho", "σ": "sigma", "ς": "sigma", "τ": "tau",
    "υ": "upsilon", "φ": "phi", "χ": "chi", "ψ": "psi", "ω": "omega", "Δ": "delta",
    "Γ": "gamma", "Λ": "lambda", "Σ": "sigma", "Φ": "phi", "Ψ": "psi", "Ω": "omega",
}
_NAME_TO_GREEK: dict[str, str] = {}
for _char, _name in GREEK.items():
    _NAME_TO_GREEK[_name] = _NAME_TO_GREEK.get(_name, "") + _char
#: Greek names, longest first (so "epsilon" is tried before "psi").
_GREEK_NAMES = sorted(_NAME_TO_GREEK, key=len, reverse=True)

#: (one-letter code, three-letter code, full names) of the amino acids.
AMINO_ACIDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("A", "Ala", ("alanine",)), ("R", "Arg", ("arginine",)), ("N", "Asn", ("asparagine",)),
    ("D", "Asp", ("aspartic acid", "aspartate")), ("C", "Cys", ("cysteine",)),
    ("Q", "Gln", ("glutamine",)), ("E", "Glu", ("glutamic acid", "glutamate")),
    ("G", "Gly", ("glycine",)), ("H", "His", ("histidine",)), ("I", "Ile", ("isoleucine",)),
    ("L", "Leu", ("leucine",)), ("K", "Lys", ("lysine",)), ("M", "Met", ("methionine",)),
    ("F", "Phe", ("phenylalanine",)), ("P", "Pro", ("proline",)), ("S", "Ser", ("serine",)),
    ("T", "Thr", ("threonine",)), ("W", "Trp", ("tryptophan",)), ("Y", "Tyr", ("tyrosine",)),
    ("V", "Val", ("valine",)),
)
THREE_TO_ONE: dict[str, str] = {three.lower(): one for one, three, _ in AMINO_ACIDS}
NAME_TO_ONE: dict[str, str] = {n: one for one, _, names in AMINO_ACIDS for n in names}
ONE_TO_THREE: dict[str, str] = {one: three for one, three, _ in AMINO_ACIDS}

SEP = r"[\s\-\u2010-\u2015]{0,2}"
"""Optional separator between two tokens of a form (spaces and hyphens of any kind)."""
LEFT = r"(?<!\w)"
RIGHT = r"(?!\w)"
_TOKEN = re.compile(r"[^\W\d_]+|\d+|[^\w\s]|_")
_INFLECT_MIN = 3
_HYPHENS = "-\u2010\u2011\u2012\u2013\u2014\u2015"


_CLOSING = {")": "(", "]": "["}
_OPENING = frozenset(_CLOSING.values())


def unmatched_brackets(text: str) -> tuple[int, int]:
    """(closing brackets without their opening one, opening brackets left open) in ``text``.

    A well-formed phrase has (0, 0): "factor (EGF) receptor" does, "EGF) receptor" has (1, 0)
    and "receptor (EGFR" (0, 1). Round and square brackets count; a closing bracket of the
    other kind than the one open counts as unmatched.

    >>> unmatched_brackets("EGF) receptor")
    (1, 0)
    """
    stack: list[str] = []
    closers = 0
    for ch in text:
        if ch in _OPENING:
            stack.append(ch)
        elif ch in _CLOSING:
            if stack and stack[-1] == _CLOSING[ch]:
                stack.pop()
            else:
                closers += 1
    return closers, len(stack)


def is_well_formed(text: str) -> bool:
    """True when every bracket of ``text`` is closed inside it (see :func:`unmatched_brackets`)."""
    if not any(ch in _CLOSING or ch in _OPENING for ch in text):
        return True
    return unmatched_brackets(text) == (0, 0)


def fold_greek(text: str) -> str:
    """Greek letters spelled out, as separate tokens ("TNFα" -> "TNF alpha ")."""
    if not any(ch in GREEK for ch in text):
        return text
    return "".join(f" {GREEK[ch]} " if ch in GREEK else ch for ch in text)


def fold(text: str) -> str:
    """Comparison key of a surface form: Greek spelled out, lower case, only letters and digits.

    >>> fold("TNF-α") == fold("TNF alpha") == fold("tnfalpha")
    True
    """
    return re.sub(r"[\W_]+", "", fold_greek(text).lower())


def is_symbol(form: str) -> bool:
    """True for gene-symbol-like forms that must keep their case ("BRAF", "p53", "HNF-6").

    A symbol has no spaces and either a digit or at least two upper-case letters; words
    ("Langerin", "insulin", "c-myc", "epidermal growth factor") are matched case-insensitively.
    """
    stripped = form.strip()
    if not stripped or any(ch.isspace() for ch in stripped):
        return False
    uppers = sum(ch.isupper() for ch in stripped)
    return any(ch.isdigit() for ch in stripped) or uppers >= 2


def split_greek_suffix(token: str) -> list[str]:
    """Split a spelled-out Greek suffix off a symbol token ("TNFalpha" -> ["TNF", "alpha"])."""
    low = token.lower()
    for name in _GREEK_NAMES:
        head = token[: len(token) - len(name)]
        if low.endswith(name) and len(head) >= 2 and any(c.isupper() for c in head):
            return [head, token[len(head):]]
    return [token]


def tokens(form: str) -> list[str]:
    """Tokens of a form: letter runs, digit runs and single punctuation characters."""
    out: list[str] = []
    for tok in _TOKEN.findall(fold_greek(form)):
        if tok in _HYPHENS:
            continue
        out.extend(split_greek_suffix(tok) if tok.isalpha() else [tok])
    return out


@dataclass(frozen=True)
class SurfacePattern:
    """A compile-ready regular expression for one surface form.

    Attributes:
        source: Regex source, including the word boundaries.
        anchor: A lower-case substring every match contains (a cheap pre-filter), or "".
        on_lower: ``source`` is written for the lower-cased text (words, and symbols before
            their case check); it then starts with a literal, which ``re`` searches fast.
        strict: For symbols: a case-sensitive regex the original text must match at the same
            offsets ("CAT" but not "cat").
        mixed: For symbols: a match that fails ``strict`` is still accepted when a letter after
            its first character is upper case ("CaSR" for CASR; :mod:`curation.matching.symbols`).
    """

    source: str
    anchor: str
    on_lower: bool = False
    strict: str | None = None
    mixed: bool = False


def surface_pattern(form: str, *, inflect: bool = True) -> SurfacePattern | None:
    """Regular expression accepting the spellings of ``form`` that curators treat as equal.

    Args:
        form: A surface form ("TNF-alpha", "BRAF", "epidermal growth factor receptor").
        inflect: Also accept a plural / simple inflection of the last word.

    Returns:
        The pattern, or None for a form with fewer than two letters or digits.
    """
    toks = tokens(form)
    if sum(len(t) for t in toks if t.isalnum()) < 2:
        return None
    symbol = is_symbol(form)
    suffix = _plural(toks[-1], symbol) if inflect else ""
    lower = [t.lower() for t in toks]
    right = _symbol_right(lower) if symbol else RIGHT
    source = _left_bounded(lower, _body(lower, suffix)) + right
    anchor = _anchor(toks, bool(suffix))
    if not symbol:
        return SurfacePattern(source, anchor, on_lower=True)
    variants = case_variants(toks)
    split = letter_split(toks)
    if split:  # B-Raf, B-RAF, K-ras for BRAF, KRAS
        head, rest = split
        variants += [[head, rest], [head, rest.capitalize()], [head, rest.lower()]]
        source = _left_bounded(lower, "(?:" + _body(lower, suffix) + "|"
                               + _body([head.lower(), rest.lower()], suffix) + ")") + right
        anchor = anchor if anchor in rest.lower() else rest.lower()
    strict = "|".join(dict.fromkeys(_body(v, suffix) for v in variants))
    if toks[0][:1].isalpha():  # "c-Met", "c-MYC": the cellular-gene prefix of a proto-oncogene
        source = f"(?:c[{_HYPHENS}])?" + source
        after_c = "|".join(dict.fromkeys(_body(v, suffix) for v in (
            *variants, capitalised(toks), [t.lower() for t in toks])))
        strict = f"[cC][{_HYPHENS}](?:{after_c})|(?:{strict})"
    return SurfacePattern(source, anchor, on_lower=True,
                          strict=f"{LEFT}(?:{strict}){_symbol_right(toks)}",
                          mixed=mixed_case(toks))


def _body(toks: list[str], suffix: str) -> str:
    parts = [_token_regex(tok) for tok in toks]
    if suffix == "ies":
        parts[-1] = re.escape(toks[-1][:-1]) + "(?:y|ies)"
    elif suffix:
        parts[-1] += suffix
    return SEP.join(parts)


def _left_bounded(toks: list[str], body: str) -> str:
    """``body`` with a left word boundary; after its first character when that is a literal."""
    first = toks[0]
    if first.isalnum() and not _is_greek_name(first) and body.startswith(first[0]):
        return rf"{first[0]}(?<!\w{re.escape(first[0])}){body[1:]}"
    return LEFT + body


def _plural(last: str, symbol: bool) -> str:
    """Regex suffix of the plural / simple inflection of a form's last token ("" for none)."""
    if not last.isalpha() or _is_greek_name(last):
        return ""
    if symbol:
        return "s?" if last[-1:].isupper() and len(last) >= 2 else ""
    if len(last) < _INFLECT_MIN:
        return ""
    if last.lower().endswith("y") and len(last) >= 4:
        return "ies"
    return "(?:e?s)?"


def _is_greek_name(tok: str) -> bool:
    return tok.lower() in _NAME_TO_GREEK and (len(tok) >= 3 or tok.islower())


def _token_regex(tok: str) -> str:
    if _is_greek_name(tok):
        low = tok.lower()
        return f"(?i:{low}|[{_NAME_TO_GREEK[low]}])"
    if tok.isalnum():
        return re.escape(tok)
    if tok in "'’‘":
        return "['’‘]?"
    return re.escape(tok)


def _symbol_right(toks: list[str]) -> str:
    # "BRAFV600E": a symbol may be glued to a one-letter protein change that follows it;
    # "FGFR-4", "PAR-1": a symbol ending in a letter followed by "-<number>" is another symbol
    # (but "MDMX-14-3-3" names MDMX and 14-3-3).
    if not toks[-1].isalpha():
        return RIGHT
    letter = "a-z" if toks[-1].islower() else "A-Z"
    numbered = rf"[{_HYPHENS}]\d+(?!\d)(?![{_HYPHENS}]\d)"
    return rf"(?:{RIGHT}(?!{numbered})|(?=[{letter}]\d+[{letter}*]{RIGHT}))"


def _anchor(toks: list[str], inflected: bool) -> str:
    candidates = [t.lower() for t in toks if t.isalnum() and not _is_greek_name(t)]
    if not candidates:
        return ""
    best = max(candidates, key=len)
    if inflected and best == candidates[-1] and best.endswith("y") and len(best) >= 4:
        best = best[:-1]
    return best


# ------------------------------------------------------------------------------------ residues

_AA3 = "|".join(three for _, three, _ in AMINO_ACIDS)
_AA_NAMES = "|".join(n for _, _, names in AMINO_ACIDS for n in names)
_RESIDUE = re.compile(
    rf"^\s*(?:p-?)?(?:(?P<one>[A-Z])|(?P<three>{_AA3})|(?P<name>{_AA_NAMES}))"
    r"(?:\s*-?\s*|\s+(?:residue\s+)?|\s*\()(?P<pos>\d+)\)?\s*$",
    re.IGNORECASE,
)


def parse_residue(text: str) -> tuple[str, int] | None:
    """(one-letter amino acid, position) of a residue ("Ser-473" -> ("S", 473)), else None."""
    m = _RESIDUE.match(text)
    if not m:
        return None
    if m["one"]:
        one = m["one"].upper()
        if one not in ONE_TO_THREE or not m["one"].isupper():
            return None
    elif m["three"]:
        one = THREE_TO_ONE[m["three"].lower()]
    else:
        one = NAME_TO_ONE[m["name"].lower()]
    return one, int(m["pos"])


def residue_pattern(one: str, position: int) -> SurfacePattern:
    """Regex for a residue in all its spellings: S473, Ser473, Ser-473, Ser(473), serine 473.

    The residue is a whole token, a phospho prefix aside: pS65 and p-Ser65 are Ser65, while
    S65A and Ser65Ala (a substitution of it) and S650 are not.
    """
    three = ONE_TO_THREE[one]
    names = "|".join(n.replace(" ", r"\s") for o, _, ns in AMINO_ACIDS if o == one for n in ns)
    spelled = rf"(?:{three}|{three.upper()}|(?i:{names}))"
    source = (
        rf"(?<![A-Za-z0-9])(?:p-?)?(?:{one}{position}|{spelled}\({position}\)|"
        rf"{spelled}(?:\s?-?\s?|\s+residue\s+){position})(?![A-Za-z0-9])"
    )
    return SurfacePattern(source, str(position))


# ------------------------------------------------------------------------------------ PTM types

#: PTM stem -> (all "-ation" stems of the type, prefix form, whether "prefix-" alone counts).
_PTM_EXTRA: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "phosphoryl": (("phosphoryl",), "phospho", True),
    "acetyl": (("acetyl",), "acetyl", False),
    "methyl": (("methyl",), "methyl", False),
    "ubiquitin": (("ubiquitin", "ubiquityl"), "", False),
    "ubiquityl": (("ubiquitin", "ubiquityl"), "", False),
}
_PTM_QUANT = r"(?:(?:mono|di|tri|poly|multi|hyper|hypo|auto|trans|co)-?)?"
_PTM_SUFFIX = r"(?:ations?|ated|ates?|ating|atable)"
_PTM_TARGETS = (r"(?:ser(?:ine)?|thr(?:eonine)?|tyr(?:osine)?|his(?:tidine)?|lys(?:ine)?|"
                r"arg(?:inine)?|asp(?:artate)?|cys(?:teine)?|[STYHKR]\d|protein|peptide|site|"
                r"proteom|amino)")
_PTM_TEXT = re.compile(r"^\s*(?:[A-Za-z]\d*-)?(?P<stem>[\w-]+?)(?:ations?|ated|ates?|ating)\s*$",
                       re.IGNORECASE)
_PTM_MODRES = (("phospho", "phosphoryl"), ("acetyl", "acetyl"), ("methyl", "methyl"),
               ("ubiquit", "ubiquityl"), ("sumo", "sumoyl"), ("glcnac", "glcnacyl"))


def ptm_stem(text: str) -> str | None:
    """Stem of a PTM type ("phosphorylation" -> "phosphoryl", "S-nitrosylated" -> "nitrosyl").

    UniProt modification names map to their type ("Phosphoserine" -> "phosphoryl").
    """
    m = _PTM_TEXT.match(text)
    if m and len(m["stem"]) >= 3:
        return m["stem"].lower()
    low = text.strip().lower()
    for fragment, stem in _PTM_MODRES:
        if low.startswith(fragment) or f"-{fragment}" in low:
            return stem
    return None


def ptm_pattern(text: str) -> SurfacePattern | None:
    """Regex for a PTM type with its inflections and prefix forms, or None for a non-PTM text.

    "phosphorylation" matches phosphorylation(s), phosphorylated, phosphorylates,
    phosphorylating, hyper-/auto-phosphorylation, S-/O- locants, "phospho-Akt" and
    "phosphoserine"; "-ation" words of any other PTM get the same inflections.
    """
    stem = ptm_stem(text)
    if stem is None:
        return None
    stems, prefix, hyphen_alone = _PTM_EXTRA.get(stem, ((stem,), "", False))
    words = "|".join(re.escape(s).replace(r"\-", SEP) for s in stems)
    alternatives = [rf"{_PTM_QUANT}(?:{words}){_PTM_SUFFIX}{RIGHT}"]
    if prefix:
        follow = rf"-|(?={_PTM_TARGETS})" if hyphen_alone else rf"-?(?={_PTM_TARGETS})"
        alternatives.append(rf"{_PTM_QUANT}{prefix}(?:{follow})")
    body = "|".join(alternatives)
    source = rf"(?<![^\W\d_])(?:[A-Za-z]\d*-)?(?i:{body})"
    runs = re.findall(r"[a-z0-9]+", (prefix or stems[0]).lower())
    return SurfacePattern(source, max(runs, key=len)[:6] if runs else "")
