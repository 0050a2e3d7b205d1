"""Evidence sentences of answer candidates: where a candidate meets the query entities.

A candidate answer counts as a suggestion only where it shares a sentence with the query
entities (:func:`supporting_sentences`). The sentences and the co-occurrence rule are those of
the result cards (:mod:`curation.matching.evidence`: :func:`split_sentences`,
:func:`select_evidence` over the matcher's spans); here every qualifying sentence is kept, not
the best two, and a sentence must name an *anchor* query entity (:func:`anchor_slots`): a query
slot whose type is in :data:`WEAK_QUERY_TYPES` ("phosphorylation", the PTM type) is in most
sentences of a PTM abstract and so proves nothing alone. When the query names a variant
(:data:`~curation.matching.patterns.VARIANT_TYPES`: PO's "V600E", variant_disease's variant), a
sentence counts only where it names the variant, or where the sentence just before it does and
it does not call a query entity wild-type (:func:`names_the_variant`): "imatinib drives
paradoxical activation of wild-type BRAF" is no evidence for BRAF V600E.

A candidate's match that is part of a longer name is not a mention (:func:`answer_mentions`):
inside a longer match of another entity ("polymerase" in "DNA polymerase gamma"), or, for a
disease slot, a disease word glued by a hyphen to another word ("anti-cancer",
"microphthalmia-associated"), followed within two words by a gene or protein noun of
:data:`GENE_NAME_HEADS` ("tumor necrosis factor", "melanoma antigen"), or a generic disease word
(:func:`~curation.search.answer_classes.is_generic_disease`) after a word that makes it a longer
noun phrase ("death" in "cell death", "cancer" in "breast cancer": :func:`after_a_modifier`).

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
from curation.matching.matcher import VARIANT_TYPES, EntityMatcher, Span
from curation.search.answer_classes import (
    DISEASE_TYPES,
    GENERIC_DISEASE_MODIFIERS,
    GENERIC_DISEASES,
    is_generic_disease,
)
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
#: Nouns that end a gene or protein name: a disease word before them is part of that name
#: ("tumor necrosis factor", "melanoma antigen", "breast cancer susceptibility gene").
GENE_NAME_HEADS = re.compile(
    r"(?:genes?|proteins?|factors?|antigens?|receptors?|suppressors?|ligands?|promoters?|"
    r"transcripts?|homologu?e?s?|enzymes?|kinases?|oncogenes?|oncoproteins?)", re.IGNORECASE)
#: Words that a name runs through: letters, digits, hyphens (no punctuation, no brackets).
_NAME_WORD = re.compile(r"[^\W_][\w\-]*")
#: A query entity called wild-type, unmutated or non-mutant.
_WILD_TYPE = re.compile(r"\b(?:wild[\s-]?type|un-?mutated|non-?mutated|non-?mutant)\b|\bWT\b",
                        re.IGNORECASE)
#: Characters around a query entity in which a wild-type word speaks of it.
_WILD_TYPE_REACH = 16
#: Words before a generic disease word that leave it a mention of the class ("of cancer").
FUNCTION_WORDS = frozenset("""
a an the of in on at to for from with without within by as into onto via per than and or nor
but not no is are was were be been being has have had its their our his her this that which
who whose among between against during after before versus vs including especially both each
any either neither""".split())
_WORD_BEFORE = re.compile(r"([^\W\d_][\w\-]*)\s+$")


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


@dataclass(frozen=True)
class DocumentSupport:
    """What one document says of the candidates (:func:`document_support`).

    Attributes:
        sentences: Candidate key -> the sentences that name it with the query entities, in
            text order (keys without a sentence are left out).
        part_of_names: Keys of the candidates matched in the document only as a part of a
            longer name (:func:`answer_mentions`): the document does not mention them.
    """

    sentences: dict[str, list[Support]]
    part_of_names: frozenset[str] = frozenset()


def supporting_sentences(
    doc_id: str,
    text: str,
    schema: Schema,
    query: Mapping[str, Sequence[Entity]],
    answers: Mapping[str, Entity],
    matcher: EntityMatcher,
    title: str = "",
) -> dict[str, list[Support]]:
    """Candidate key -> the sentences of one document that name it with an anchor query entity
    (:attr:`DocumentSupport.sentences` of :func:`document_support`, whose arguments it takes)."""
    return document_support(doc_id, text, schema, query, answers, matcher, title).sentences


def document_support(
    doc_id: str,
    text: str,
    schema: Schema,
    query: Mapping[str, Sequence[Entity]],
    answers: Mapping[str, Entity],
    matcher: EntityMatcher,
    title: str = "",
) -> DocumentSupport:
    """The sentences of one document that name each candidate with an anchor query entity, and
    the candidates it names only inside longer names (rules: module docstring).

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
    """
    found = matcher.find_spans(
        {**{s: tuple(e) for s, e in query.items() if e}, schema.answer: tuple(answers.values())},
        text)
    spans = answer_mentions(found, schema.answer, text, schema.slot(schema.answer).type)
    by_id: dict[str, list[str]] = {}
    for key, entity in answers.items():
        by_id.setdefault(_id(entity), []).append(key)
    kept = {s.entity_id for s in spans if s.slot == schema.answer}
    part_of_names = frozenset(key for s in found if s.slot == schema.answer
                              and s.entity_id not in kept for key in by_id.get(s.entity_id, ()))
    anchors = set(anchor_slots(schema))
    if not any(s.slot in anchors for s in spans):
        return DocumentSupport({}, part_of_names)
    sentences = (document_sentences(title, text[len(title) + 1:])
                 if title and text.startswith(title + " ") else split_sentences(text))
    out: dict[str, list[Support]] = {}
    for sentence, slots, entity_ids in _evidence(text, schema, query, spans, sentences):
        for entity_id in entity_ids:
            for key in by_id.get(entity_id, ()):
                out.setdefault(key, []).append(Support(doc_id, sentence, slots))
    if schema.slot(schema.answer).type in GENE_SLOT_TYPES:
        _self_modification(doc_id, text, schema, query, spans, sentences, out)
    for supports in out.values():
        supports.sort(key=lambda s: text.find(s.text))
    return DocumentSupport(out, part_of_names)


def _evidence(text: str, schema: Schema, query: Mapping[str, Sequence[Entity]],
              spans: Sequence[Span], sentences: Sequence[tuple[int, int]]
              ) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(sentence, its query slots, answer entity ids) of every evidence sentence: it names an
    anchor query entity, at least :func:`min_query_slots` query slots, and the query's variant
    (:func:`names_the_variant`)."""
    anchors, least = set(anchor_slots(schema)), min_query_slots(schema)
    variants = {s for s in schema.query_slots
                if query.get(s) and schema.slot(s).type in VARIANT_TYPES}
    query_spans = [s for s in spans if s.slot in schema.query_slots]
    out = []
    for ev in select_evidence(sentences, spans, schema.query_slots, schema.answer,
                              limit=len(sentences)):
        if not ev.answers or anchors.isdisjoint(ev.query_slots) \
                or len(ev.query_slots) < least:
            continue
        if variants and not names_the_variant(text, (ev.start, ev.end), sentences, query_spans,
                                              variants):
            continue
        out.append((text[ev.start:ev.end], ev.query_slots, ev.answers))
    return out


def names_the_variant(text: str, sentence: tuple[int, int], sentences: Sequence[tuple[int, int]],
                      query_spans: Sequence[Span], variant_slots: set[str]) -> bool:
    """Whether a sentence speaks of the query's variant: it names it, or the sentence just
    before it does and this one calls no query entity wild-type ("BRAF V600E melanoma was
    studied. These BRAF-mutant tumours responded to vemurafenib." counts; "... Wild-type BRAF
    cells responded to imatinib." does not).

    Args:
        text: The document text.
        sentence: The sentence's offsets.
        sentences: Every sentence of the document, in order.
        query_spans: The document's query mentions.
        variant_slots: The query slots of a variant type that the query fills.
    """
    def inside(start: int, end: int) -> list[Span]:
        return [s for s in query_spans if start <= s.start and s.end <= end]

    start, end = sentence
    if variant_slots <= {s.slot for s in inside(start, end)}:
        return True
    before = [s for s in sentences if s[1] <= start]
    if not before or not variant_slots <= {s.slot for s in inside(*before[-1])}:
        return False
    return not any(_WILD_TYPE.search(text[max(start, s.start - _WILD_TYPE_REACH):s.start])
                   or _WILD_TYPE.search(text[s.end:min(end, s.end + _WILD_TYPE_REACH)])
                   for s in inside(start, end))


def answer_mentions(spans: list[Span], answer_slot: str, text: str = "",
                    answer_type: str = "") -> list[Span]:
    """``spans`` without the answer spans that are part of a longer name (rules: module
    docstring): inside a longer span of another entity ("polymerase" in "DNA polymerase
    gamma"), or, for a disease slot (:data:`DISEASE_TYPES`), a disease word glued to another
    word ("anti-cancer"), in a gene or protein name ("tumor necrosis factor"), or a generic
    one in a longer noun phrase ("cell death").

    Args:
        spans: Query and answer spans of one text.
        answer_slot: The schema's answer slot.
        text: The text the spans point into (needed for the disease rules).
        answer_type: The answer slot's type.
    """
    kept = outermost_answers(spans, answer_slot)
    if not text or answer_type not in DISEASE_TYPES:
        return kept
    return [s for s in kept if s.slot != answer_slot or not (
        in_longer_name(text, s.start, s.end)
        or (is_generic_disease(s.name or s.text) and after_a_modifier(text, s.start)))]


def after_a_modifier(text: str, start: int) -> bool:
    """Whether the word right before ``start`` (white space between them) qualifies the words
    that follow it into a longer noun phrase: a plain lower-case word that is no function word
    of :data:`FUNCTION_WORDS` nor a generic qualifier ("human", "advanced", "mutant"); a symbol
    or code ("V600E cancers") is none. "death" in "cell death" or "cancer" in "breast cancer"
    is then part of a longer term, not a mention of the class; "death" in "led to death" is
    one."""
    before = _WORD_BEFORE.search(text[max(0, start - 40):start])
    if before is None:
        return False
    word = before.group(1)
    if not word.isalpha() or not word.islower():
        return False  # a symbol or code ("V600E cancers", "BRAF-mutant tumours")
    return not ({word, word.removesuffix("s")}
                & (FUNCTION_WORDS | GENERIC_DISEASE_MODIFIERS | GENERIC_DISEASES))


def in_longer_name(text: str, start: int, end: int) -> bool:
    """Whether the words at ``text[start:end]`` are part of a longer word or a gene or protein
    name: glued by a hyphen to a letter or digit ("anti-cancer", "cancer-related",
    "microphthalmia-associated"), or followed within two words by a noun of
    :data:`GENE_NAME_HEADS` ("tumor necrosis factor", "melanoma antigen").

    Example:
        >>> t = "an anti-cancer drug; tumor necrosis factor; melanoma cells"
        >>> [in_longer_name(t, t.find(w), t.find(w) + len(w)) for w in ("cancer", "tumor",
        ...                                                             "melanoma")]
        [True, True, False]
    """
    if (start >= 2 and text[start - 1] == "-" and text[start - 2].isalnum()) or (
            end + 1 < len(text) and text[end] == "-" and text[end + 1].isalnum()):
        return True
    following = []
    for word in _NAME_WORD.finditer(text, end):
        if text[end:word.start()].strip() or len(following) == 2:
            break  # punctuation or a bracket ends the name
        following.append(word.group())
        end = word.end()
    return any(GENE_NAME_HEADS.fullmatch(w.split("-")[-1]) for w in following)


def outermost_answers(spans: list[Span], answer_slot: str) -> list[Span]:
    """``spans`` without the answer spans that lie inside a longer span of another entity (a
    query or answer span): "polymerase" in "DNA polymerase gamma" or "poly(A) polymerase" is
    part of that gene's name, not a mention of the generic "polymerase"."""

    def nested(span: Span) -> bool:
        return any(o.entity_id != span.entity_id and o.start <= span.start
                   and span.end <= o.end and o.end - o.start > span.end - span.start
                   for o in spans)

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
