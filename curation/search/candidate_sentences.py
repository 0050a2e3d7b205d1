"""Evidence sentences of answer candidates: where a candidate meets the query entities.

A candidate answer counts as a suggestion only where it shares a sentence with the query
entities (:func:`supporting_sentences`). The sentences and the co-occurrence rule are those of
the result cards (:mod:`curation.matching.evidence`: :func:`split_sentences`,
:func:`select_evidence` over the matcher's spans); here every qualifying sentence is kept, not
the best two, and a sentence must name an *anchor* query entity (:func:`anchor_slots`): a query
slot whose type is in :data:`WEAK_QUERY_TYPES` ("phosphorylation", the PTM type) is in most
sentences of a PTM abstract and so proves nothing alone. A candidate's match inside a longer match
of another candidate ("polymerase" in "DNA polymerase gamma") is part of that name, not a mention
(:func:`outermost_answers`).

Two kinds of candidate are found in the sentences themselves, for a gene answer slot (the PTM
catalyst), since neither the KB nor an annotation may name them:

* an enzyme the abstract defines ("leucine-rich repeat kinase 2 (LRRK2)": a long form naming
  an enzyme, :data:`ENZYME_WORDS`), in a sentence with the query entities
  (:func:`defined_enzymes`); a laboratory technique is none ("polymerase chain reaction (PCR)",
  :mod:`curation.matching.lab_phrases`);
* the query entity itself when the sentence says it modifies itself ("autophosphorylation of
  FGFR1 at Y653", :data:`SELF_MODIFICATION`): UniProt's "by autocatalysis".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from curation.matching.abbreviations import Abbreviation, find_abbreviations
from curation.matching.evidence import document_sentences, select_evidence, split_sentences
from curation.matching.lab_phrases import mentions_technique
from curation.matching.matcher import EntityMatcher, Span
from kb_sources.schema import Schema
from kb_sources.types import Entity

#: Query-slot types that never anchor an evidence sentence alone.
WEAK_QUERY_TYPES = frozenset({"ptm"})
#: Answer-slot types that get enzymes the abstract defines and self-modification.
GENE_SLOT_TYPES = frozenset({"gene", "protein"})
#: A long form naming an enzyme ("Leucine-rich repeat kinase 2", "protein phosphatase 2A").
ENZYME_WORDS = re.compile(
    r"\b\w*(?:kinase|phosphatase|ligase|transferase|acetylase|methylase|protease|peptidase|"
    r"synthase|cyclase|oxidase|reductase|hydrolase|isomerase|helicase|polymerase|nuclease|"
    r"ubiquitinase|sumoylase)s?\b", re.IGNORECASE)
#: A short form that can be a gene symbol: a letter, then letters/digits/hyphens, a capital.
_SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9\-]{1,14}")
#: A sentence that says an entity modifies itself.
SELF_MODIFICATION = re.compile(
    r"\bauto-?(?:phosphorylat|catalys|catalyt|ubiquitinat|acetylat|activat|cleav|process)\w*|"
    r"\bcis-?phosphorylat\w*|\bphosphorylates? (?:itself|its own)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Support:
    """One sentence that names a candidate together with query entities.

    Attributes:
        pmid: The abstract (document id).
        text: The sentence as written (untrusted: escape it before rendering).
        query_slots: The query slots it names, in schema order.
    """

    pmid: str
    text: str
    query_slots: tuple[str, ...]


def anchor_slots(schema: Schema) -> tuple[str, ...]:
    """Query slots whose entity anchors an evidence sentence: those not of a weak type
    (:data:`WEAK_QUERY_TYPES`), or all query slots when every one is weak."""
    strong = tuple(s for s in schema.query_slots
                   if schema.slot(s).type not in WEAK_QUERY_TYPES)
    return strong or tuple(schema.query_slots)


def min_query_slots(schema: Schema) -> int:
    """Query slots an evidence sentence names at least: half of them, rounded up (PO's gene
    or variant; two of PTM's substrate, type and residue)."""
    return (len(schema.query_slots) + 1) // 2


def _id(entity: Entity) -> str:
    """The id a span carries for an entity (:attr:`CompiledEntity.entity_id`)."""
    return entity.id or entity.key


def supporting_sentences(
    doc_id: str,
    text: str,
    schema: Schema,
    query: Mapping[str, Sequence[Entity]],
    answers: Mapping[str, Entity],
    matcher: EntityMatcher,
    title: str = "",
) -> dict[str, list[Support]]:
    """Candidate key -> the sentences of one document that name it with an anchor query entity.

    Args:
        doc_id: The document.
        text: Its text (title + " " + abstract, as the matcher reads it).
        schema: The partial relation's schema.
        query: Query slot -> entities.
        answers: Candidate key -> entity, the candidates the document mentions; a gene answer
            slot also gets the enzymes the document defines (:func:`defined_enzymes`, added to
            ``answers`` by the caller) and self-modifying query entities.
        matcher: The process-wide matcher.
        title: The document's title when ``text`` starts with it: the title is then a sentence
            of its own (:func:`document_sentences`), even without a full stop; else the text
            is split as it is.

    Returns:
        Sentences in text order per candidate key (keys without a sentence are left out).
    """
    anchors = set(anchor_slots(schema))
    spans = outermost_answers(matcher.find_spans(
        {**{s: tuple(e) for s, e in query.items() if e}, schema.answer: tuple(answers.values())},
        text), schema.answer)
    if not any(s.slot in anchors for s in spans):
        return {}
    by_id: dict[str, list[str]] = {}
    for key, entity in answers.items():
        by_id.setdefault(_id(entity), []).append(key)
    sentences = (document_sentences(title, text[len(title) + 1:])
                 if title and text.startswith(title + " ") else split_sentences(text))
    least = min_query_slots(schema)
    out: dict[str, list[Support]] = {}
    for ev in select_evidence(sentences, spans, schema.query_slots, schema.answer,
                              limit=len(sentences)):
        if not ev.answers or anchors.isdisjoint(ev.query_slots) \
                or len(ev.query_slots) < least:
            continue
        sentence = text[ev.start:ev.end]
        for entity_id in ev.answers:
            for key in by_id.get(entity_id, ()):
                out.setdefault(key, []).append(Support(doc_id, sentence, ev.query_slots))
    if schema.slot(schema.answer).type in GENE_SLOT_TYPES:
        _self_modification(doc_id, text, schema, query, spans, sentences, out)
    for supports in out.values():
        supports.sort(key=lambda s: text.find(s.text))
    return out


def outermost_answers(spans: list[Span], answer_slot: str) -> list[Span]:
    """``spans`` without the answer spans that lie inside a longer answer span of another
    entity: "polymerase" in "DNA polymerase gamma" or "poly(A) polymerase" is part of that
    gene's name, not a mention of the generic "polymerase"."""
    answers = [s for s in spans if s.slot == answer_slot]

    def nested(span: Span) -> bool:
        return any(o.entity_id != span.entity_id and o.start <= span.start
                   and span.end <= o.end and o.end - o.start > span.end - span.start
                   for o in answers)

    return [s for s in spans if s.slot != answer_slot or not nested(s)]


def _self_modification(doc_id: str, text: str, schema: Schema,
                       query: Mapping[str, Sequence[Entity]], spans, sentences,
                       out: dict[str, list[Support]]) -> None:
    """Query entities of the answer's type in a sentence that says they modify themselves."""
    answer_type = schema.slot(schema.answer).type
    selves = {_id(e): e for slot in anchor_slots(schema) for e in query.get(slot, ())
              if e.type == answer_type}
    if not selves:
        return
    for start, end in sentences:
        sentence = text[start:end]
        if not SELF_MODIFICATION.search(sentence):
            continue
        inside = [s for s in spans if start <= s.start and s.end <= end
                  and s.slot in schema.query_slots]
        slots = tuple(q for q in schema.query_slots if any(s.slot == q for s in inside))
        for entity_id in dict.fromkeys(s.entity_id for s in inside):
            if entity_id in selves:
                out.setdefault(selves[entity_id].key, []).append(Support(doc_id, sentence, slots))


@lru_cache(maxsize=2048)
def cached_abbreviations(text: str) -> tuple[Abbreviation, ...]:
    """:func:`find_abbreviations`, once per text (the same top abstracts come back as the
    curator moves between relations; scispacy takes ~4 ms an abstract)."""
    return find_abbreviations(text)


def defined_enzymes(text: str, answer_type: str, excluded: set[str]) -> list[Entity]:
    """Enzymes the text defines by an abbreviation ("leucine-rich repeat kinase 2 (LRRK2)"):
    one entity of ``answer_type`` per short form that looks like a gene symbol, with the long
    form as its synonym; none whose short or long form (lower case) is in ``excluded``, nor a
    laboratory technique ("polymerase chain reaction (PCR)")."""
    out: dict[str, Entity] = {}
    for abbr in cached_abbreviations(text):
        short, long = abbr.short.strip(), " ".join(abbr.long.split())
        if not (_SYMBOL.fullmatch(short) and any(c.isupper() for c in short)
                and ENZYME_WORDS.search(long)) or mentions_technique(long):
            continue
        if short.lower() in excluded or long.lower() in excluded:
            continue
        out.setdefault(short.lower(), Entity(short, answer_type, "", (long,)))
    return list(out.values())
