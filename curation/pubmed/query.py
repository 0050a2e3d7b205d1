"""From a partial relation to a PubMed (E-utilities) query the curator can read and edit.

Each query slot becomes one clause: the forms of its entity ORed, every form a quoted
title/abstract term (``"V600E"[tiab]``); the clauses are ANDed. The forms come from everything
the workspace knows about the entity:

* **genes**: the KB symbol, spellings that differ in more than case ("B-Raf", "c-Met"; PubMed
  ignores case, so "Braf" adds nothing), and the synonyms of every entity of the workspace with
  the same text (a CIViC gene and the UniProt entry of the same symbol), ranked as papers use
  them (:func:`curation.pubmed.forms.rank_synonyms`);
* **variants** (:func:`curation.matching.notations.expand_variant`): a change in its one- and
  three-letter notations with and without "p." (V600E, Val600Glu, p.V600E, p.Val600Glu), plus
  the variant's stored synonyms (a cDNA form such as c.1799T>A where a KB or curator gave one);
  a codon ("V600") also with the changes at that codon the KB records for the same gene (V600E,
  V600K, ...); a fusion ("EML4-ALK", "BCR-ABL") in its fusion spellings, never its two genes
  ORed apart, and when a partner is the gene slot's gene the gene clause is left out (papers on
  BCR-ABL rarely write ABL1 apart); a class in the words papers use ("amplification",
  "amplified", ...), and dropped with a note where it would only add noise ("EXPRESSION");
* **therapies**: the name and its synonyms; a combination ("Dabrafenib,Trametinib",
  "Dabrafenib + Trametinib") gets one ORed group per drug and the groups are **ANDed**: a paper
  on the combination names both drugs, while ORing them would bring in every paper on either
  drug alone;
* **PTM types and residues**: "phosphorylation" OR "phosphorylated"; S473, Ser473, Ser-473,
  Ser 473, serine 473; **diseases** and other types: the name and its synonyms.

At most ``max_forms`` forms per entity, the most used first; repeats that differ only in case are
dropped; characters that break E-utilities syntax are removed. The same inputs always give the
same query (no randomness, stored order only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from curation.matching.notations import (
    VariantTerms,
    expand_variant,
    names_gene,
    notation_forms,
)
from curation.matching.patterns import PTM_TYPES, RESIDUE_TYPES, VARIANT_TYPES
from curation.matching.variants import scan_variants
from curation.pubmed import forms as f
from curation.store.entities import Entities
from curation.store.relations import PartialRelation, Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema, get_schema
from kb_sources.types import Entity

#: A slot's groups of forms: ANDed, each group ORed.
_Groups = list[tuple[str, ...]]


@dataclass(frozen=True)
class SlotTerms:
    """One slot of the query.

    Attributes:
        slot: Schema slot name ("gene").
        text: What the curator gave ("BRAF"; a stored relation's entities joined with " + ").
        forms: The forms searched, in order ("BRAF", "B-Raf", ...); () when left out.
        clause: Its part of the query ('("BRAF"[tiab] OR "B-Raf"[tiab])'); "" when left out.
        note: How it was expanded, and what was dropped and why (for the UI).
    """

    slot: str
    text: str
    forms: tuple[str, ...]
    clause: str
    note: str = ""


@dataclass(frozen=True)
class PubmedQuery:
    """An E-utilities ``term``: the slots' clauses ANDed.

    Attributes:
        text: The whole query (the curator may edit it before searching).
        slots: Each query slot given, in schema order, with its forms and clause.
    """

    text: str
    slots: tuple[SlotTerms, ...]


@dataclass(frozen=True)
class _Context:
    """What the expansion of one slot may need from the others."""

    ws: Workspace
    schema: Schema
    max_forms: int
    gene_slot: str | None = None
    gene: str = ""
    gene_forms: tuple[str, ...] = ()


def build_pubmed_query(ws: Workspace, schema: str, slots: Mapping[str, str], *,
                       max_forms: int = 12) -> PubmedQuery:
    """The PubMed query for a partial relation typed as entity texts.

    Args:
        ws: The workspace whose entities, synonyms and relations expand the texts.
        schema: Schema name (case-insensitive).
        slots: Query slot -> entity text, as the Curate page and ``kbcurate query`` take them
            (blank values are ignored; a therapy slot may hold a combination).
        max_forms: At most this many forms per entity.

    Raises:
        CurationError: Unknown schema or slot, the answer slot given, ``max_forms`` below 1, or
            nothing to search for (no slot filled, or every slot left out as noise).
    """
    sch = get_schema(schema, ws.schemas())
    filled = _check_slots(sch, slots, max_forms)
    entities = {s: _resolve(ws, sch, s, text) for s, text in filled.items()}
    return _assemble(ws, sch, filled, entities, max_forms)


def partial_pubmed_query(ws: Workspace, partial: PartialRelation, *,
                         max_forms: int = 12) -> PubmedQuery:
    """The PubMed query for a stored partial relation (its entities, with their synonyms).

    Raises:
        CurationError: As :func:`build_pubmed_query`.
    """
    sch = get_schema(partial.schema, ws.schemas())
    texts = {s: " + ".join(e.text for e in ents) for s, ents in partial.query.items() if ents}
    _check_slots(sch, texts, max_forms)
    entities = {s: tuple(partial.query[s]) for s in texts}
    return _assemble(ws, sch, texts, entities, max_forms)


def relation_pubmed_query(ws: Workspace, schema: str, query_key: str, *,
                          max_forms: int = 12) -> PubmedQuery:
    """The PubMed query for the KB's partial relation with this query key.

    Raises:
        CurationError: Unknown schema, or no relation of it has the key.
    """
    sch = get_schema(schema, ws.schemas())
    filters: dict[str, str] = {}
    for slot, text in Relations(ws).slot_texts(sch.name, query_key):
        if slot in sch.query_slots:
            filters.setdefault(slot, text)
    for partial in Relations(ws).partial(sch.name, filters) if filters else ():
        if partial.query_key == query_key:
            return partial_pubmed_query(ws, partial, max_forms=max_forms)
    raise CurationError(f"No {sch.name} relation has the query key {query_key!r}; pick one "
                        f"from the relation list (kbcurate relations --schema {sch.name})")


def _check_slots(schema: Schema, slots: Mapping[str, str], max_forms: int) -> dict[str, str]:
    if max_forms < 1:
        raise CurationError(f"max_forms is {max_forms}; give at least 1 form per entity")
    unknown = [s for s in slots if s not in schema.slot_names]
    if unknown:
        raise CurationError(f"Schema {schema.name} has no slot {', '.join(map(repr, unknown))}; "
                            f"its query slots are {', '.join(schema.query_slots)}")
    if schema.answer in slots and slots[schema.answer].strip():
        raise CurationError(f"Slot {schema.answer!r} is the answer of schema {schema.name}: the "
                            "search looks for it, so leave it out of the query")
    filled = {s: " ".join(v.split()) for s, v in slots.items() if v and v.strip()}
    if not filled:
        raise CurationError(f"Nothing to search for: give at least one of "
                            f"{', '.join(schema.query_slots)} (e.g. "
                            f"{schema.query_slots[0]}=TEXT)")
    return filled


def _resolve(ws: Workspace, schema: Schema, slot: str, text: str) -> tuple[Entity, ...]:
    """The workspace's entities for a typed text (a therapy combination: one per drug)."""
    etype = schema.slot(slot).type
    pieces = f.split_therapies(text) if etype in f.THERAPY_TYPES else [text]
    return tuple(_lookup(ws, etype, piece, (schema.name, slot)) for piece in pieces or [text])


def _lookup(ws: Workspace, etype: str, text: str, slot: tuple[str, str]) -> Entity:
    """The stored entity named ``text`` (its text or a synonym; a variant also by its canonical
    change), with its synonyms; a bare entity when the workspace does not know it."""
    entities = Entities(ws)
    key = entities.key_for_text(etype, text, slot)
    wanted = _change_keys(text) if key is None and etype in VARIANT_TYPES else frozenset()
    if wanted:
        key = next((k for k, t in entities.of_type(etype, slot) if _change_keys(t) & wanted),
                   None)
    return entities.get(key) if key else Entity(text, etype)


def _change_keys(text: str) -> frozenset[str]:
    """Canonical protein/DNA keys of a text that is one change and nothing else."""
    mentions = scan_variants(text.strip(), frozenset({"protein", "dna"}))
    whole = [m for m in mentions if m.start == 0 and m.end == len(text.strip())]
    return whole[0].keys if whole else frozenset()


def _synonyms(ctx: _Context, slot: str, entity: Entity) -> tuple[str, ...]:
    """The entity's synonyms and those of every entity of its type with the same text (same
    case: a CIViC gene and the UniProt entry of its symbol, not the mouse gene "Brca2")."""
    entities = Entities(ctx.ws)
    same = [k for k, text in entities.of_type(entity.type, (ctx.schema.name, slot))
            if text == entity.text and k != entity.key]  # "Brca2" is the mouse gene
    stored = entities.synonyms_by_key([entity.key, *same])
    found = dict.fromkeys([*entity.synonyms, *(s for k in [entity.key, *same]
                                               for s in stored.get(k, ()))])
    return tuple(s for s in found if s != entity.text)


def _forms(etype: str, text: str, synonyms: Sequence[str]) -> list[str]:
    if etype in f.GENE_TYPES:
        return f.gene_forms(text, synonyms)
    if etype in f.THERAPY_TYPES:
        return f.therapy_forms(text, synonyms)
    if etype in PTM_TYPES:
        return f.ptm_forms(text, synonyms)
    if etype in RESIDUE_TYPES:
        return f.residue_forms(text, synonyms)
    return f.plain_forms(text, synonyms)


def _assemble(ws: Workspace, schema: Schema, texts: Mapping[str, str],
              entities: Mapping[str, tuple[Entity, ...]], max_forms: int) -> PubmedQuery:
    order = [s for s in schema.query_slots if s in texts]
    ctx = _Context(ws, schema, max_forms)
    gene_slot = next((s for s in order if schema.slot(s).type in f.GENE_TYPES), None)
    terms: dict[str, SlotTerms] = {}
    if gene_slot is not None:
        gene = entities[gene_slot][0]
        gene_forms = tuple(f.gene_forms(gene.text, _synonyms(ctx, gene_slot, gene)))
        ctx = _Context(ws, schema, max_forms, gene_slot, gene.text, gene_forms)
    groups: dict[str, _Groups] = {}
    implied: list[str] = []
    for slot in order:
        etype = schema.slot(slot).type
        if etype in VARIANT_TYPES:
            terms[slot], groups[slot], names = _variant_slot(ctx, slot, texts[slot],
                                                             entities[slot])
            implied += names
        else:
            terms[slot], groups[slot] = _entity_slot(ctx, slot, texts[slot], entities[slot])
    if gene_slot is not None and implied:
        groups[gene_slot] = []
        terms[gene_slot] = SlotTerms(
            gene_slot, texts[gene_slot], (), "",
            f"left out: the fusion {' / '.join(implied)} names {ctx.gene} already, and papers "
            f"on it rarely write {ctx.gene} apart")
    slots = tuple(terms[s] for s in order)
    clauses = [f.or_clause(g) for s in order for g in groups[s]]  # compound slots flattened
    if not clauses:
        why = "; ".join(f"{t.slot}: {t.note}" for t in slots if t.note)
        raise CurationError(f"Nothing to search for: {why}. Give another slot (e.g. the gene) "
                            "or a more specific entity")
    return PubmedQuery(" AND ".join(clauses), slots)


def _capped(ctx: _Context, forms: Sequence[str], notes: list[str]) -> tuple[str, ...]:
    """At most ``max_forms`` forms (the first ones); what was cut goes into ``notes``."""
    forms = f.dedupe(forms)
    if len(forms) > ctx.max_forms:
        cut = forms[ctx.max_forms:]
        notes.append(f"{len(cut)} more form(s) left out (max_forms={ctx.max_forms}): "
                     f"{', '.join(cut[:3])}{' ...' if len(cut) > 3 else ''}")
    return tuple(forms[:ctx.max_forms])


def _slot_terms(slot: str, text: str, groups: _Groups, notes: list[str]
                ) -> tuple[SlotTerms, _Groups]:
    """The slot's terms, and its non-empty groups (ANDed, each ORed)."""
    groups = [g for g in groups if g]
    forms = tuple(dict.fromkeys(form for g in groups for form in g))
    return SlotTerms(slot, text, forms, f.and_clause(groups) if groups else "",
                     "; ".join(dict.fromkeys(notes))), groups


def _entity_slot(ctx: _Context, slot: str, text: str, entities: tuple[Entity, ...]
                 ) -> tuple[SlotTerms, _Groups]:
    etype = ctx.schema.slot(slot).type
    notes: list[str] = []
    groups = [_capped(ctx, _forms(etype, e.text, _synonyms(ctx, slot, e)), notes)
              for e in entities]
    if len(entities) > 1:
        kind = "drug" if etype in f.THERAPY_TYPES else "entity"
        notes.insert(0, f"a combination of {len(entities)}: each {kind} ANDed, since a paper on "
                     "it names all of them")
    synonyms = sum(len(g) for g in groups) - len(entities)
    if synonyms > 0 and len(entities) == 1:
        notes.insert(0, f"the KB name and {synonyms} other form(s) the workspace knows")
    return _slot_terms(slot, text, groups, notes)


def _variant_slot(ctx: _Context, slot: str, text: str, entities: tuple[Entity, ...]
                  ) -> tuple[SlotTerms, _Groups, list[str]]:
    """A variant slot's terms and groups, and the fusions among them that name the gene slot's
    gene."""
    notes: list[str] = []
    groups: list[tuple[str, ...]] = []
    implied: list[str] = []
    for entity in entities:
        terms = expand_variant(entity.text, ctx.gene, ctx.gene_forms)
        notes += terms.notes
        if terms.fusion and any(names_gene(p, ctx.gene_forms) for p in terms.fusion):
            implied.append("-".join(terms.fusion))
        changes = _codon_changes(ctx, slot, terms) if terms.codons else []
        if changes:
            notes.append(f"the codon with the changes the KB records for {ctx.gene}")
        synonyms = [form for s in _synonyms(ctx, slot, entity) if terms.single
                    and not _is_class_spelling(s, terms) for form in notation_forms(s) or (s,)]
        for i, group in enumerate(terms.groups):
            if i == 0:  # a codon's changes before its "p." forms, which papers write less
                group = (*(g for g in group if not g.startswith("p.")), *changes,
                         *(g for g in group if g.startswith("p.")), *synonyms)
            groups.append(_capped(ctx, group, notes))
    return (*_slot_terms(slot, text, groups, notes), implied)


def _is_class_spelling(synonym: str, terms: VariantTerms) -> bool:
    """A synonym that only respells the class ("Amplification" for AMPLIFICATION)."""
    return any(synonym.casefold() == form.casefold() for g in terms.groups for form in g)


def _codon_changes(ctx: _Context, slot: str, terms: VariantTerms) -> list[str]:
    """The specific changes at the codons of ``terms`` that the KB records for the gene slot's
    gene, most cited first ("V600" -> V600E, V600K, ...)."""
    if ctx.gene_slot is None:
        return []
    counts: dict[str, int] = {}
    for partial in Relations(ctx.ws).partial(ctx.schema.name, {ctx.gene_slot: ctx.gene}):
        genes = partial.query.get(ctx.gene_slot, ())
        if len(genes) != 1 or genes[0].text.casefold() != ctx.gene.casefold():
            continue
        for variant in partial.query.get(slot, ()):
            if re.fullmatch(r"[A-Z]\d+[A-Z]", variant.text) and _at_codon(variant.text, terms):
                counts[variant.text] = counts.get(variant.text, 0) + len(partial.pmids)
    return sorted(counts, key=lambda t: (-counts[t], t))


def _at_codon(text: str, terms: VariantTerms) -> bool:
    return any(set(m.broader) & set(terms.codons)
               for m in scan_variants(text, frozenset({"protein"})))
