"""Domain services behind the curator app (no Streamlit here, so tests reach all of it).

The Curate page asks: which partial relation (a KB one, or entities typed by the curator), which
ranked abstracts for its query (:func:`run_search`: title, PMID, year, journal, score, whether the
KB already cites it, entity spans for highlighting, evidence sentences where a query entity and an
answer meet, the model version that ranked it), which
answers those abstracts suggest (:mod:`curation.search.suggestions`), and how far labelling has come
(:func:`label_progress`, next unlabelled first). Indexes other than a ready one are built by a
background job (:func:`ensure_index_job`), never in the page's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from curation.matching.evidence import find_evidence
from curation.matching.matcher import EntityMatcher, Span
from curation.search.candidates import Candidate, answer_candidates
from curation.search.cards import PUBMED_URL, RankedDoc, card_html  # noqa: F401 (re-exported)
from curation.search.ranked import RankedSearch
from curation.search.rerank import RERANK_SUFFIX, EntityReranker, RerankConfig
from curation.search.suggestions import accepted_answers
from curation.store.documents import DocumentRow, Documents
from curation.store.entities import Entities
from curation.store.importer import query_key as make_query_key
from curation.store.labels import Grade
from curation.store.relations import PartialRelation, Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema
from kb_sources.types import Entity
from retrievers.base import Hit, Retriever

logger = logging.getLogger(__name__)

#: Hits of the base retriever that entity-aware reranking reorders.
RERANK_DEPTH = 50


@dataclass(frozen=True)
class SearchResult:
    """Ranked abstracts of one query with the answer candidates found in them."""

    query_text: str
    model_version: str
    docs: tuple[RankedDoc, ...]
    candidates: tuple[Candidate, ...]


def slot_entities(schema: Schema, partial: PartialRelation,
                  extra_answers: Sequence[Entity] = ()) -> dict[str, tuple[Entity, ...]]:
    """Entities to highlight per slot: the query slots, and the answer slot with the KB's known
    answers plus ``extra_answers`` (candidates found in the abstracts)."""
    out = {slot: tuple(ents) for slot, ents in partial.query.items() if ents}
    answers = {e.key: e for ents in partial.answers for e in ents}
    for e in extra_answers:
        answers.setdefault(e.key, e)
    if answers:
        out[schema.answer] = tuple(answers.values())
    return out


def rank(retriever: Retriever, query_text: str, k: int, *, entities: Sequence[Entity] = (),
         rerank: bool = False, doc_text: Any = None,
         matcher: EntityMatcher | None = None) -> tuple[list[Hit], str]:
    """Top-k hits and the model-version label (the hits' retriever label, "+rerank" when the
    query entities reordered the base retriever's top :data:`RERANK_DEPTH`)."""
    if not query_text.strip():
        raise CurationError("The query is empty; pick a relation or type a question")
    base = retriever.search(query_text, max(k, RERANK_DEPTH) if rerank else k)
    label = base[0].retriever if base else getattr(retriever, "name", "retriever")
    if not rerank:
        return base, label
    reranker = EntityReranker(retriever, doc_text, matcher, RerankConfig(depth=RERANK_DEPTH))
    return reranker.rerank(base, entities, k), label + RERANK_SUFFIX


def run_search(
    ws: Workspace,
    retriever: Retriever,
    schema: Schema,
    partial: PartialRelation,
    query_text: str,
    k: int = 10,
    *,
    matcher: EntityMatcher,
    rerank: bool = False,
    ranked: RankedSearch | None = None,
) -> SearchResult:
    """Rank abstracts for a partial relation's query, with highlights, evidence sentences and
    answer candidates.

    With ``ranked`` (a loaded learned ranker over ``retriever``'s BM25 index), the ranker orders
    the candidates and each card gets its reasons; ``rerank`` is then ignored (the ranker's
    entity features do that work).

    Answers of accepted source suggestions count as known here (highlighted as answers, never
    flagged NEW again).

    Raises:
        CurationError: Empty query text.
    """
    accepted = accepted_answers(ws, schema, partial.query_key)
    if accepted:
        partial = replace(partial, answers=(*partial.answers, *((e,) for e in accepted)))
    entities = [e for ents in partial.query.values() for e in ents]
    texts: dict[str, DocumentRow] = {}

    def doc_text(doc_id: str) -> str:
        if doc_id not in texts:
            texts.update(Documents(ws).rows_by_id([doc_id]))
        row = texts.get(doc_id)
        return "" if row is None else row.text

    why: dict[str, tuple[str, ...]] = {}
    if ranked is not None:
        hits, why = ranked.search(ws, query_text, partial.query, k, partial.query_key)
        version = ranked.label
    else:
        hits, version = rank(retriever, query_text, k, entities=entities, rerank=rerank,
                             doc_text=doc_text, matcher=matcher)
    texts.update(Documents(ws).rows_by_id([h.doc_id for h in hits if h.doc_id not in texts]))
    cited = set(partial.pmids)
    docs = [replace(ranked_doc(texts.get(h.doc_id), h, h.doc_id in cited, version),
                    reasons=why.get(h.doc_id, ())) for h in hits]
    candidates = answer_candidates(ws, schema, partial, [(d.doc_id, d.text) for d in docs],
                                   matcher, titles={d.doc_id: d.title for d in docs})
    highlight = slot_entities(schema, partial, [c.entity for c in candidates])
    docs = [with_spans(d, tuple(matcher.find_spans(highlight, d.text)), schema) for d in docs]
    return SearchResult(query_text, version, tuple(docs), tuple(candidates))


def with_spans(doc: RankedDoc, spans: tuple[Span, ...], schema: Schema) -> RankedDoc:
    """``doc`` with its highlight spans and the evidence sentences they make."""
    evidence = find_evidence(doc.title, doc.abstract, spans, schema.query_slots, schema.answer)
    return replace(doc, spans=spans, evidence=evidence)


def ranked_doc(row: DocumentRow | None, hit: Hit, cited: bool, version: str) -> RankedDoc:
    """The card of a hit; a hit whose document left the workspace gets an empty one."""
    row = row or DocumentRow(hit.doc_id, "", "", None, "")
    year = row.year
    return RankedDoc(doc_id=hit.doc_id, title=row.title or "", abstract=row.abstract or "",
                     year=int(year) if isinstance(year, int | str) and str(year).isdigit()
                     else None,
                     journal=row.journal or "", score=hit.score, rank=hit.rank,
                     cited_by_kb=cited, spans=(), model_version=version)


# -- query entities ------------------------------------------------------------------------------
def lookup_entity(ws: Workspace, etype: str, text: str, slot: tuple[str, str] = ("", "")
                  ) -> Entity:
    """The stored entity of this type whose text or synonym is ``text`` (case-insensitive), with
    its synonyms; one that fills ``slot`` (schema name, slot name) in some KB record wins. A
    bare entity when the workspace does not know the text."""
    clean = " ".join(text.split())
    key = Entities(ws).key_for_text(etype, clean, slot)
    if key is None:
        key = _variant_by_key(ws, etype, clean, slot)
    return Entities(ws).get(key) if key else Entity(clean, etype)


def _variant_by_key(ws: Workspace, etype: str, text: str, slot: tuple[str, str]) -> str | None:
    """A stored variant naming the same change as ``text`` under the matcher's normalisation
    ("p.His1047Arg" finds the KB's "H1047R"); entities filling ``slot`` come first."""
    from curation.matching.variants import variant_keys

    wanted = variant_keys(text)
    if not wanted:
        return None
    for key, entity_text in Entities(ws).of_type(etype, slot):
        if variant_keys(entity_text) & wanted:
            return key
    return None


def typed_partial(ws: Workspace, schema: Schema, values: Mapping[str, str]) -> PartialRelation:
    """A partial relation from entity texts the curator typed (query slots only).

    When the KB has a partial relation with the same entities, that one is returned (with its
    known answers and cited PMIDs), so labels land on the same query key.

    Raises:
        CurationError: No query slot filled.
    """
    filled = {s: v.strip() for s, v in values.items() if s in schema.query_slots and v.strip()}
    if not filled:
        raise CurationError(f"Type at least one of {', '.join(schema.query_slots)}")
    query = {s: (lookup_entity(ws, schema.slot(s).type, v, (schema.name, s)),)
             for s, v in filled.items()}
    key = make_query_key(schema, query)
    resolved = {s: ents[0].text for s, ents in query.items()}  # the KB's own words
    for p in Relations(ws).partial(schema.name, resolved, limit=200):
        if p.query_key == key:
            return p
    return PartialRelation(schema.name, key, query, (), (), (), 0, {})


# -- relation browsing ---------------------------------------------------------------------------
def schemas_with_relations(ws: Workspace) -> list[str]:
    """Names of the schemas that have KB relations, most relations first."""
    return Relations(ws).schemas()


def relation_filters(schema: Schema, slot_values: Mapping[str, str],
                     level: str | None = None) -> dict[str, str]:
    """Filters for :meth:`~curation.store.relations.Relations.partial`: non-empty slot texts and
    an evidence level."""
    out = {s: v.strip() for s, v in slot_values.items() if s in schema.slot_names and v.strip()}
    if level:
        out["evidence_level"] = level
    return out


def corpus_counts(ws: Workspace) -> tuple[int, int]:
    """(documents, KB relations): the sidebar's two numbers, without the full statistics."""
    return Documents(ws).counts()


def schema_sources(ws: Workspace, schema: str) -> list[str]:
    """The knowledge bases (relation sources) that hold relations of ``schema``."""
    return Relations(ws).sources(schema)


def evidence_levels(ws: Workspace, schema: str) -> list[str]:
    """Distinct evidence levels of a schema's relations (empty when none has one)."""
    return Relations(ws).evidence_levels(schema)


def search_relations(rows: Sequence[PartialRelation], text: str) -> list[PartialRelation]:
    """Partial relations whose entities (or synonyms), answers or attributes contain every
    word of ``text`` ("braf v600e")."""
    words = text.lower().split()
    if not words:
        return list(rows)

    def matches(p: PartialRelation) -> bool:
        forms = [f for ents in p.query.values() for e in ents for f in (e.text, *e.synonyms)]
        forms += p.answer_texts() + [v for vals in p.attributes.values() for v in vals]
        haystack = "\n".join(forms).lower()
        return all(w in haystack for w in words)

    return [p for p in rows if matches(p)]


def relation_label(p: PartialRelation, schema: Schema) -> str:
    """One line for a picker: "BRAF · V600E → ? (2 known treatment, 3 PMIDs)"."""
    query = " · ".join(" + ".join(e.text for e in p.query.get(s, ())) or "–"
                       for s in schema.query_slots)
    return (f"{query} → ? ({len(p.answer_texts())} known {schema.answer}, "
            f"{len(p.pmids)} PMIDs)")


# -- labelling progress --------------------------------------------------------------------------
@dataclass(frozen=True)
class LabelProgress:
    """Labelled ``labelled`` of ``total`` shown abstracts; ``next_doc`` is the first unlabelled."""

    labelled: int
    total: int
    next_doc: str | None


def label_progress(docs: Sequence[RankedDoc], grades: Mapping[str, Grade]) -> LabelProgress:
    done = sum(1 for d in docs if d.doc_id in grades)
    nxt = next((d.doc_id for d in docs if d.doc_id not in grades), None)
    return LabelProgress(done, len(docs), nxt)


def queue_order(docs: Sequence[RankedDoc], grades: Mapping[str, Grade],
                unlabelled_first: bool = True) -> list[RankedDoc]:
    """Documents in rank order, the unlabelled ones first when asked."""
    if not unlabelled_first:
        return list(docs)
    return sorted(docs, key=lambda d: (d.doc_id in grades, d.rank))


# -- indexes -------------------------------------------------------------------------------------
def documents_stamp(ws: Workspace) -> str:
    """A cheap marker that changes when documents are added or updated."""
    n, last = Documents(ws).marker()
    return f"{n}:{last}"

