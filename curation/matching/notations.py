"""The notations papers write a variant in, for building a search query (pure).

:mod:`curation.matching.variants` reduces a mention to a canonical key; this module goes the other
way: from a KB's variant text to the spellings a curator would search for.

======================  ================================================================
KB text                 forms
======================  ================================================================
V600E                   V600E, Val600Glu, p.V600E, p.Val600Glu
W802*                   W802X, Trp802Ter, p.W802X, p.Trp802Ter (``*`` is PubMed's wildcard)
V600 (a codon)          V600, Val600, p.V600, p.Val600, codon 600
Y772_A775DUP            Y772_A775dup, Tyr772_Ala775dup, p.Y772_A775dup, p.Tyr772_Ala775dup
c.1799T>A               c.1799T>A, 1799T>A
EML4-ALK                EML4-ALK, EML4/ALK, EML4 ALK (a fusion, see :func:`fusion_forms`)
EXON 19 DELETION        exon 19 deletion, exon 19 deletions, exon 19 del, ex19del, ...
AMPLIFICATION           amplification, amplifications, amplified, copy number gain
EXPRESSION              nothing: the word is in most abstracts that name the gene
======================  ================================================================

:func:`expand_variant` splits a KB text into ANDed groups of ORed forms ("BCR-ABL T315I": the
fusion and the change; "G12/G13": one group, either codon) and says what it left out and why.
The words of classes and exon changes are in :mod:`curation.matching.variant_classes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from curation.matching.normalize import ONE_TO_THREE, THREE_TO_ONE
from curation.matching.variant_classes import CLASS_FORMS, class_forms, exon_forms, fold_class

_AA3 = "|".join(sorted({t.capitalize() for t in THREE_TO_ONE} | {t.upper() for t in THREE_TO_ONE}))
_RES = rf"(?:[ACDEFGHIKLMNPQRSTVWY]|{_AA3})"
_STOP = r"(?:\*|X|Ter|TER|Stop|STOP)"
_SUB = re.compile(rf"(?:p\.)?\(?(?P<ref>{_RES})(?P<pos>[1-9]\d*)(?P<alt>{_RES}|{_STOP})?\)?")
_INDEL = re.compile(rf"(?:p\.)?\(?(?P<ref>{_RES})(?P<pos>[1-9]\d*)(?:_(?P<ref2>{_RES})?"
                    rf"(?P<pos2>[1-9]\d*))?(?:{_RES}(?=(?i:fs)))?"
                    rf"(?P<kind>(?i:delins|del|ins|dup|fs)|>)(?P<tail>[A-Za-z*]*\d*)\)?")
#: "D835H/Y": changes at one codon sharing their reference residue and position.
_SAME_CODON = re.compile(r"(?P<codon>[A-Z]\d+)(?P<alts>[A-Z](?:/[A-Z])+)")
_DNA_SUB = re.compile(r"(?:c\.)?(?P<pos>[-*]?\d+(?:[-+]\d+)?)(?P<ref>[ACGT])>(?P<alt>[ACGT])")
_DNA_OTHER = re.compile(r"c\.(?=[-*\d])\S*\d\S*")
_RS = re.compile(r"(?i:rs)(?P<num>\d{3,})")
_GENE = r"[A-Z][A-Za-z0-9]{1,14}"
_FUSION = re.compile(rf"(?P<g1>{_GENE})(?:::|[-/\u2013])(?P<g2>{_GENE})")
_CHANGE_LIKE = re.compile(r"[A-Z]\d+[A-Z]?")
_AND = re.compile(r"\s+(?:and|AND|\+|&)\s+")
_PAREN = re.compile(r"(?P<main>.+?)\s*\((?P<alt>[^()]+)\)")


@dataclass(frozen=True)
class VariantTerms:
    """A variant text as search terms.

    Attributes:
        groups: ANDed groups, each a tuple of ORed forms (empty: nothing worth searching).
        notes: What was expanded how, and what was left out and why.
        fusion: The fusion's two partners as written ("EML4", "ALK"), or None.
        codons: Canonical keys ("p.V600") of codon-level changes, whose specific changes a
            caller may add from its KB.
        single: True when the text names one thing (one group, no compound): stored synonyms
            of the variant then join its forms.
    """

    groups: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()
    fusion: tuple[str, str] | None = None
    codons: tuple[str, ...] = ()
    single: bool = False


def _three(residue: str) -> str:
    if residue in ONE_TO_THREE:
        return ONE_TO_THREE[residue]
    return residue.capitalize() if residue.lower() in THREE_TO_ONE else residue


def _one(residue: str) -> str:
    return residue if len(residue) == 1 else THREE_TO_ONE[residue.lower()]


def protein_forms(text: str) -> tuple[tuple[str, ...], str] | None:
    """(one-letter, three-letter, p. one-letter, p. three-letter forms) of one protein change and
    its kind ("substitution", "codon" or "indel"), or None when ``text`` is not one."""
    m = _SUB.fullmatch(text.strip())
    if m:
        ref, pos, alt = _one(m["ref"]), m["pos"], m["alt"]
        if alt is None:
            one, three, kind = f"{ref}{pos}", f"{_three(ref)}{pos}", "codon"
        elif re.fullmatch(_STOP, alt):
            one, three, kind = f"{ref}{pos}X", f"{_three(ref)}{pos}Ter", "substitution"
        else:
            one, three = f"{ref}{pos}{_one(alt)}", f"{_three(ref)}{pos}{_three(_one(alt))}"
            kind = "substitution"
        return (one, three, f"p.{one}", f"p.{three}"), kind
    m = _INDEL.fullmatch(text.strip())
    if not m:
        return None
    kind, tail = ("delins" if m["kind"] == ">" else m["kind"].lower()), m["tail"]
    if kind == "fs":
        tail = ""
    one = f"{_one(m['ref'])}{m['pos']}"
    three = f"{_three(_one(m['ref']))}{m['pos']}"
    if m["pos2"]:
        ref2 = _one(m["ref2"]) if m["ref2"] else ""
        one += f"_{ref2}{m['pos2']}"
        three += f"_{_three(ref2) if ref2 else ''}{m['pos2']}"
    tail_three = "".join(_three(c) for c in tail) if tail.isalpha() and tail.isupper() \
        and all(c in ONE_TO_THREE for c in tail) else tail
    one, three = f"{one}{kind}{tail}", f"{three}{kind}{tail_three}"
    return (one, three, f"p.{one}", f"p.{three}"), "indel"


def dna_forms(text: str) -> tuple[str, ...] | None:
    """("c.1799T>A", "1799T>A") for a cDNA change, ("rs113488022",) for an rsID, else None."""
    token = text.strip()
    m = _DNA_SUB.fullmatch(token)
    if m:
        bare = f"{m['pos']}{m['ref']}>{m['alt']}"
        return f"c.{bare}", bare
    if _DNA_OTHER.fullmatch(token):
        return token, token[2:]
    m = _RS.fullmatch(token)
    return (f"rs{m['num']}",) if m else None


def fusion_partners(token: str) -> tuple[str, str] | None:
    """The two genes of a fusion token ("EML4-ALK", "BCR::ABL1", "EML4/ALK"), else None."""
    m = _FUSION.fullmatch(token.strip())
    if not m:
        return None
    parts = (m["g1"], m["g2"])
    for part in parts:
        if sum(c.isalpha() for c in part) < 2 or _CHANGE_LIKE.fullmatch(part):
            return None
        if not (part.isupper() or part[1:].islower() or any(c.isdigit() for c in part)):
            return None
    if fold_class(token) in CLASS_FORMS:  # "Wild-Type", "Loss-of..." are classes
        return None
    return parts


def names_gene(partner: str, gene_forms: tuple[str, ...]) -> bool:
    """Whether a fusion partner names the gene: one of its forms, or its symbol less a trailing
    number ("ABL" for ABL1)."""
    low = partner.casefold()
    return any(low == f.casefold() or (f.casefold().startswith(low)
                                       and f[len(partner):].isdigit()) for f in gene_forms)


def fusion_forms(g1: str, g2: str, symbols: dict[str, str] | None = None) -> tuple[str, ...]:
    """Spellings of a fusion: "G1-G2", "G1/G2", "G1 G2", also with a partner's official symbol
    (``symbols``: "ABL" -> "ABL1" gives BCR-ABL1 after BCR-ABL). No "::": PubMed reads colons."""
    pairs = [(g1, g2)]
    official = ((symbols or {}).get(g1, g1), (symbols or {}).get(g2, g2))
    if official != (g1, g2):
        pairs.append(official)
    return tuple(f"{a}{sep}{b}" for sep in ("-", "/", " ") for a, b in pairs)


@dataclass
class _Parts:
    """What one AND-part of a variant text turned into (mutable while parsing)."""

    groups: list[tuple[str, ...]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fusion: tuple[str, str] | None = None
    codons: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def expand_variant(text: str, gene: str = "", gene_forms: tuple[str, ...] = ()
                   ) -> VariantTerms:
    """Split a KB variant text into ANDed groups of ORed forms (see the module table).

    Parts joined by "and"/"+" are ANDed (a compound mutation names both); "G12/G13" ORs its
    codons; a parenthesis holds another notation of the same change ("R200W (c.598C>T)"). A
    leading word equal to the gene ("ALK FUSIONS") is the gene slot's and is left out; with a
    gene given, "X-Y" is a fusion only when a partner is that gene ("COPY-NEUTRAL" is not). A class
    word beside a specific change ("ALK FUSION G1202R") and words no notation explains ("E6;A20")
    are left out with a note; a text of only such words is searched as written.

    Args:
        text: The KB's variant text.
        gene: The gene slot's symbol ("" when the relation has none).
        gene_forms: The gene's forms (symbol and synonyms), to tell a fusion partner naming it.
    """
    clean = " ".join(text.split())
    stripped = _strip_gene(clean, gene, gene_forms)
    whole_class = class_forms(stripped, gene)
    if whole_class is not None:
        return _class_terms(clean, whole_class)
    exon = exon_forms(stripped, gene) if len(_AND.split(stripped)) == 1 else None
    if exon is not None:
        return VariantTerms((exon,), (f"{clean!r}: the exon change as papers write it",),
                            single=True)
    main, alternates = clean, ()
    paren = _PAREN.fullmatch(clean)
    if paren:
        main, alternates = paren["main"], tuple(a.strip() for a in paren["alt"].split(","))
    parts = [_parse_part(p, gene, gene_forms) for p in _AND.split(main) if p.strip()]
    groups = [g for p in parts for g in p.groups]
    notes = [n for p in parts for n in p.notes]
    if groups and alternates:  # another notation of the same change, or a name: ORed
        groups[0] += tuple(f for a in alternates for f in notation_forms(a) or (a,))
    if not groups:
        return VariantTerms(((clean,),), (f"{clean!r} searched as written",), single=True)
    if len(parts) > 1 or len(groups) > 1:
        notes.append("the parts are ANDed: a paper on the variant names each")
    fusion = next((p.fusion for p in parts if p.fusion), None)
    return VariantTerms(tuple(groups), tuple(notes), fusion,
                        tuple(c for p in parts for c in p.codons), single=len(groups) == 1)


def _class_terms(text: str, forms: tuple[str, ...]) -> VariantTerms:
    if not forms:
        return VariantTerms((), (f"{text!r} left out: the word is in most abstracts that name "
                                 "the gene, so it would only add noise",))
    return VariantTerms((forms,), (f"{text!r} is a class: searched as the words papers use",),
                        single=True)


def _strip_gene(text: str, gene: str, gene_forms: tuple[str, ...]) -> str:
    """``text`` without a leading word that is the gene ("ALK FUSIONS" -> "FUSIONS")."""
    head, _, rest = text.partition(" ")
    if rest and (head.casefold() == gene.casefold() or names_gene(head, gene_forms)):
        return rest
    return text


def notation_forms(token: str) -> tuple[str, ...] | None:
    """The forms of one change, the text as written first (unless it holds PubMed's "*")."""
    found = protein_forms(token)
    forms = found[0] if found else dna_forms(token)
    if forms and "*" not in token and token.casefold() not in {f.casefold() for f in forms}:
        return (token, *forms)
    return forms


def _parse_part(part: str, gene: str, gene_forms: tuple[str, ...]) -> _Parts:
    out = _Parts()
    tokens = _strip_gene(part.strip(), gene, gene_forms).split()
    partners = fusion_partners(tokens[0]) if tokens else None
    if partners and (not gene or any(names_gene(p, (gene, *gene_forms)) for p in partners)):
        out.fusion = partners
        symbols = {p: gene for p in partners if gene and p != gene and names_gene(p, (gene,))}
        out.groups.append(fusion_forms(*partners, symbols))
        tokens = tokens[1:]
    rest = " ".join(tokens)
    if rest and class_forms(rest, gene) is not None:
        tokens, out.classes = [], [rest]
    for token in tokens:
        _add_token(out, token, gene)
    specific = len(out.groups) > 0
    if out.classes and specific:
        out.notes.append(f"{' '.join(out.classes)!r} left out beside the specific change")
    elif out.classes:
        exon = exon_forms(rest, gene)
        forms = exon if exon is not None else class_forms(" ".join(out.classes), gene)
        if forms:
            out.groups.append(forms)
    if out.unknown and out.groups:
        out.notes.append(f"{' '.join(out.unknown)!r} left out: no notation the normaliser knows")
    elif out.unknown and not out.classes:
        out.groups.append((part.strip(),))
        out.notes.append(f"{part.strip()!r} searched as written")
    return out


def _add_token(out: _Parts, token: str, gene: str) -> None:
    """One word of a variant text: a change, changes joined by "-" (ANDed) or "/" (ORed, also
    "D835H/Y"), an exon or class word, or an unknown word."""
    same = _SAME_CODON.fullmatch(token)
    if same:
        token = "/".join(same["codon"] + alt for alt in same["alts"].split("/"))
    for sep, anded in (("-", True), ("/", False)):
        pieces = token.split(sep)
        if len(pieces) > 1 and all(notation_forms(p) for p in pieces):
            if anded:
                for piece in pieces:
                    _add_token(out, piece, gene)
            else:  # either change: their forms interleaved, the one-letter ones first
                per_piece = [_codon_aware(out, p) for p in pieces]
                out.groups.append(tuple(f for i in range(max(map(len, per_piece)))
                                        for forms in per_piece if i < len(forms)
                                        for f in (forms[i],)))
            return
    if notation_forms(token):
        out.groups.append(_codon_aware(out, token))
    elif class_forms(token, gene) is not None or token.lower() == "exon" or token.isdigit():
        out.classes.append(token)
    else:
        out.unknown.append(token)


def _codon_aware(out: _Parts, token: str) -> tuple[str, ...]:
    """The forms of one change; a codon also gets "codon N" and is remembered in ``out``."""
    found = protein_forms(token)
    if found and found[1] == "codon":
        forms = found[0]
        out.codons.append(forms[2])
        position = re.sub(r"\D", "", forms[0])
        return (*forms[:2], f"codon {position}", *forms[2:])
    return notation_forms(token) or ()
