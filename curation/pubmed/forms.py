"""The forms one entity is searched under in PubMed, per slot type, and the ``[tiab]`` syntax.

PubMed's title/abstract search ignores case, so case forms of a symbol ("Braf", "braf") add
nothing and are not listed; spellings that differ in more than case are ("B-Raf" for BRAF,
"c-Met" for MET, "FGFR-1" for FGFR1). Every form is quoted: a quoted ``[tiab]`` term is a phrase
("exon 19 deletion"), keeps its hyphen ("B-Raf") and cannot be read as a Boolean word.

Synonyms are ranked by how papers write them (:func:`rank_synonyms`): spellings of the KB's own
text first, then short symbols (HER2, FLT2), then names of at most three words, then of four or
five. Longer names and names with a slash (UniProt's "Breast cancer type 2 susceptibility
protein", "Serine/threonine-protein kinase B-raf", which papers do not write out), UniProt entry
names (BRAF_HUMAN) and names with brackets inside a word ("Ca(2+)-dependent ...") are left out.

Characters that break E-utilities syntax (quotes, brackets, ``*`` (the wildcard), ``#``, ``:``,
``;``, ``|``, ``&``) are removed: "UGT1A1*28" is searched as "UGT1A1 28", as PubMed indexes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from curation.matching.normalize import AMINO_ACIDS, fold, is_symbol, parse_residue, ptm_stem
from curation.matching.symbols import letter_split

#: Slot types whose entities are therapies (a combination is split into its drugs).
THERAPY_TYPES = frozenset({"drug", "chemical", "treatment", "therapy"})
#: Slot types whose entities are genes or proteins.
GENE_TYPES = frozenset({"gene", "protein"})
#: Gene symbols papers also write with a hyphen after the first letter: H-Ras, B-Raf.
HYPHEN_ROOTS = frozenset({"RAS", "RAF"})
#: Proto-oncogenes papers name with the cellular prefix "c-".
C_PREFIXED: dict[str, str] = {
    "MET": "c-Met", "KIT": "c-Kit", "MYC": "c-Myc", "ABL1": "c-Abl", "SRC": "c-Src",
    "RAF1": "c-Raf", "RET": "c-Ret", "JUN": "c-Jun", "FOS": "c-Fos", "MYB": "c-Myb",
    "MPL": "c-Mpl", "ERBB2": "c-erbB-2", "CSF1R": "c-Fms",
}
#: Last words of a therapy class name ("BRAF Inhibitor"), also searched in the plural.
CLASS_WORDS = frozenset({"inhibitor", "antibody", "agent", "blocker", "antagonist", "agonist",
                         "compound", "analog", "analogue", "tki", "drug"})
_ENTRY_NAME = re.compile(r"[A-Z0-9]{1,10}_[A-Z0-9]{2,5}")
_BREAKS = re.compile(r"[\"*#:;|&\\?{}\[\]()<]+")
_COMBINATION = re.compile(r"\s*(?:\+|;|,(?!\d)|(?<!\d),)\s*|\s+(?:plus|and)\s+")
_TRAILING_NOTE = re.compile(r"(?P<main>[^()]+?)\s+\((?P<alt>[^()]+)\)(?P<rest>[^()]*)")


def clean_form(form: str) -> str:
    """``form`` safe inside a quoted E-utilities term ("" when too little is left)."""
    text = " ".join(_BREAKS.sub(" ", form).split())
    return text if sum(c.isalnum() for c in text) >= 2 else ""


def split_note(form: str) -> list[str]:
    """A name and the alternative it gives in brackets ("Trastuzumab emtansine (T-DM1)" ->
    both); [] for a name with brackets inside a word ("Ca(2+)-dependent ..."), which no paper
    writes so; the name itself otherwise."""
    if "(" not in form and ")" not in form:
        return [form]
    m = _TRAILING_NOTE.fullmatch(form.strip())
    if not m:
        return []
    return [" ".join(f"{m['main']} {m['rest']}".split()), m["alt"].strip()]


def dedupe(forms: Iterable[str]) -> list[str]:
    """Cleaned forms without repeats that differ only in case, in order."""
    seen: set[str] = set()
    out = []
    for raw in forms:
        for form in split_note(raw):
            clean = clean_form(form)
            if clean and clean.casefold() not in seen:
                seen.add(clean.casefold())
                out.append(clean)
    return out


def term(form: str) -> str:
    """One quoted title/abstract term."""
    return f'"{form}"[tiab]'


def or_clause(forms: Sequence[str]) -> str:
    """The forms ORed (in brackets when more than one)."""
    terms = [term(f) for f in forms]
    return terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")"


def and_clause(groups: Sequence[Sequence[str]]) -> str:
    """Groups of ORed forms, ANDed (in brackets when more than one)."""
    clauses = [or_clause(g) for g in groups if g]
    return clauses[0] if len(clauses) == 1 else "(" + " AND ".join(clauses) + ")"


def rank_synonyms(text: str, synonyms: Iterable[str]) -> list[str]:
    """Synonyms in the order papers use them (see the module docstring), entry names dropped."""
    tiers: list[list[str]] = [[], [], [], []]
    for synonym in synonyms:
        s = " ".join(synonym.split())
        if not s or _ENTRY_NAME.fullmatch(s) or s.casefold() == text.casefold():
            continue
        words = len(s.split())
        if fold(s) == fold(text):
            tiers[0].append(s)
        elif words == 1 and len(s) <= 12 and (is_symbol(s) or s.isupper()):
            tiers[1].append(s)
        elif words <= 5 and "/" not in s:
            tiers[2 if words <= 3 else 3].append(s)
    return [s for tier in tiers for s in tier]


def gene_spellings(symbol: str) -> list[str]:
    """Spellings of a gene symbol beyond case: "B-Raf" for BRAF, "c-Met" for MET."""
    out = []
    split = letter_split([symbol]) if symbol.isalpha() else None
    if split and split[1] in HYPHEN_ROOTS:
        out.append(f"{split[0]}-{split[1].capitalize()}")
    if symbol.upper() in C_PREFIXED:
        out.append(C_PREFIXED[symbol.upper()])
    return out


def gene_forms(text: str, synonyms: Iterable[str]) -> list[str]:
    """The symbol, its spellings, then its synonyms (ranked)."""
    return dedupe([text, *gene_spellings(text), *rank_synonyms(text, synonyms)])


def therapy_forms(text: str, synonyms: Iterable[str]) -> list[str]:
    """The drug's name (a class name also in the plural: "BRAF inhibitors"), then synonyms."""
    plural = [f"{text}s"] if text.split()[-1].lower() in CLASS_WORDS else []
    return dedupe([text, *plural, *rank_synonyms(text, synonyms)])


def split_therapies(text: str) -> list[str]:
    """The drugs of a combination ("Dabrafenib,Trametinib", "Dabrafenib + Trametinib")."""
    return [p for p in (" ".join(part.split()) for part in _COMBINATION.split(text)) if p]


def ptm_forms(text: str, synonyms: Iterable[str]) -> list[str]:
    """A PTM type and its participle: phosphorylation, phosphorylated; ubiquitination also
    as ubiquitylation."""
    stem = ptm_stem(text)
    forms = [text]
    if stem:
        stems = ("ubiquitin", "ubiquityl") if stem in ("ubiquitin", "ubiquityl") else (stem,)
        for s in stems:
            noun = text if text.lower() == f"{s}ation" else f"{s}ation"
            forms.append(noun)
            if s.endswith(("yl", "in")):
                forms.append(f"{noun[:-len('ation')]}ated")
    return dedupe([*forms, *rank_synonyms(text, synonyms)])


def residue_forms(text: str, synonyms: Iterable[str]) -> list[str]:
    """A residue in the spellings papers use: S473, Ser473, Ser-473, Ser 473, serine 473."""
    parsed = parse_residue(text)
    if parsed is None:
        return dedupe([text, *rank_synonyms(text, synonyms)])
    one, pos = parsed
    three, names = next((t, n) for o, t, n in AMINO_ACIDS if o == one)
    return dedupe([f"{one}{pos}", f"{three}{pos}", f"{three}-{pos}", f"{three} {pos}",
                   f"{names[0]} {pos}", *rank_synonyms(text, synonyms)])


def plain_forms(text: str, synonyms: Iterable[str]) -> list[str]:
    """The KB text, then its synonyms (ranked): diseases and any other slot type."""
    return dedupe([text, *rank_synonyms(text, synonyms)])
