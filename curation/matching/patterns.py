"""An entity compiled for matching: one regex per surface form, variant keys, fuzzy words.

:func:`compile_entity` runs once per entity (``lru_cache``; entities are frozen and hashable) and
turns the entity's text and synonyms into:

* one :class:`FormRegex` per surface form (:func:`curation.matching.normalize.surface_pattern`, plus
  residue and PTM patterns for those entity types), each with its own pre-filter anchor;
* the canonical keys of its variants (:mod:`curation.matching.variants`), also from a tmVar id
  or rsID;
* the words eligible for fuzzy matching (never symbols).

Word forms run on the lower-cased text and start with a literal character, so ``re`` finds
candidates with its fast prefix search; symbols are then checked case-sensitively at the same
offsets ("CAT" but not "cat").
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from curation.matching.normalize import (
    SurfacePattern,
    fold,
    is_symbol,
    parse_residue,
    ptm_pattern,
    residue_pattern,
    surface_pattern,
    tokens,
)
from curation.matching.symbols import has_inner_capital
from curation.matching.variants import key_anchors, key_family, keys_from_id, variant_keys
from kb_sources.types import Entity

VARIANT_TYPES = frozenset({"variant", "mutation", "sequencevariant"})
RESIDUE_TYPES = frozenset({"residue", "site"})
PTM_TYPES = frozenset({"ptm", "modification"})


class MatchKind(StrEnum):
    """How a span was matched, best first."""

    EXACT = "exact"
    SYNONYM = "synonym"
    NORMALISED = "normalised"
    ABBREVIATION = "abbreviation"
    FUZZY = "fuzzy"


@dataclass(frozen=True)
class FormRegex:
    """The compiled regex of one surface form (:class:`curation.matching.normalize.SurfacePattern`).

    Attributes:
        anchor: Lower-case substring every match contains ("" = no pre-filter).
        regex: Runs on the lower-cased text when ``on_lower``, else on the text.
        on_lower: See above.
        strict: Case-sensitive check at the match offsets (symbols), or None.
        fallback: ``regex`` with IGNORECASE, for texts whose lower() changes their length.
        mixed: A match failing ``strict`` still counts when a letter after its first character
            is upper case ("CaSR" for CASR).
    """

    anchor: str
    regex: re.Pattern[str]
    on_lower: bool
    strict: re.Pattern[str] | None
    fallback: re.Pattern[str] | None
    mixed: bool = False

    @classmethod
    def compile(cls, pattern: SurfacePattern) -> FormRegex:
        regex = re.compile(pattern.source)
        return cls(pattern.anchor, regex, pattern.on_lower,
                   re.compile(pattern.strict) if pattern.strict else None,
                   re.compile(pattern.source, re.IGNORECASE) if pattern.on_lower else None,
                   pattern.mixed)

    def finditer(self, text: str, lower: str) -> Iterator[tuple[int, int]]:
        """(start, end) of the form's matches in ``text`` (``lower`` = ``text.lower()``)."""
        if self.anchor and self.anchor not in lower:
            return
        if not self.on_lower:
            matches = self.regex.finditer(text)
        elif len(lower) == len(text):
            matches = self.regex.finditer(lower)
        else:
            matches = self.fallback.finditer(text)  # type: ignore[union-attr]
        for m in matches:
            start, end = m.span()
            if end <= start:
                continue
            if self.strict is not None:
                check = self.strict.match(text, start)
                if (check is None or check.end() != end) \
                        and not (self.mixed and has_inner_capital(text[start:end])):
                    continue
            yield start, end


@dataclass(frozen=True)
class CompiledEntity:
    """Everything needed to find one entity, compiled once (see :func:`compile_entity`)."""

    entity: Entity
    patterns: tuple[FormRegex, ...]
    variant_keys: frozenset[str]
    variant_anchors: tuple[str, ...]
    variant_families: frozenset[str]
    forms: Mapping[str, MatchKind]
    fuzzy_forms: tuple[str, ...]

    @property
    def entity_id(self) -> str:
        """The entity's normalised id, else its key."""
        return self.entity.id or self.entity.key

    def kind_of(self, matched: str) -> MatchKind:
        """EXACT when ``matched`` equals the entity's text (ignoring case, hyphens, Greek
        spelling), SYNONYM when it equals a synonym, else NORMALISED."""
        return self.forms.get(fold(matched), MatchKind.NORMALISED)


@lru_cache(maxsize=4096)
def compile_entity(entity: Entity) -> CompiledEntity:
    """Compile an entity's surface forms, residue/PTM patterns and variant keys."""
    surface = list(dict.fromkeys(s.strip() for s in (entity.text, *entity.synonyms) if s.strip()))
    forms: dict[str, MatchKind] = {}
    for i, form in enumerate(surface):
        forms.setdefault(fold(form), MatchKind.EXACT if i == 0 else MatchKind.SYNONYM)
    etype = entity.type.lower()
    sources = dict.fromkeys(p for form in sorted(surface, key=len, reverse=True)
                            for p in _form_patterns(_unshouted(form, etype), etype)
                            if p is not None)
    keys: set[str] = set()
    if etype in VARIANT_TYPES:
        keys = {k for form in surface for k in variant_keys(form)}
        keys |= keys_from_id(entity.id)
    fuzzy_forms = tuple(dict.fromkeys(
        f.lower() for f in surface if not is_symbol(f) and len(tokens(f)) == 1 and f.isalpha()))
    return CompiledEntity(
        entity=entity, patterns=tuple(FormRegex.compile(p) for p in sources),
        variant_keys=frozenset(keys),
        variant_anchors=tuple(dict.fromkeys(a for k in sorted(keys) for a in key_anchors(k))),
        variant_families=frozenset(key_family(k) for k in keys), forms=forms,
        fuzzy_forms=fuzzy_forms)


def _unshouted(form: str, etype: str) -> str:
    """KB variant names in capitals are words, not symbols: "AMPLIFICATION", "ALK FUSIONS"."""
    if etype in VARIANT_TYPES and form.isupper() and re.search(r"[A-Z]{4,}", form):
        return form.lower()
    return form


def _form_patterns(form: str, etype: str) -> list[SurfacePattern | None]:
    patterns = [surface_pattern(form)]
    if etype in RESIDUE_TYPES or etype in VARIANT_TYPES:
        residue = parse_residue(form)
        if residue is not None:
            patterns.append(residue_pattern(*residue))
    if etype in PTM_TYPES:
        patterns.append(ptm_pattern(form))
    return patterns
