"""CIViC evidence-item drafts of accepted source suggestions (CSV / JSON for CIViC's form).

An accepted source suggestion (:mod:`curation.search.suggestions`) says "PMID N supports
<answer> for this relation". A CIViC curator then opens CIViC's *Add Evidence* form and types the
same facts again. :func:`civic_drafts` pre-fills that form's fields from what the workspace knows;
the curator checks them and fills the rest. **The tool never submits anything to CIViC**: the
draft is a file the curator reads while filling the form.

Field names and values are CIViC's (the canonical names of :mod:`kb_sources.civic`: the current
export's ``molecular_profile``, ``therapies``, ``therapy_interaction_type`` and ``significance``
are the 2021 export's ``gene`` + ``variant``, ``drugs``, ``drug_interaction_type`` and
``clinical_significance``). What is pre-filled, and from where:

* ``molecular_profile``: the relation's gene and variant ("BRAF V600E"), when it has both;
* ``disease``: the most specific disease the abstract is about (:func:`draft_disease`): the
  relation's disease slot or answer (variant_disease, disease_gene); for PO, the one disease of
  the relation's KB records that the abstract's evidence sentences (else the abstract) name,
  found by the entity matcher (several: left empty); else the disease the abstract itself names
  most (:func:`abstract_disease`: a disease it defines an abbreviation for, "gastroenteropancreatic
  neuroendocrine tumors (GEP-NETs)", or one annotated in it, those its title names first). A
  generic class ("Cancer", "tumours": :func:`~curation.search.answer_classes.is_generic_disease`)
  or a word inside a longer name ("cancer-related") never fills it: the field is then left
  empty, so ``to_fill`` lists it;
* ``therapies``: the relation's therapy slot or answer, CIViC's comma-separated list;
* ``evidence_type``: ``Predictive`` when the draft names a therapy (CIViC's type for therapeutic
  response, the only evidence PO's relations come from); else empty;
* ``citation_id`` and ``source_type``: the PMID and ``PubMed``;
* ``evidence_statement``: the abstract's sentences that name the answer with the query entities
  (:func:`~curation.search.candidate_sentences.supporting_sentences`), whitespace and control
  characters removed; without such a sentence, the curator's comment. A draft to rewrite.

``therapy_interaction_type``, ``evidence_direction``, ``significance`` and ``evidence_level`` are
judgements no sentence match can make: they stay empty (never guessed), and ``to_fill`` lists
every empty CIViC field. :data:`VOCABULARY` holds CIViC's choices for them.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from curation.matching.abbreviations import compound_abbreviations
from curation.matching.matcher import EntityMatcher
from curation.search.answer_classes import THERAPY_TYPES, fold, is_generic_disease
from curation.search.candidate_merge import singular_key
from curation.search.candidate_sentences import (
    GENE_NAME_HEADS,
    cached_abbreviations,
    in_longer_name,
    supporting_sentences,
)
from curation.search.session import typed_partial
from curation.search.suggestions import answer_entity, list_suggestions
from curation.store.documents import DocumentRow, Documents
from curation.store.entities import Entities
from curation.store.relations import PartialRelation
from curation.store.suggestions import SourceSuggestion, SuggestionStatus
from curation.store.workspace import Workspace
from kb_sources.civic import VOCABULARY as CIVIC_VOCABULARY
from kb_sources.errors import CurationError
from kb_sources.schema import Schema
from kb_sources.spreadsheet import SafeDictWriter
from kb_sources.types import Entity

#: CIViC's evidence-item fields, in the order of its form.
CIVIC_FIELDS = ("molecular_profile", "disease", "therapies", "therapy_interaction_type",
                "evidence_type", "evidence_direction", "significance", "evidence_level",
                "citation_id", "source_type", "evidence_statement")
#: Columns after the CIViC ones: what is left to fill and where the draft comes from.
TRACKING_FIELDS = ("to_fill", "statement_from", "suggestion_id", "schema", "relation",
                   "answer", "comment", "confirmed_by", "reviewed_by")
#: CIViC's choices for the fields a curator fills (evidence types and directions of CIViC's
#: data model; levels, significances and interaction types as :mod:`kb_sources.civic` reads).
VOCABULARY: dict[str, tuple[str, ...]] = {
    "evidence_type": ("Predictive", "Diagnostic", "Prognostic", "Predisposing", "Oncogenic",
                      "Functional"),
    "evidence_direction": ("Supports", "Does Not Support"),
    "evidence_level": CIVIC_VOCABULARY["evidence_level"],
    "significance": CIVIC_VOCABULARY["significance"],
    "therapy_interaction_type": CIVIC_VOCABULARY["therapy_interaction_type"],
    "source_type": ("PubMed", "ASCO", "ASH"),
}
#: What the JSON export and the Review page say about every draft.
NOTICE = ("Drafts for CIViC's Add Evidence form, never submitted by kbcurate: check every "
          "pre-filled field against the abstract, fill the fields listed in to_fill, and "
          "rewrite the evidence statement in your own words.")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e]")
_GENE_TYPES = frozenset({"gene", "protein"})
#: Endings of a disease's last word: "melanoma", "leukaemia", "hepatitis", "fibrosis" (not
#: "stroma", "diagnosis", "prognosis", "apoptosis", "mitosis").
_DISEASE_ENDING = re.compile(
    r"(?:(?<!str)(?<!s)omas?|emias?|itis|(?<!gn)(?<!pt)(?<!it)osis|pathy|plasia|trophy)$")
#: Last words (singular) of a disease's name: "neuroendocrine tumors", "lung cancer".
_DISEASE_HEADS = frozenset({"cancer", "tumor", "tumour", "neoplasm", "neoplasia", "malignancy",
                            "carcinoma", "disease", "disorder", "syndrome", "infection"})
_VARIANT_TYPES = frozenset({"variant", "mutation"})


@dataclass(frozen=True)
class CivicDraft:
    """One evidence-item draft.

    Attributes:
        fields: CIViC field -> pre-filled value ("" for the curator to fill), every one of
            :data:`CIVIC_FIELDS`.
        statement_from: ``sentences`` (the abstract's evidence sentences), ``comment`` (the
            curator's comment: no sentence names the answer with the query) or ``""``.
        suggestion: The accepted source suggestion it drafts.
    """

    fields: dict[str, str]
    statement_from: str
    suggestion: SourceSuggestion

    @property
    def to_fill(self) -> tuple[str, ...]:
        """The CIViC fields left empty for the curator."""
        return tuple(f for f in CIVIC_FIELDS if not self.fields.get(f))

    def row(self) -> dict[str, str]:
        """The draft as one flat row: CIViC fields, then :data:`TRACKING_FIELDS`."""
        s = self.suggestion
        return {**{f: self.fields.get(f, "") for f in CIVIC_FIELDS},
                "to_fill": ", ".join(self.to_fill), "statement_from": self.statement_from,
                "suggestion_id": str(s.id), "schema": s.schema,
                "relation": " · ".join(f"{k}: {v}" for k, v in s.slots.items() if v),
                "answer": s.answer, "comment": clean_text(s.comment),
                "confirmed_by": s.confirmed_by, "reviewed_by": s.reviewed_by}


def clean_text(text: str) -> str:
    """Text for a draft cell: control and direction characters dropped, whitespace collapsed
    (the cell is untrusted text: writers and pages escape it further)."""
    return " ".join(_CONTROL.sub(" ", text or "").split())


def civic_drafts(ws: Workspace, suggestions: Sequence[SourceSuggestion] | None = None, *,
                 matcher: EntityMatcher | None = None) -> list[CivicDraft]:
    """Drafts of accepted source suggestions (all of the workspace's when ``suggestions`` is
    None), in the order given (newest first by default).

    Raises:
        CurationError: A given suggestion that is not accepted (its id and status named), or
            one of a schema the workspace no longer has.
    """
    rows = list_suggestions(ws, status=SuggestionStatus.ACCEPTED) if suggestions is None \
        else list(suggestions)
    pending = [s for s in rows if s.status is not SuggestionStatus.ACCEPTED]
    if pending:
        raise CurationError(
            "Only accepted suggestions get a CIViC draft; "
            + ", ".join(f"#{s.id} is {s.status.value}" for s in pending[:5])
            + ": accept them on the Review page first")
    matcher = matcher or EntityMatcher()
    schemas = ws.schemas()
    docs = Documents(ws).rows_by_id(sorted({s.pmid for s in rows}))
    out = []
    for s in rows:
        if s.schema not in schemas:
            raise CurationError(f"Suggestion #{s.id} is of schema {s.schema!r}, which the "
                                "workspace no longer has; add the schema back to draft it")
        out.append(draft(ws, schemas[s.schema], s, docs.get(s.pmid), matcher))
    return out


def draft(ws: Workspace, schema: Schema, suggestion: SourceSuggestion,
          doc: DocumentRow | None, matcher: EntityMatcher) -> CivicDraft:
    """The draft of one accepted suggestion (rules: module docstring); ``doc`` is its abstract
    (None when the workspace lacks it: no statement from sentences then)."""
    values = _slot_values(schema, suggestion)
    partial = _partial(ws, schema, suggestion)
    answer = _answer(ws, schema, suggestion)
    sentences = _sentences(schema, partial, answer, doc, matcher)
    statement, source = " ".join(sentences), "sentences"
    if not statement:
        statement, source = clean_text(suggestion.comment), "comment" if suggestion.comment \
            else ""
    therapies = _typed(schema, values, THERAPY_TYPES)
    fields = {
        "molecular_profile": _profile(schema, values),
        "disease": draft_disease(ws, schema, values, partial, sentences, doc, matcher),
        "therapies": ",".join(therapies),
        "evidence_type": "Predictive" if therapies else "",
        "citation_id": suggestion.pmid,
        "source_type": "PubMed",
        "evidence_statement": statement,
    }
    return CivicDraft({f: fields.get(f, "") for f in CIVIC_FIELDS}, source, suggestion)


def _answer(ws: Workspace, schema: Schema, suggestion: SourceSuggestion) -> Entity:
    """The answer as the workspace knows it (with its synonyms), else as stored."""
    key = suggestion.answer_key
    if key and Entities(ws).exists(key):
        return Entities(ws).get(key)
    return answer_entity(schema, suggestion.answer, key)


def _slot_values(schema: Schema, suggestion: SourceSuggestion) -> dict[str, list[str]]:
    """Slot -> entity texts: the query slots as stored ("A + B" split), the answer slot."""
    out = {slot: [t.strip() for t in text.split(" + ") if t.strip()]
           for slot, text in suggestion.slots.items()}
    out[schema.answer] = [suggestion.answer.strip()]
    return out


def _typed(schema: Schema, values: Mapping[str, list[str]], types: frozenset[str]) -> list[str]:
    return [v for slot in schema.slot_names if schema.slot(slot).type in types
            for v in values.get(slot, ())]


def _profile(schema: Schema, values: Mapping[str, list[str]]) -> str:
    genes, variants = _typed(schema, values, _GENE_TYPES), _typed(schema, values, _VARIANT_TYPES)
    if not genes or not variants:
        return ""
    return " AND ".join(f"{genes[0]} {v}" for v in variants)


def _partial(ws: Workspace, schema: Schema, suggestion: SourceSuggestion
             ) -> PartialRelation | None:
    """The suggestion's partial relation (the KB's, with its attributes, when its key is the
    stored one), or None when no query slot names a single entity."""
    single = {s: t for s, t in suggestion.slots.items() if t and " + " not in t}
    if not single:
        return None
    return typed_partial(ws, schema, single)


def _sentences(schema: Schema, partial: PartialRelation | None, answer: Entity,
               doc: DocumentRow | None, matcher: EntityMatcher) -> list[str]:
    if partial is None or doc is None or not doc.text.strip():
        return []
    found = supporting_sentences(doc.doc_id, doc.text, schema, partial.query,
                                 {answer.key: answer}, matcher, doc.title or "")
    return list(dict.fromkeys(clean_text(s.text) for s in found.get(answer.key, ())))


def draft_disease(ws: Workspace, schema: Schema, values: Mapping[str, list[str]],
                  partial: PartialRelation | None, sentences: Sequence[str],
                  doc: DocumentRow | None, matcher: EntityMatcher) -> str:
    """The draft's disease (rules: module docstring), "" when no specific disease is found.

    Args:
        ws: The workspace (the abstract's disease annotations).
        schema: The suggestion's schema.
        values: Slot -> entity texts of the suggestion.
        partial: The suggestion's partial relation (its KB records' diseases), or None.
        sentences: The abstract's evidence sentences.
        doc: The abstract, or None when the workspace lacks it.
        matcher: The process-wide matcher.
    """
    named = [d for d in _typed(schema, values, frozenset({"disease"}))
             if not is_generic_disease(d)]
    if named:
        return named[0]
    kb = [d for d in (partial.attributes.get("disease", ()) if partial is not None else ())
          if not is_generic_disease(d)]
    for text in (" ".join(sentences), doc.text if doc is not None else ""):
        hits = [d for d in kb if text and _count_named(matcher, Entity(d, "disease"), text)]
        if hits:
            return hits[0] if len(hits) == 1 else ""
    return abstract_disease(ws, doc, matcher) if doc is not None else ""


def _count_named(matcher: EntityMatcher, entity: Entity, text: str) -> int:
    """How often ``text`` names the disease, not counting a word inside a longer name
    ("cancer" in "cancer-related", :func:`~curation.search.candidate_sentences.in_longer_name`)."""
    return sum(1 for s in matcher.spans(entity, text) if not in_longer_name(text, s.start, s.end))


def abstract_disease(ws: Workspace, doc: DocumentRow, matcher: EntityMatcher) -> str:
    """The specific disease the abstract names most: among the diseases it defines an
    abbreviation for (:func:`defined_diseases`) and its disease annotations, one its title
    names first, then the most mentions, then the longest name; "" without one."""
    found = defined_diseases(doc.text)
    for _, text, _, _ in Documents(ws).annotation_rows([doc.doc_id], ("disease",)):
        if not any(fold(text) in {fold(f) for f in (e.text, *e.synonyms)} for e in found):
            found.append(Entity(text, "disease"))
    scored = [((_count_named(matcher, e, doc.title or "") > 0, _count_named(matcher, e, doc.text),
                len(e.text)), e.text) for e in found if not is_generic_disease(e.text)]
    scored = [item for item in scored if item[0][1]]
    return max(scored)[1] if scored else ""


def defined_diseases(text: str) -> list[Entity]:
    """Diseases the text defines an abbreviation for, the long form as the name and the short
    form as its synonym: a long form whose last word names a disease (:data:`_DISEASE_HEADS`:
    "tumors", "cancer"; an ending such as "melanoma", "leukemia") and that names no gene or
    protein ("tumor necrosis factor")."""
    out: dict[str, Entity] = {}
    for abbr in (*cached_abbreviations(text), *compound_abbreviations(text)):
        words = fold(abbr.long).split()
        last = words[-1] if words else ""
        disease = singular_key(last) in _DISEASE_HEADS or _DISEASE_ENDING.search(last)
        if disease and not any(GENE_NAME_HEADS.fullmatch(w) for w in words):
            out.setdefault(fold(abbr.long), Entity(" ".join(abbr.long.split()), "disease", "",
                                                   (abbr.short,)))
    return list(out.values())


# -- export --------------------------------------------------------------------------------------
def drafts_csv(drafts: Sequence[CivicDraft]) -> str:
    """CSV of the drafts' rows (:meth:`CivicDraft.row`), formula cells neutralised
    (:class:`~kb_sources.spreadsheet.SafeDictWriter`); the header alone for no draft."""
    buffer = io.StringIO()
    writer = SafeDictWriter(buffer, fieldnames=[*CIVIC_FIELDS, *TRACKING_FIELDS], restval="",
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(d.row() for d in drafts)
    return buffer.getvalue()


def drafts_json(drafts: Sequence[CivicDraft]) -> str:
    """JSON: ``{"notice", "vocabulary", "drafts": [row, ...]}`` (rows as :meth:`CivicDraft.row`,
    the vocabulary CIViC's choices for the fields to fill)."""
    return json.dumps({"notice": NOTICE, "vocabulary": VOCABULARY,
                       "drafts": [d.row() for d in drafts]}, indent=2, ensure_ascii=False)


#: Export format -> (writer, file suffix, MIME type).
FORMATS = {"csv": (drafts_csv, "csv", "text/csv"), "json": (drafts_json, "json",
                                                              "application/json")}
