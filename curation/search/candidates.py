"""Answer-slot candidates from the top-ranked abstracts (the suggestions panel of Curate).

The tool suggests, the curator decides. For a partial relation ("BRAF + V600E -> ?") the
candidates are the entities that could fill the answer slot:

* the KB's own answer entities of the schema (every drug any PO record names, every catalyst any
  PTM record names), with their synonyms, found in the abstracts by the
  :class:`~curation.matching.matcher.EntityMatcher`;
* PubTator annotations of the answer slot's type in those abstracts; a broader type (a chemical
  for a drug slot) only for an entity the workspace's dictionary knows under the slot's type
  (see :func:`answer_candidates`: "lipids" is a chemical, not a treatment);
* for a gene slot, enzymes an abstract defines and self-modification
  (:mod:`curation.search.candidate_sentences`).

A candidate is suggested where it shares a sentence with the query entities; each carries those
sentences (:class:`~curation.search.candidate_sentences.Support`: PMID and sentence), the
abstracts they come from, whether it is a class (of drugs, genes or diseases) or generic therapy
(:mod:`curation.search.answer_classes`) and ``new`` when it is a specific answer, supported by a
sentence, that the partial relation does not already list nor a curator rejected. Candidates that
name one entity are one row (:mod:`curation.search.candidate_merge`: the same normalised id, else
the same name once abbreviations and plurals are read: "IL6" and "interleukin (IL)-6";
"GEP-NETs", "NET" and "intestine NETs" where an abstract defines "GEP-NETs"). A curator turns one
into a source suggestion (:mod:`curation.search.suggestions`); its moderation status shows on the
candidate (:attr:`Candidate.suggestion`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from curation.matching.matcher import EntityMatcher
from curation.search.answer_classes import AnswerKind, answer_kind
from curation.search.candidate_merge import Found, merge_found, read_abbreviations
from curation.search.candidate_sentences import (
    GENE_SLOT_TYPES,
    Support,
    cached_abbreviations,
    defined_enzymes,
    document_support,
)
from curation.store.documents import AnnotationRow, Documents
from curation.store.entities import Entities, with_synonyms
from curation.store.relations import PartialRelation
from curation.store.suggestions import Suggestions, SuggestionStatus
from curation.store.workspace import Workspace
from kb_sources.checks import is_pmid as _is_pmid
from kb_sources.schema import Schema
from kb_sources.types import Entity

logger = logging.getLogger(__name__)

#: Slot type -> annotation types that fill it as they are: its own type and narrower ones (a
#: drug is a chemical). A slot type not listed takes annotations of its own type only.
ANNOTATION_TYPES: dict[str, tuple[str, ...]] = {"chemical": ("chemical", "drug")}
#: Slot type -> broader annotation types that fill it only for an entity of the slot's type in
#: the workspace's entity dictionary (a chemical is not always a drug: "lipids", "water").
BROADER_ANNOTATION_TYPES: dict[str, tuple[str, ...]] = {"drug": ("chemical",)}


def is_pmid(value: str) -> bool:
    """True for a PubMed id (1-10 ASCII digits; :func:`kb_sources.checks.is_pmid`)."""
    return _is_pmid(value or "")


@dataclass(frozen=True)
class Candidate:
    """One possible answer found in the top-k abstracts.

    Attributes:
        key: Entity key (``drug:vemurafenib``, ``chemical:D000077484``).
        text: Display text.
        entity: The entity with synonyms (for highlighting).
        pmids: The abstracts whose sentences support it (:attr:`sentences`), in ranking order;
            for a candidate without such a sentence, the abstracts that mention it.
        novel: Specific (not a class or generic therapy), supported by a sentence with the
            query entities, and not yet an answer of this partial relation (:attr:`new` also
            asks that no curator accepted or rejected it).
        sources: Where the candidate came from: "kb", "pubtator", "abstract" (an enzyme the
            abstract defines) and/or "autocatalysis" (the query entity modifies itself).
        sentences: The sentences that name it with the query entities, best abstracts first.
        kind: Specific, or a class / generic therapy (:mod:`curation.search.answer_classes`).
        suggestion: Where this relation's source suggestions of this answer stand: accepted
            if one was, else new (pending) if one is, else rejected; None without one
            (:func:`with_suggestions` refreshes it).
        merged: The keys of the candidates merged into this row, itself included
            (:mod:`curation.search.candidate_merge`).
    """

    key: str
    text: str
    entity: Entity
    pmids: tuple[str, ...]
    novel: bool
    sources: tuple[str, ...]
    sentences: tuple[Support, ...] = ()
    kind: AnswerKind = AnswerKind.SPECIFIC
    suggestion: SuggestionStatus | None = None
    merged: tuple[str, ...] = ()

    @property
    def new(self) -> bool:
        """A NEW answer: :attr:`novel`, and no curator accepted or rejected it as a source
        suggestion of this relation."""
        return self.novel and self.suggestion not in (SuggestionStatus.ACCEPTED,
                                                      SuggestionStatus.REJECTED)

    @property
    def count(self) -> int:
        return len(self.pmids)

    @property
    def with_query(self) -> bool:
        """Named in a sentence with the query entities (a suggestion, not a mere mention)."""
        return bool(self.sentences)


def kb_answer_entities(ws: Workspace, schema: Schema) -> list[Entity]:
    """Every entity that fills the answer slot of some KB record of the schema (with synonyms)."""
    return Entities(ws).answer_slot_entities(schema.name, schema.answer)


def _forms(entity: Entity) -> set[str]:
    return {f.strip().lower() for f in (entity.text, *entity.synonyms) if f.strip()}


def _known(partial: PartialRelation) -> tuple[set[str], set[str]]:
    """Keys and lower-case surface forms of the partial relation's known answers."""
    ents = [e for answer in partial.answers for e in answer]
    return {e.key for e in ents}, {f for e in ents for f in _forms(e)}


def answer_candidates(
    ws: Workspace,
    schema: Schema,
    partial: PartialRelation,
    docs: Sequence[tuple[str, str]],
    matcher: EntityMatcher,
    *,
    kb_entities: Sequence[Entity] | None = None,
    titles: Mapping[str, str] | None = None,
) -> list[Candidate]:
    """Answer-slot candidates in ``docs`` (``(doc_id, text)`` in ranking order), each with the
    sentences that name it together with the query entities.

    Every candidate has the entity type ``T`` the schema declares for the answer slot ("drug"
    for PO's treatment, "gene" for PTM's catalyst). It comes from:

    * the KB: an entity that fills the answer slot of some KB record of the schema
      (:func:`kb_answer_entities`; the readers give it the slot's type) and that the matcher
      finds in a document;
    * a PubTator annotation in a document, by its stored type (PubTator types are mapped on
      import, :data:`kb_sources.pubtator.ENTITY_TYPES`: "ChemicalEntity" is "chemical"):

      - type ``T`` or a narrower one (:data:`ANNOTATION_TYPES`: a drug for a chemical slot):
        as it is, one candidate per annotated id (or text), merged onto a KB answer entity
        with the same surface form;
      - a broader type (:data:`BROADER_ANNOTATION_TYPES`: a chemical for a drug slot): only
        when its text (case-insensitive, spaces collapsed) or one of its ids names an entity
        of type ``T`` in the workspace's entity dictionary (the ``entities`` table and their
        synonyms: KB records of any schema, term lists, curator synonyms); the candidate is
        that entity, with its synonyms. "lipids", "glucose" or "water" are chemicals but no
        drug of the dictionary, so never a treatment;
      - any other type: never;
    * for a gene answer slot, the sentences themselves
      (:mod:`curation.search.candidate_sentences`): an enzyme the abstract defines
      ("leucine-rich repeat kinase 2 (LRRK2)"), and the query entity itself where a sentence
      says it modifies itself ("autophosphorylation"). These are candidates only with a
      supporting sentence.

    Otherwise the query entities are never candidates.

    A candidate is a suggestion where it shares a sentence with an anchor query entity
    (:func:`~curation.search.candidate_sentences.supporting_sentences`: "vemurafenib" in
    "BRAF V600E tumours responded to vemurafenib"; a query's variant named in it or just
    before it, never beside a wild-type gene); one only mentioned elsewhere comes after every
    suggestion, never NEW. A match inside a longer name ("death" in "cell death":
    :func:`~curation.search.candidate_sentences.answer_mentions`) is no mention. A class or
    generic therapy ("BRAF Inhibitor", "Chemotherapy", a gene family such as "ALDH", a disease
    class such as "malignancies": :func:`~curation.search.answer_classes.answer_kind`) is
    marked so and never NEW, nor is the answer of a source suggestion for this relation that a
    curator accepted or rejected (:attr:`Candidate.suggestion` says which). Candidates naming
    one entity are merged first (:mod:`curation.search.candidate_merge`).

    Args:
        ws: The workspace (KB answer entities, the entity dictionary, PubTator annotations).
        schema: The partial relation's schema.
        partial: The partial relation (its known answers decide ``new``; its query entities are
            never candidates, except as above).
        docs: The top-ranked documents as ``(doc_id, title + " " + abstract)``.
        matcher: The process-wide matcher.
        kb_entities: Pre-loaded :func:`kb_answer_entities` (loaded when None).
        titles: doc_id -> title, so a title without a full stop is a sentence of its own
            (without it, such a title runs into the abstract's first sentence).

    Returns:
        Candidates with a supporting sentence first: more supporting abstracts, then specific
        before a class or generic therapy, then more sentences, new before known, then by
        text; then the ones only mentioned, by the abstracts that mention them.
    """
    entities = kb_answer_entities(ws, schema) if kb_entities is None else kb_entities
    query_keys = {e.key for ents in partial.query.values() for e in ents}
    query_forms = {f for ents in partial.query.values() for e in ents for f in _forms(e)}
    found: Found = {}
    by_form: dict[str, str] = {}
    for entity in entities:
        if entity.key in query_keys:
            continue
        pmids = [doc_id for doc_id, text in docs if matcher.mentions(entity, text)]
        for form in _forms(entity):
            by_form.setdefault(form, entity.key)
        if pmids:
            found[entity.key] = (entity, pmids, {"kb"})
    kb = {e.key: e for e in entities}
    _add_annotations(ws, schema, [d for d, _ in docs], found, (by_form, kb),
                     query_keys | query_forms)
    for entity, pmids, sources in found.values():
        if "kb" not in sources:  # annotated somewhere: count every abstract that names it
            pmids.extend(d for d, text in docs if d not in pmids and matcher.mentions(entity, text))
    if schema.slot(schema.answer).type in GENE_SLOT_TYPES:
        _add_defined_enzymes(schema, docs, found, query_forms, matcher)
    found, members = _merged(ws, schema, docs, found)
    support = _support(schema, partial, docs, found, matcher, titles or {})
    out = with_suggestions(ws, schema.name, partial.query_key,
                           _candidates(schema, partial, docs, (found, members), support))
    out.sort(key=lambda c: (not c.with_query, -c.count, c.kind.generic, -len(c.sentences),
                            not c.new, c.text.lower()))
    return out


def _merged(ws: Workspace, schema: Schema, docs: Sequence[tuple[str, str]],
            found: Found) -> tuple[Found, dict[str, set[str]]]:
    """One row per entity (:func:`~curation.search.candidate_merge.merge_found`): the id-less
    candidates' names looked up in the entity dictionary, the abstracts' abbreviations."""
    if len(found) < 2:
        return found, {k: {k} for k in found}
    bare = sorted({f.lower() for e, _, _ in found.values() if not e.id
                   for f in (e.text, *e.synonyms) if f.strip()})
    dictionary = Entities(ws).dictionary_keys(schema.slot(schema.answer).type, bare, []) \
        if bare else {}
    expansions, heads = read_abbreviations([t for _, t in docs],
                                           [e.text for e, _, _ in found.values()],
                                           cached_abbreviations)
    return merge_found(found, dictionary, expansions, heads)


#: Which moderation status a candidate shows when its answer was suggested more than once.
_STATUS_ORDER = (SuggestionStatus.ACCEPTED, SuggestionStatus.NEW, SuggestionStatus.REJECTED)


def with_suggestions(ws: Workspace, schema: str, query_key: str,
                     candidates: Sequence[Candidate]) -> list[Candidate]:
    """``candidates`` (same order) with :attr:`Candidate.suggestion` as the relation's source
    suggestions stand now: a candidate matches a suggestion by key (its own or a merged one)
    or by name (its text or a synonym); several suggestions of one answer show accepted, else
    new (pending), else rejected. Cheap (one query): the Curate page calls it on every render,
    so a moderation shows on a search ranked before it."""
    statuses: dict[str, SuggestionStatus] = {}
    for row in Suggestions(ws).stored(schema=schema, query_key=query_key):
        for mark in (row.answer_key, "text:" + " ".join(row.answer.lower().split())):
            if mark and mark != "text:" and (mark not in statuses or _STATUS_ORDER.index(
                    row.status) < _STATUS_ORDER.index(statuses[mark])):
                statuses[mark] = row.status
    out = []
    for c in candidates:
        marks = [c.key, *c.merged, *("text:" + f for f in _forms(c.entity))]
        found = [statuses[m] for m in marks if m in statuses]
        status = min(found, key=_STATUS_ORDER.index) if found else None
        out.append(c if status is c.suggestion else replace(c, suggestion=status))
    return out


def _add_defined_enzymes(schema: Schema, docs: Sequence[tuple[str, str]],
                         found: Found,
                         query_forms: set[str], matcher: EntityMatcher) -> None:
    """Enzymes an abstract defines (:func:`defined_enzymes`) that no other source names, with
    every abstract that mentions them."""
    etype = schema.slot(schema.answer).type
    known = query_forms | {f for entity, _, _ in found.values() for f in _forms(entity)}
    for _, text in docs:
        for enzyme in defined_enzymes(text, etype, known):
            known |= _forms(enzyme)
            pmids = [d for d, t in docs if matcher.mentions(enzyme, t)]
            found.setdefault(enzyme.key, (enzyme, pmids, {"abstract"}))


def _support(schema: Schema, partial: PartialRelation, docs: Sequence[tuple[str, str]],
             found: Found, matcher: EntityMatcher, titles: Mapping[str, str]
             ) -> dict[str, list[Support]]:
    """Candidate key -> supporting sentences over all documents (ranking order). A document
    that names a candidate only inside longer names ("cancer" in "anti-cancer") leaves its
    abstracts (:func:`~curation.search.candidate_sentences.answer_mentions`)."""
    out: dict[str, list[Support]] = {}
    for doc_id, text in docs:
        answers = {key: ent for key, (ent, pmids, _) in found.items() if doc_id in pmids}
        support = document_support(doc_id, text, schema, partial.query, answers, matcher,
                                   titles.get(doc_id, ""))
        for key, supports in support.sentences.items():
            out.setdefault(key, []).extend(supports)
        for key in support.part_of_names - set(support.sentences):
            found[key][1].remove(doc_id)
    return out


def _candidates(schema: Schema, partial: PartialRelation, docs: Sequence[tuple[str, str]],
                merged: tuple[Found, Mapping[str, set[str]]],
                support: Mapping[str, list[Support]]) -> list[Candidate]:
    """The candidates (rules: :func:`answer_candidates`), before suggestion statuses and the
    panel's order; ``merged`` is (candidates, kept key -> merged keys)."""
    found, members = merged
    etype = schema.slot(schema.answer).type
    known_keys, known_forms = _known(partial)
    selves = {e.key: e for ents in partial.query.values() for e in ents}
    out = []
    for key in dict.fromkeys([*found, *support]):
        sentences = tuple(support.get(key, ()))
        if key in found:
            entity, pmids, sources = found[key]
            if not sentences and ("abstract" in sources or not pmids):
                continue  # a defined enzyme counts only next to the query; no mention left
        else:
            entity, pmids, sources = selves[key], [], {"autocatalysis"}
        kind = answer_kind(entity.text, etype)
        keys = sorted(set(members.get(key, ())) | {key})
        known = bool(set(keys) & known_keys) or bool(_forms(entity) & known_forms)
        out.append(Candidate(
            key, entity.text, entity,
            _ordered([s.pmid for s in sentences] if sentences else pmids, docs),
            bool(sentences) and not kind.generic and not known, tuple(sorted(sources)),
            sentences, kind, merged=tuple(keys)))
    return out


def _add_annotations(ws: Workspace, schema: Schema, doc_ids: Sequence[str],
                     found: Found,
                     lookup: tuple[Mapping[str, str], Mapping[str, Entity]],
                     excluded: set[str]) -> None:
    """Merge the documents' annotations that may fill the answer slot into ``found`` (the rule
    is :func:`answer_candidates`'): onto a KB answer entity with the same surface form, else
    one candidate per annotated id (or text) of the slot's type or a narrower one, or the
    dictionary entity of the slot's type that a broader-typed annotation names. The annotated
    words become synonyms of the candidate ("Taxol" of the dictionary's Paclitaxel), so its
    sentences and highlights find them."""
    by_form, kb = lookup
    etype = schema.slot(schema.answer).type
    as_is = ANNOTATION_TYPES.get(etype, (etype,))
    broader = tuple(t for t in BROADER_ANNOTATION_TYPES.get(etype, ()) if t not in as_is)
    rows = Documents(ws).annotation_rows(doc_ids, (*as_is, *broader))
    dictionary = _dictionary_keys(ws, etype, [r for r in rows if r[2] in broader])
    loaded: dict[str, Entity] = dict(kb)
    dropped: set[str] = set()
    surface: dict[str, set[str]] = {}
    for doc_id, text, atype, ids in rows:
        form = text.lower()
        if atype in as_is:
            key = by_form.get(form) or Entity(text, atype, ids[0] if ids else "").key
        else:
            key = by_form.get(form) or dictionary.get(form) or next(
                (dictionary[f"#{i}"] for i in ids if f"#{i}" in dictionary), None)
        if key is None:
            dropped.add(form)
            continue
        if key in excluded or form in excluded:
            continue
        if key not in loaded:
            loaded[key] = (Entities(ws).get(key) if atype in broader
                           else Entity(text, atype, ids[0] if ids else ""))
        _, pmids, sources = found.setdefault(key, (loaded[key], [], set()))
        if doc_id not in pmids:
            pmids.append(doc_id)
        sources.add("pubtator")
        surface.setdefault(key, set()).add(text)
    for key, texts in surface.items():  # the annotated words are forms to find it by
        entity, pmids, sources = found[key]
        extra = {t for t in texts if t.lower() not in _forms(entity)}
        if extra:
            found[key] = (with_synonyms(entity, extra), pmids, sources)
    if dropped:
        logger.debug("%d annotated %s form(s) are no %s of the entity dictionary, so no "
                     "candidate: %s", len(dropped), "/".join(broader), etype,
                     ", ".join(sorted(dropped)[:10]))


def _dictionary_keys(ws: Workspace, etype: str,
                     annotations: Sequence[AnnotationRow]) -> dict[str, str]:
    """Lower-case surface form, and ``#id``, -> key of the entity of type ``etype`` that the
    workspace's entity dictionary (entities with their synonyms) holds under that text or id,
    for the texts and ids of ``annotations`` (the smallest key when several match)."""
    forms = sorted({text.lower() for _, text, _, _ in annotations})
    ids = sorted({i for *_, ann_ids in annotations for i in ann_ids})
    return Entities(ws).dictionary_keys(etype, forms, ids)


def _ordered(pmids: Sequence[str], docs: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    rank = {doc_id: i for i, (doc_id, _) in enumerate(docs)}
    return tuple(sorted(set(pmids), key=lambda p: rank.get(p, len(rank))))
