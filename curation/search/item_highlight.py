"""The entity highlights of one labelled item (schema, query_key, doc_id), as the Curate page
draws them, for the Review page (the label log's abstract and the disagreements view).

An item's labels keep only the relation's query key, so :func:`item_relation` finds the partial
relation again: the KB relation with that key (looked up by its entities' texts, one filtered
query instead of listing the schema's relations), else the typed query the key was built from
(:func:`curation.search.session.typed_partial`). :func:`item_spans` then marks what
:func:`curation.search.session.run_search` marks in a result card: the query entities, the
known answers (accepted source suggestions included) and the answer candidates found in the
document. Draw the spans with :func:`curation.matching.highlight.render_highlighted` and the
colours of :func:`curation.matching.highlight.slot_colours` over the schema's slots.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from curation.access.adjudication import relation_slot_texts
from curation.matching.matcher import EntityMatcher, Span
from curation.search.candidates import answer_candidates
from curation.search.session import slot_entities, typed_partial
from curation.search.suggestions import accepted_answers
from curation.store.relations import PartialRelation, Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

__all__ = ["item_relation", "item_spans"]

logger = logging.getLogger(__name__)


def item_relation(ws: Workspace, schema: Schema, query_key: str) -> PartialRelation | None:
    """The partial relation whose query key the item's labels carry, or None when the key is
    neither a KB relation of ``schema`` nor a typed query of one entity per slot."""
    texts = relation_slot_texts(ws, schema.name, query_key, {schema.name: schema})
    first = {slot: found[0] for slot, found in texts.items()
             if slot in schema.query_slots and found and found[0].strip()}
    if not first:
        return None
    for partial in Relations(ws).partial(schema.name, first):
        if partial.query_key == query_key:
            return partial
    if any(len(found) > 1 for found in texts.values()):
        return None  # typed queries name one entity per slot
    try:
        typed = typed_partial(ws, schema, first)
    except CurationError as exc:  # a slot the schema no longer has
        logger.info("no relation for %s %s: %s", schema.name, query_key, exc)
        return None
    return typed if typed.query_key == query_key else None


def item_spans(ws: Workspace, schema: Schema, partial: PartialRelation, doc_id: str,
               text: str, matcher: EntityMatcher) -> list[Span]:
    """Spans to mark in one document (``text``: title + " " + abstract) for ``partial``: its
    query entities, its known answers with the accepted suggestions, and the answer candidates
    the document mentions (as a Curate result card has them)."""
    accepted = accepted_answers(ws, schema, partial.query_key)
    if accepted:
        partial = replace(partial, answers=(*partial.answers, *((e,) for e in accepted)))
    candidates = answer_candidates(ws, schema, partial, [(doc_id, text)], matcher)
    return matcher.find_spans(slot_entities(schema, partial, [c.entity for c in candidates]),
                              text)
