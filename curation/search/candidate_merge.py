"""One suggestion row per answer: candidates that name the same entity are merged.

The same gene reaches the candidate list under several keys: the KB's "IL6" (``gene:3569``), a
PubTator annotation "interleukin (IL)-6" of the mouse gene (``gene:16193``), a drug list's
"Cisplatin" without an id next to an annotated ``chemical:D002945``. :func:`merge_found` merges
two candidates into one row when

1. **the normalised id says so**: both carry the same id (whatever their types), or one has no
   id and the workspace's entity dictionary holds its name (or a synonym) under the other's key;
2. **else the names say so** (:func:`name_keys`): their display names are one name once
   spelling is folded (case, hyphens, spaces: "IL-6" is "IL6"), a parenthesised abbreviation
   inside a name is read both ways ("interleukin (IL)-6" is "interleukin-6" and "IL-6"), and
   the abbreviations the top abstracts define (scispacy's detector,
   :func:`~curation.matching.abbreviations.find_abbreviations`,
   :func:`~curation.matching.abbreviations.infix_abbreviations` and
   :func:`~curation.matching.abbreviations.compound_abbreviations`) are expanded: "IL" of
   "interleukin (IL)-6" makes "IL6" read "interleukin6".

A plural folds onto its singular ("NETs" is "NET", "tumors" is "tumor": a capitalised acronym
with a lower-case "s", or a lower-case word of five letters or more). And a name ending in the
head of an abbreviation the abstracts define in parts ("gastroenteropancreatic neuroendocrine
tumors (GEP-NETs)": "GEP" + "NETs"), alone or after other words ("NET", "intestine NETs"),
names that abbreviation's entity (:func:`abbreviation_heads`): one row.

Only display names count in step 2, never every synonym: two genes sharing an alias ("ER" of
ESR1 and of EREG) stay apart. The merged row keeps the best member's key and name (a KB entity,
then one with an id, then the most supporting abstracts) and carries every member's forms, so
its sentences and highlights find each spelling.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from curation.matching.abbreviations import (
    Abbreviation,
    compound_abbreviations,
    infix_abbreviations,
)
from curation.store.entities import with_synonyms
from kb_sources.types import Entity

#: What :func:`merge_found` works on: key -> (entity, supporting abstracts, sources).
Found = dict[str, tuple[Entity, list[str], set[str]]]

_TOKEN = re.compile(r"[^\W\d_]+|\d+")
_INNER = re.compile(r"^(?P<long>.+?)\s*\((?P<short>[^()]+)\)(?P<rest>\S*)$")
_PAREN = re.compile(r"\(([^()]{1,12})\)")
#: Shortest folded name that merges rows ("ER" alone is too ambiguous to fold on).
MIN_KEY = 3
#: An acronym, with a plural "s" or not: "NET", "NETs", "CRCs".
_ACRONYM = re.compile(r"[A-Z][A-Z0-9]*[A-Z](?P<plural>s?)")
#: Where a compound short form splits into parts: "GEP-NETs" is "GEP" and "NETs".
_PARTS = re.compile(r"[-\s/]+")


def squash(text: str) -> str:
    """Letters and digits only, lower case: "IL-6" and "il 6" are "il6"."""
    return "".join(_TOKEN.findall(text.lower()))


def name_keys(name: str, expansions: Mapping[str, str] | None = None) -> set[str]:
    """The folded keys a display name goes by (rules: module docstring, step 2).

    Args:
        name: A candidate's display name.
        expansions: Squashed short form -> squashed long form, from the abstracts' abbreviations.

    Example:
        >>> sorted(name_keys("interleukin (IL)-6"))
        ['il6', 'interleukin6']
        >>> sorted(name_keys("IL6", {"il": "interleukin"}))
        ['il6', 'interleukin6']
    """
    expansions = expansions or {}
    inner = _INNER.match(name.strip())
    variants = [inner["long"] + inner["rest"], inner["short"] + inner["rest"]] if inner \
        else [name]
    keys: set[str] = set()
    for variant in variants:
        tokens = _TOKEN.findall(variant.lower())
        whole = "".join(tokens)
        keys |= {whole, expansions.get(whole, whole),
                 "".join(expansions.get(t, t) for t in tokens), singular_key(variant)}
    return {k for k in keys if len(k) >= MIN_KEY}


def singular_key(name: str) -> str:
    """The squashed name with its last word singular: a capitalised acronym with a lower-case
    plural "s" ("GEP-NETs" is "gepnet"), or a lower-case word of five letters or more
    ("melanomas" is "melanoma", "malignancies" "malignancy"; not "KRAS", "virus", "class").

    Example:
        >>> [singular_key(n) for n in ("GEP-NETs", "intestine NETs", "tumors", "KRAS")]
        ['gepnet', 'intestinenet', 'tumor', 'kras']
    """
    tokens = _TOKEN.findall(name)
    if not tokens:
        return ""
    last = tokens[-1]
    acronym = _ACRONYM.fullmatch(last)
    if acronym and acronym["plural"]:
        last = last[:-1]
    elif last.islower() and len(last) >= 5 and last.endswith("ies"):
        last = last[:-3] + "y"
    elif last.islower() and len(last) >= 5 and last.endswith("s") \
            and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return "".join([*tokens[:-1], last]).lower()


def abbreviation_heads(abbreviations: Iterable[Abbreviation]) -> dict[str, str]:
    """Singular key of a head acronym -> singular key of the compound short form it ends:
    "GEP-NETs" (gastroenteropancreatic neuroendocrine tumors) gives ``{"net": "gepnet"}``, so
    "NET" and "intestine NETs" merge with "GEP-NETs" (:func:`head_keys`). A short form of one
    part, or whose last part is no acronym, gives nothing."""
    out: dict[str, str] = {}
    for abbr in abbreviations:
        parts = [p for p in _PARTS.split(abbr.short.strip()) if p]
        if len(parts) >= 2 and _ACRONYM.fullmatch(parts[-1]):
            head = singular_key(parts[-1])
            if len(head) >= MIN_KEY:
                out.setdefault(head, singular_key(abbr.short))
    return out


def head_keys(name: str, heads: Mapping[str, str]) -> set[str]:
    """The compound short forms (:func:`abbreviation_heads`) whose head acronym ends ``name``
    ("NET" and "intestine NETs" -> ``{"gepnet"}``); the head must be written as an acronym."""
    words = _PARTS.split(name.strip())
    if not words or not _ACRONYM.fullmatch(words[-1]):
        return set()
    head = singular_key(words[-1])
    return {heads[head]} if head in heads else set()


def read_abbreviations(texts: Iterable[str], names: Iterable[str],
                       detect: Callable[[str], Sequence[Abbreviation]]
                       ) -> tuple[dict[str, str], dict[str, str]]:
    """:func:`expansions_of` and :func:`abbreviation_heads` of the abbreviations the texts
    define (:func:`defined_abbreviations`, whose arguments it takes): what
    :func:`merge_found` reads names with."""
    abbreviations = defined_abbreviations(texts, names, detect)
    return expansions_of(abbreviations), abbreviation_heads(abbreviations)


def defined_abbreviations(texts: Iterable[str], names: Iterable[str],
                          detect: Callable[[str], Sequence[Abbreviation]]
                          ) -> list[Abbreviation]:
    """The abbreviations the texts define, from the texts whose parentheses hold a part of some
    name (the detector, ~4 ms an abstract, runs on those alone).

    Args:
        texts: The top abstracts.
        names: The candidates' display names.
        detect: The (cached) abbreviation detector.
    """
    names = list(names)
    parts = {t for name in names for t in _TOKEN.findall(name.lower())}
    parts |= {squash(n) for n in names}
    out: list[Abbreviation] = []
    for text in texts:
        inside = {squash(m.group(1)) for m in _PAREN.finditer(text)}
        if inside & parts:
            out += [*detect(text), *infix_abbreviations(text), *compound_abbreviations(text)]
    return out


def expansions_of(abbreviations: Iterable[Abbreviation]) -> dict[str, str]:
    """Squashed short -> squashed long form (the first definition of a short form wins)."""
    out: dict[str, str] = {}
    for abbr in abbreviations:
        short, long = squash(abbr.short), squash(abbr.long)
        if len(short) >= 2 and long and short != long:
            out.setdefault(short, long)
    return out


def merge_found(found: Found, dictionary: Mapping[str, str], expansions: Mapping[str, str],
                heads: Mapping[str, str] | None = None) -> tuple[Found, dict[str, set[str]]]:
    """Merge the candidates that name one entity (rules: module docstring).

    Args:
        found: Candidate key -> (entity, abstracts, sources), in discovery order.
        dictionary: Lower-case name -> key of the entity the workspace's dictionary holds
            under it (for the candidates without an id).
        expansions: :func:`expansions_of` the top abstracts' abbreviations.
        heads: :func:`abbreviation_heads` of the top abstracts' abbreviations
            (:func:`read_abbreviations` gives both).

    Returns:
        The merged candidates (the kept member's key, in the order of each group's first
        member) and kept key -> the keys merged into it (itself included).
    """
    keys = list(found)
    parent = {k: k for k in keys}

    def root(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def join(a: str, b: str) -> None:
        parent[root(a)] = root(b)

    seen: dict[str, str] = {}
    for key in keys:
        entity = found[key][0]
        marks = {f"id:{entity.id}"} if entity.id else set()
        if not entity.id:
            named = {dictionary.get(f.lower()) for f in (entity.text, *entity.synonyms)}
            marks |= {f"key:{k}" for k in named if k and k != key and k in found}
        marks |= {f"name:{n}" for n in (*name_keys(entity.text, expansions),
                                         *head_keys(entity.text, heads or {}))}
        for mark in marks:
            if mark.startswith("key:"):
                join(key, mark[4:])
            elif mark in seen:
                join(key, seen[mark])
            else:
                seen[mark] = key
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(root(key), []).append(key)
    merged: Found = {}
    members: dict[str, set[str]] = {}
    for group in groups.values():
        best = min(group, key=lambda k: _preference(k, found[k], group.index(k)))
        merged[best] = _merged(best, group, found)
        members[best] = set(group)
    return merged, members


def _preference(key: str, item: tuple[Entity, list[str], set[str]], order: int) -> tuple:
    entity, pmids, sources = item
    return ("kb" not in sources, not entity.id, -len(pmids), order)


def _merged(best: str, group: Sequence[str], found: Found) -> tuple[Entity, list[str], set[str]]:
    entity, pmids, sources = found[best]
    if len(group) == 1:
        return entity, pmids, sources
    pmids, sources = list(pmids), set(sources)
    forms: list[str] = []
    for key in group:
        other, other_pmids, other_sources = found[key]
        pmids += [p for p in other_pmids if p not in pmids]
        sources |= other_sources
        forms += [other.text, *other.synonyms]
    known = {f.lower() for f in (entity.text, *entity.synonyms)}
    extra = [f for f in dict.fromkeys(forms) if f.strip() and f.lower() not in known]
    return with_synonyms(entity, extra), pmids, sources
