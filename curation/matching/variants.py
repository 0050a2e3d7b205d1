"""Sequence variants: find variant mentions in text and reduce them to canonical keys.

Every spelling of one variant reduces to the same key, so a KB record's "V600E" finds
"Val600Glu", "p.V600E", "p.Val600Glu" and "valine 600 to glutamic acid" alike:

============================================  ===========================
mention                                       key
============================================  ===========================
V600E, Val600Glu, p.(Val600Glu), Val-600-Glu  ``p.V600E``
valine 600 to glutamic acid                   ``p.V600E``
Tyr65X, p.Y65*, Tyr65Ter                      ``p.Y65*``
c.1517A>G, 1517A>G, 1517 A/G, A1517G           ``n.1517A>G`` (DNA: c./g./m. ignored)
1936delG, c.2113_2114delGG, c.14_15insC        ``n.1936del``, ``n.2113_2114del``, ...
delF508, F508del, ΔF508, p.Phe508del          ``p.F508del``
p.G204VfsX28, R58fs                           ``p.G204fs``, ``p.R58fs``
rs1799998, rs 1799998                         ``rs1799998``
EML4-ALK, EML4::ALK, EML4/ALK                 ``fusion:EML4::ALK``
exon 19 deletion, del19, exon19del            ``exon19:del``
amplification, amplified, copy number gain    ``amp``
overexpression, over-expressed                ``overexpression`` (also ``underexpression``)
MUTATION, mutations, mutated, mutant          ``mutation`` (also ``deletion``)
============================================  ===========================

A mention's *broader* keys let a codon-level record find specific changes ("V600" finds
"V600E"), never the other way round. tmVar identifiers (``p|SUB|V|600|E``) and rsIDs reduce to
the same keys (:func:`keys_from_id`). Pure functions; the patterns are module constants.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from curation.matching.normalize import AMINO_ACIDS, NAME_TO_ONE, THREE_TO_ONE


@dataclass(frozen=True)
class VariantMention:
    """A variant mention in a text.

    Attributes:
        start: Offset of the first character.
        end: Offset after the last character.
        keys: Canonical keys of the mention ("p.V600E").
        broader: Keys of the codon/residue the mention falls under ("p.V600").
    """

    start: int
    end: int
    keys: frozenset[str]
    broader: frozenset[str] = frozenset()


_B = r"(?<![A-Za-z0-9])"
_E = r"(?![A-Za-z0-9])"
_AA3 = "|".join(t for _, t, _ in AMINO_ACIDS) + "|" + "|".join(t.upper() for _, t, _ in AMINO_ACIDS)
_AA1 = "ACDEFGHIKLMNPQRSTVWY"
_STOP3 = r"Ter|TER|Stop|stop|STOP|X|\*"
_NAMES = "|".join(sorted(NAME_TO_ONE, key=len, reverse=True)).replace(" ", r"\s")
_AANAME = rf"(?i:{_NAMES}|stop|termination)"
_AANAME3 = rf"(?:{_AANAME}|{_AA3})"
_POS_WORDS = r"(?:(?:amino\s+acid|residue|codon|position|nucleotide)\s+)*"
_DNA_POS = r"(?:IVS\s?\d+\s?)?[-+*]?\d+(?:\s?[-+]\s?(?:\d+|\?))?"
_DNA_RANGE = rf"{_DNA_POS}(?:_{_DNA_POS})?"
_ARROW = r"(?:>|->|-->|→|/)"
_CHANGE_WORDS = (r"(?:substitution|change|mutation|replacement|exchange|transition|transversion|"
                 r"variant|alteration|polymorphism)")

_P3 = re.compile(rf"{_B}(?:p\.\s?)?\(?(?P<ref>{_AA3})\s?-?\(?(?P<pos>[1-9]\d*)\)?\s?-?"
                 rf"(?P<alt>{_AA3}|{_STOP3})\)?{_E}")
_P1 = re.compile(rf"(?:p\.\s?)?\(?(?P<ref>[{_AA1}])(?P<pos>[1-9]\d*)"
                 rf"(?P<alt>[{_AA1}X*])\)?{_E}")
_PBARE = re.compile(rf"{_B}(?:p\.\s?)?(?P<ref>[{_AA1}]|{_AA3})(?P<pos>[1-9]\d{{1,4}}){_E}")
_PWORDS1 = re.compile(rf"{_B}(?P<ref>{_AANAME})[\s-]*(?:at\s+)?{_POS_WORDS}(?P<pos>[1-9]\d*)"
                      rf"[\s-]*(?:(?i:to|into|by|with|for)[\s-]+|{_ARROW}\s?)?(?P<alt>{_AANAME}){_E}")
_PWORDS2 = re.compile(
    rf"{_B}(?:(?i:substitution|replacement|change|exchange)\s+of\s+(?:an?\s+|the\s+)?)?"
    rf"(?P<ref>{_AANAME3})\s*(?:-?\s*(?i:to)\s*-?|-?->|-->|→|>|\s+(?i:with|by|for))\s*(?:an?\s+)?"
    rf"(?P<alt>{_AANAME3})(?:\s+(?i:{_CHANGE_WORDS}))?\s+(?i:at|in|of)\s+(?:the\s+)?"
    rf"(?i:{_POS_WORDS})(?P<pos>[1-9]\d*){_E}")
_PINDEL = re.compile(rf"{_B}(?:p\.\s?)?\(?(?P<ref>{_AA3}|[{_AA1}])(?P<pos>[1-9]\d*)"
                     rf"(?:[_-](?P<ref2>{_AA3}|[{_AA1}])(?P<pos2>[1-9]\d*))?(?:{_AA3}|[{_AA1}])?"
                     rf"(?P<kind>(?i:delins|del|dup|ins|fs))(?:[A-Za-z*]*(?P<length>\d*))?\)?{_E}")
_PDELTA = re.compile(rf"{_B}(?:delta|Delta|DELTA|Δ|del)\s?(?P<ref>{_AA3}|[{_AA1}])"
                     rf"(?P<pos>[1-9]\d*){_E}")
_NSUB = re.compile(rf"{_B}(?:[cgmnr]\.\s?)?(?P<pos>{_DNA_POS})\s?(?P<ref>[ACGTU])\s?{_ARROW}\s?"
                   rf"(?P<alt>[ACGTU]){_E}")
_NSUB1 = re.compile(rf"{_B}(?P<ref>[ACGT])\s?(?P<pos>-?[1-9]\d*)\s?(?P<alt>[ACGT]){_E}")
_NWORDS = re.compile(rf"{_B}\(?(?P<ref>[ACGT])\s?(?:(?i:to)|{_ARROW}|-->|->)\s?"
                     rf"(?P<alt>[ACGT])\)?\s+"
                     rf"(?:(?i:{_CHANGE_WORDS})\s+)?(?i:at|in)\s+(?:the\s+)?(?i:{_POS_WORDS})"
                     rf"(?P<pos>-?\d+){_E}")
_NINDEL = re.compile(rf"{_B}(?:[cgmn]\.\s?)?(?P<pos>{_DNA_RANGE})\s?(?P<kind>delins|del|ins|dup)"
                     rf"\s?(?:[ACGT]+|\d+)?{_E}")
_RS = re.compile(rf"{_B}(?i:rs)\s?#?:?\s?(?P<num>\d{{3,}})(?![0-9])")
_EXON1 = re.compile(rf"(?i:{_B}exon[\s-]?(?P<n>\d{{1,2}})[\s-]?(?:in-?frame\s+)?"
                    rf"(?P<kind>del(?:etion)?s?|ins(?:ertion)?s?|dup(?:lication)?s?|skipping|"
                    rf"mutations?|mut){_E})")
_EXON2 = re.compile(rf"(?i:{_B}(?:in-?frame\s+)?(?P<kind>deletion|insertion|duplication|"
                    rf"mutation|skipping)s?\s+(?:in|of|within|at)\s+(?:the\s+)?exon[\s-]?"
                    rf"(?P<n>\d{{1,2}}){_E})")
_EXON3 = re.compile(rf"{_B}(?P<kind>del|ins)(?P<n>1\d|2\d|[1-9]){_E}")
_FUSION = re.compile(rf"{_B}(?P<g1>[A-Z][A-Z0-9]{{1,9}})\s?(?:::|[-–—/:])\s?"
                     rf"(?P<g2>[A-Z][A-Z0-9]{{1,9}}){_E}")
_CHANGE_LIKE = re.compile(r"[A-Z]\d+[A-Z]?")
_AMP = re.compile(r"(?i:(?<![a-z])(?:amplif(?:ication|ications|ied|y|ying)|"
                  r"copy[\s-]number\s+(?:gain|amplification)s?)(?![a-z]))")
_OVEREXP = re.compile(r"(?i:(?<![a-z])over-?\s?express(?:ion|ions|ed|es|ing)?(?![a-z]))")
_UNDEREXP = re.compile(r"(?i:(?<![a-z])under-?\s?express(?:ion|ions|ed|es|ing)?(?![a-z]))")
_MUTATION = re.compile(r"(?i:(?<![a-z])(?:mutat(?:ion|ions|ed|ing)|mutants?)(?![a-z]))")
_DELETION = re.compile(r"(?i:(?<![a-z])(?:deletions?|deleted)(?![a-z]))")


def _aa(token: str) -> str:
    """One-letter code of an amino acid token (one-letter, three-letter, name, stop)."""
    low = re.sub(r"\s+", " ", token.strip().lower())
    if low in ("x", "*", "ter", "stop", "termination"):
        return "*"
    if len(low) == 1:
        return low.upper()
    return THREE_TO_ONE.get(low) or NAME_TO_ONE.get(low, "?")


def _dna_pos(pos: str) -> str:
    """Position without spaces; "904-906" (a range written with a hyphen) -> "904_906"."""
    pos = re.sub(r"\s+", "", pos).upper()
    m = re.fullmatch(r"(\d+)-(\d+)", pos)
    if m and int(m[2]) > int(m[1]):
        return f"{m[1]}_{m[2]}"
    return pos


def _protein_sub(m: re.Match[str]) -> tuple[set[str], set[str]]:
    ref, alt = _aa(m["ref"]), _aa(m["alt"])
    if "?" in (ref, alt) or ref == "*":
        return set(), set()
    return {f"p.{ref}{m['pos']}{alt}"}, {f"p.{ref}{m['pos']}"}


def _protein_bare(m: re.Match[str]) -> tuple[set[str], set[str]]:
    return {f"p.{_aa(m['ref'])}{m['pos']}"}, set()


def _protein_indel(m: re.Match[str]) -> tuple[set[str], set[str]]:
    ref, kind = _aa(m["ref"]), m["kind"].lower()
    start = f"{ref}{m['pos']}"
    if kind == "fs":
        if m["length"]:
            return {f"p.{start}fs*{m['length']}"}, {f"p.{start}fs", f"p.{start}"}
        return {f"p.{start}fs"}, {f"p.{start}"}
    if m["ref2"]:  # a range: keyed by positions (tmVar ids give no residues)
        return {f"p.{m['pos']}_{m['pos2']}{kind}"}, {f"p.{start}"}
    return {f"p.{start}{kind}"}, {f"p.{start}"}


def _delta(m: re.Match[str]) -> tuple[set[str], set[str]]:
    return {f"p.{_aa(m['ref'])}{m['pos']}del"}, set()


def _dna_sub(m: re.Match[str]) -> tuple[set[str], set[str]]:
    ref, alt = m["ref"].replace("U", "T"), m["alt"].replace("U", "T")
    return {f"n.{_dna_pos(m['pos'])}{ref}>{alt}"}, set()


def _dna_sub1(m: re.Match[str]) -> tuple[set[str], set[str]]:
    keys = {f"n.{m['pos']}{m['ref']}>{m['alt']}"}
    if not m["pos"].startswith("-"):
        keys.add(f"p.{m['ref']}{m['pos']}{m['alt']}")
    return keys, set()


def _dna_indel(m: re.Match[str]) -> tuple[set[str], set[str]]:
    return {f"n.{_dna_pos(m['pos'])}{m['kind']}"}, set()


def _rs(m: re.Match[str]) -> tuple[set[str], set[str]]:
    return {f"rs{m['num']}"}, set()


def _exon(m: re.Match[str]) -> tuple[set[str], set[str]]:
    kind = m["kind"].lower()
    for prefix, name in (("del", "del"), ("ins", "ins"), ("dup", "dup"), ("skip", "skip")):
        if kind.startswith(prefix):
            return {f"exon{int(m['n'])}:{name}"}, set()
    return {f"exon{int(m['n'])}:mut"}, set()


def _fusion(m: re.Match[str]) -> tuple[set[str], set[str]]:
    g1, g2 = m["g1"], m["g2"]
    if any(sum(c.isalpha() for c in g) < 2 or _CHANGE_LIKE.fullmatch(g) for g in (g1, g2)):
        return set(), set()
    return {f"fusion:{g1}::{g2}"}, set()


_Build = Callable[[re.Match[str]], tuple[set[str], set[str]]]
#: (families, pattern, key builder); a family is the kind of key a rule yields (see key_family).
_GRAMMAR: tuple[tuple[frozenset[str], re.Pattern[str], _Build], ...] = tuple(
    (frozenset(families.split()), pattern, build) for families, pattern, build in (
        ("protein", _P3, _protein_sub), ("protein", _P1, _protein_sub),
        ("protein", _PBARE, _protein_bare), ("protein", _PWORDS1, _protein_sub),
        ("protein", _PWORDS2, _protein_sub), ("protein", _PINDEL, _protein_indel),
        ("protein", _PDELTA, _delta), ("dna", _NSUB, _dna_sub),
        ("dna protein", _NSUB1, _dna_sub1), ("dna", _NWORDS, _dna_sub),
        ("dna", _NINDEL, _dna_indel), ("rs", _RS, _rs), ("exon", _EXON1, _exon),
        ("exon", _EXON2, _exon), ("exon", _EXON3, _exon), ("fusion", _FUSION, _fusion),
        ("class", _AMP, lambda m: ({"amp"}, set())),
        ("class", _OVEREXP, lambda m: ({"overexpression"}, set())),
        ("class", _UNDEREXP, lambda m: ({"underexpression"}, set())),
        ("class", _MUTATION, lambda m: ({"mutation"}, set())),
        ("class", _DELETION, lambda m: ({"deletion"}, set())),
    ))
FAMILIES = frozenset(f for families, _, _ in _GRAMMAR for f in families)


def key_family(key: str) -> str:
    """The family of a canonical key: protein, dna, rs, exon, fusion or class."""
    for prefix, family in (("p.", "protein"), ("n.", "dna"), ("rs", "rs"), ("exon", "exon"),
                           ("fusion:", "fusion")):
        if key.startswith(prefix):
            return family
    return "class"


def scan_variants(text: str, families: frozenset[str] | None = None,
                  ) -> tuple[VariantMention, ...]:
    """Every variant mention in ``text``.

    Mentions of one span are merged; a mention inside a longer one ("Pro75" in "Pro75 Ala")
    is dropped.

    Args:
        text: Any text (an abstract, a synonym).
        families: Only rules yielding keys of these families (default: all), e.g. only
            "protein" rules when looking for V600E.

    Returns:
        Mentions sorted by start, longest first.
    """
    found: dict[tuple[int, int], tuple[set[str], set[str]]] = {}
    for rule_families, pattern, build in _GRAMMAR:
        if families is not None and rule_families.isdisjoint(families):
            continue
        for m in pattern.finditer(text):
            keys, broader = build(m)
            if keys:
                slot = found.setdefault(_balanced(m), (set(), set()))
                slot[0].update(keys)
                slot[1].update(broader)
    spans = sorted(found, key=lambda x: (x[0], -x[1]))
    mentions = []
    for start, end in spans:
        if any(s <= start and end <= e and (s, e) != (start, end) for s, e in spans):
            continue  # "Pro75" in "Pro75 Ala", "19 del" in "exon-19 del"
        keys, broader = found[(start, end)]
        mentions.append(VariantMention(start, end, frozenset(keys), frozenset(broader - keys)))
    return tuple(mentions)


def _balanced(m: re.Match[str]) -> tuple[int, int]:
    """The match's span without an unpaired leading "(" or trailing ")", nor the pair of
    brackets around the whole mention: "(V600E)" -> "V600E", while HGVS "p.(Val600Glu)" keeps
    its own."""
    start, end = m.span()
    text = m.group()
    if text.endswith(")") and text.count(")") > text.count("("):
        end -= 1
    if text.startswith("(") and text.count("(") > text.count(")"):
        start += 1
    while end - start > 2 and m.string[start] == "(" and m.string[end - 1] == ")" \
            and _closes_at_end(m.string[start:end]):
        start, end = start + 1, end - 1
    return start, end


def _closes_at_end(text: str) -> bool:
    """True when the "(" that opens ``text`` is closed by its last character: "(V600E)", not
    "(Val)600(Glu)"."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return i == len(text) - 1
    return False


def variant_keys(text: str) -> frozenset[str]:
    """Canonical keys of the variant(s) a KB text names ("BRAF Val600Glu" -> {"p.V600E"}).

    A class word counts only when it is the whole text: "AMPLIFICATION" is the class
    "amp", while "TGAG deletion" names one deletion, not every deletion.
    """
    keys: set[str] = set()
    whole = text.strip()
    for mention in scan_variants(text):
        if any(key_family(k) == "class" for k in mention.keys) and \
                text[mention.start:mention.end] != whole:
            continue
        keys |= mention.keys
    return frozenset(keys)


_TMVAR_ID = re.compile(r"^(?P<seq>[a-z]?)\|(?P<kind>SUB|DEL|INS|DUP|FS|INDEL|Allele)\|"
                       r"(?P<a>[^|]*)\|(?P<b>[^|]*)(?:\|(?P<c>[^|]*))?")


def keys_from_id(identifier: str) -> frozenset[str]:
    """Canonical keys of a tmVar-style id ("p|SUB|V|600|E" -> {"p.V600E"}) or an rsID."""
    ident = identifier.strip()
    rs = re.fullmatch(r"(?i:rs)#?:?(\d+)", ident)
    if rs:
        return frozenset({f"rs{rs[1]}"})
    m = _TMVAR_ID.match(ident)
    if not m:
        return frozenset()
    kind, a, b, c = m["kind"], m["a"], m["b"], m["c"] or ""
    protein = m["seq"] == "p"
    if kind == "SUB" and a and b and c:
        if protein:
            return frozenset({f"p.{_aa(a)}{b}{_aa(c)}"})
        return frozenset({f"n.{_dna_pos(b)}{a}>{c}"})
    if kind == "FS" and protein and a and b:
        return frozenset({f"p.{_aa(a)}{b}fs"})
    if kind in ("DEL", "INS", "DUP") and a:
        if not protein:
            return frozenset({f"n.{_dna_pos(a)}{kind.lower()}"})
        if "_" in a:
            return frozenset({f"p.{a}{kind.lower()}"})
        if len(b) == 1:
            return frozenset({f"p.{_aa(b)}{a}{kind.lower()}"})
    return frozenset()


def key_anchors(key: str) -> tuple[str, ...]:
    """Lower-case substrings one of which any mention of ``key`` contains (a pre-filter)."""
    classes = {"amp": ("amplif", "copy"), "overexpression": ("express",),
               "underexpression": ("express",), "mutation": ("muta",), "deletion": ("delet",)}
    if key in classes:
        return classes[key]
    if key.startswith("fusion:"):
        g1, _, g2 = key[len("fusion:"):].partition("::")
        return (max(g1, g2, key=len).lower(),)
    digits = re.findall(r"\d+", key)
    return (max(digits, key=len),) if digits else ()
