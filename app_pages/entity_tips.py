"""Links to the KB records of the relation in view, for the highlight tooltips of its cards.

An entity without an external id (a CIViC variant "V600E", a CIViC or OncoKB drug) has no
NCBI Gene or MeSH page; its tooltip links to the KB records of the relation it fills a slot of
instead (:func:`curation.matching.entity_links.record_link`: the CIViC evidence item, the OncoKB
alteration page, the UniProt entry). Read once per relation and process (the key holds the
relation's record count, so an import that adds or drops records reads them again).
"""

from __future__ import annotations

import streamlit as st

from curation.matching.entity_links import Link, record_link
from curation.store.relations import PartialRelation, Relations
from curation.store.workspace import Workspace


@st.cache_resource(show_spinner=False, max_entries=256)
def _record_links(_ws: Workspace, root: str, schema: str, query_key: str,
                  n_records: int) -> dict[str, tuple[Link, ...]]:
    links: dict[str, dict[str, Link]] = {}
    for source, record_id, entity_key in Relations(_ws).record_entities(schema, query_key):
        link = record_link(source, record_id)
        if link is not None:
            links.setdefault(entity_key, {}).setdefault(link.url, link)
    return {key: tuple(found.values()) for key, found in links.items()}


def record_links(ws: Workspace, partial: PartialRelation) -> dict[str, tuple[Link, ...]]:
    """Entity key -> links to the KB records of ``partial`` that the entity fills a slot of
    (every record of the group for a query entity, its own records for an answer); {} for a
    typed query without KB records."""
    if not partial.n_records:
        return {}
    return _record_links(ws, str(ws.root), partial.schema, partial.query_key, partial.n_records)
