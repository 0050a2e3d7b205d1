"""After a PubMed search: bring the indexes up to date and rank with the schema's default ranking.

The documents a search imported join the workspace, so the union of the workspace's candidates
and PubMed's hits is simply the refreshed corpus, ranked by the code the Curate page runs
(:func:`curation.search.session.rank` for a retriever with or without the entity rerank,
:class:`curation.search.ranked.RankedSearch` for the learned ranker), with the schema's default
ranking (:func:`curation.search.ranked.default_for`).

:func:`refresh_indexes` rebuilds the BM25 index over the new corpus (seconds) and every dense
index that ranking reads, and the active dense version's, *when it is already built*: a dense
rebuild takes its vectors from the embedding cache (``WS/cache/embeddings``), so only the new
documents are encoded. A dense index never built is not built here (that is the index job's
work, minutes to hours); its features count as missing, as on the Curate page. This runs inside
the background job, never in a page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from curation.matching.matcher import EntityMatcher
from curation.search.choices import parse_retriever_choice, resolve_retriever_choice
from curation.search.indexing import (
    get_index,
    index_folder,
    saved_fingerprint,
    with_workspace_defaults,
)
from curation.search.ranked import (
    DefaultRanking,
    default_for,
    is_ranked_choice,
    open_ranked,
    resolve_ranked_choice,
)
from curation.search.session import rank
from curation.store.documents import Documents
from curation.store.models import Models
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
from kb_sources.schema import Schema
from retrievers.base import Hit

logger = logging.getLogger(__name__)

IndexSpec = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class UnionRanking:
    """The refreshed workspace ranked for one relation.

    Attributes:
        hits: The top hits (doc id, score, rank), workspace documents and PubMed's together.
        label: What ranked them ("bm25+rerank", "ranked · PO-ranker@3").
        configuration: The schema's default ranking it followed ("bm25+rerank", "ranked").
        refreshed: The indexes brought up to date ("bm25", "dense {'model': ...}").
    """

    hits: tuple[Hit, ...]
    label: str
    configuration: str
    refreshed: tuple[str, ...]


def _built(ws: Workspace, spec: IndexSpec) -> bool:
    name, options = spec
    folder = index_folder(ws, name, with_workspace_defaults(ws, name, dict(options)))
    return saved_fingerprint(folder) is not None


def dense_indexes(ws: Workspace, schema: str, default: DefaultRanking) -> list[IndexSpec]:
    """The dense indexes the default ranking reads, and the schema's active dense version's."""
    specs: list[IndexSpec] = []
    if is_ranked_choice(default.choice):
        manifest = resolve_ranked_choice(ws, schema, default.choice).manifest
        if isinstance(manifest.get("dense"), str):
            specs.append(("dense", {"model": manifest["dense"]}))
        if manifest.get("base"):
            specs.append(("dense", {}))
    else:
        name, options = parse_retriever_choice(resolve_retriever_choice(ws, schema,
                                                                        default.choice))
        if name != "bm25":
            specs.append((name, options))
    active = Models(ws).active(schema)
    if active is not None:
        specs.append(("dense", {"model": active.id}))
    unique: dict[str, IndexSpec] = {repr(s): s for s in specs}
    return list(unique.values())


def refresh_indexes(ws: Workspace, schema: str,
                    progress: Callable[[str], None] | None = None) -> tuple[str, ...]:
    """Rebuild BM25 and the built dense indexes the schema's ranking reads (see the module
    docstring); returns what was refreshed."""
    done = []
    for spec in [("bm25", {}), *dense_indexes(ws, schema, default_for(ws, schema))]:
        if spec[0] != "bm25" and not _built(ws, spec):
            logger.info("%s %s is not built; not building it here", *spec)
            continue
        get_index(ws, spec[0], spec[1], progress=False)
        done.append(f"{spec[0]} {spec[1]}" if spec[1] else spec[0])
        if progress:
            progress(done[-1])
    return tuple(done)


def rank_relation(ws: Workspace, schema: Schema, partial: PartialRelation, text: str, k: int,
                  *, matcher: EntityMatcher | None = None) -> tuple[list[Hit], str, str]:
    """The top ``k`` of the workspace for a relation by the schema's default ranking:
    (hits, what ranked them, the default's configuration)."""
    default = default_for(ws, schema.name)
    matcher = matcher or EntityMatcher()
    bm25 = get_index(ws, "bm25", progress=False)
    if is_ranked_choice(default.choice):
        version = resolve_ranked_choice(ws, schema.name, default.choice)
        ranked = open_ranked(ws, schema, version, bm25, matcher=matcher)
        hits, _ = ranked.search(ws, text, partial.query, k, partial.query_key)
        return hits, ranked.label, default.configuration
    name, options = parse_retriever_choice(resolve_retriever_choice(ws, schema.name,
                                                                    default.choice))
    retriever = bm25 if name == "bm25" else get_index(ws, name, options, progress=False)
    entities = [e for ents in partial.query.values() for e in ents]
    texts: dict[str, str] = {}

    def doc_text(doc_id: str) -> str:  # what the Curate page's rerank reads
        if doc_id not in texts:
            texts.update({d: row.text for d, row in Documents(ws).rows_by_id([doc_id]).items()})
        return texts.get(doc_id, "")

    hits, label = rank(retriever, text, k, entities=entities, rerank=default.rerank,
                       doc_text=doc_text, matcher=matcher)
    return hits, label, default.configuration


def rank_union(ws: Workspace, schema: Schema, partial: PartialRelation, text: str, k: int,
               *, progress: Callable[[str], None] | None = None) -> UnionRanking:
    """:func:`refresh_indexes`, then :func:`rank_relation`."""
    refreshed = refresh_indexes(ws, schema.name, progress)
    hits, label, configuration = rank_relation(ws, schema, partial, text, k)
    return UnionRanking(tuple(hits), label, configuration, refreshed)


def pubmed_share(hits: Sequence[Hit], found: Mapping[str, int] | Sequence[str]) -> int:
    """How many of ``hits`` PubMed found."""
    wanted = set(found)
    return sum(1 for h in hits if h.doc_id in wanted)
