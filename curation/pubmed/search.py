"""Search PubMed for a relation: esearch, fetch what the workspace lacks, import, index, rank.

:func:`search_pubmed` runs the whole step (the ``pubmed_search`` job and ``kbcurate pubmed
search`` call it):

1. **found**: esearch with the relation's Entrez query (built from its slots by
   :func:`curation.pubmed.query.build_pubmed_query`, or the curator's edited text), relevance
   order, ``usehistory``, at most ``max_hits`` ids;
2. **fetched**: only the PMIDs the workspace lacks, in efetch batches of 200 through the cache
   ``WS/cache/entrez``: a batch of the result that is wholly new and uncached is fetched by the
   search's ``WebEnv`` (no id list sent), any other by its PMIDs (POST from 200 ids); an
   expired ``WebEnv`` falls back to PMIDs. Records stay cached, so a search that failed half-way
   resumes without asking NCBI again;
3. **imported**: every fetched record in one transaction, together with the search's record
   (:class:`curation.store.pubmed_hits.PubmedHits`): documents get ``source = "pubmed"``, the
   hits the search imported their fetch time. Nothing is imported when any request failed
   (an interrupted fetch imports nothing half), and importing again adds nothing;
4. **indexed** and ranked: :func:`curation.pubmed.ranking.rank_union` refreshes the indexes
   and ranks the union of the workspace's candidates and PubMed's hits with the schema's
   default ranking.

The request rate stays under NCBI's limit through one :class:`~kb_sources.eutils.Throttle`
shared by every request of the search.

Steps 1 to 3 are :func:`find_and_import` (optionally between two Entrez dates), which a watch's
run (:mod:`curation.pubmed.watch_run`) calls for each relation it watches before ranking them
all after one index refresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from curation.jobs.guards import retry_busy
from curation.pubmed.query import build_pubmed_query
from curation.pubmed.ranking import rank_union
from curation.search.session import typed_partial
from curation.store.documents import Documents
from curation.store.importer import import_items
from curation.store.pubmed_hits import PubmedHits
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.fetch import (
    EFETCH_BATCH,
    ESEARCH_MAX,
    EntrezSettings,
    EsearchResult,
    EutilsError,
    Throttle,
    cached_pmids,
    esearch,
    fetch_pubmed,
    fetch_pubmed_history,
)
from kb_sources.schema import Schema
from kb_sources.types import Document

logger = logging.getLogger(__name__)

#: Source label of documents a PubMed search imported.
PUBMED_SOURCE = "pubmed"
#: The reader name of its imports (the import ledger and audit log).
IMPORT_READER = "docs:pubmed-search"
#: The stages a search reports, in order.
STAGES = ("found", "fetched", "imported", "indexed", "ranked")


@dataclass(frozen=True)
class SearchProgress:
    """Where a search stands (each report carries every count so far).

    Attributes:
        stage: The last stage reached (:data:`STAGES`).
        count: Records PubMed found in all.
        taken: Ids taken from PubMed (at most ``max_hits``).
        to_fetch: Ids the workspace lacked.
        fetched: Records fetched so far (cache or network).
        imported: Records imported (new documents).
        indexed: The index refreshed last ("bm25").
    """

    stage: str
    count: int = 0
    taken: int = 0
    to_fetch: int = 0
    fetched: int = 0
    imported: int = 0
    indexed: str = ""

    @property
    def fraction(self) -> float:
        """0..1 for a progress bar: found 10%, fetching to 70%, imported 80%, indexed 95%."""
        if self.stage == "fetched":
            return 0.1 + 0.6 * (self.fetched / self.to_fetch if self.to_fetch else 1.0)
        return {"found": 0.1, "imported": 0.8, "indexed": 0.95, "ranked": 1.0}[self.stage]

    def message(self) -> str:
        """One line: "found 1,234 in PubMed (200 taken) · fetched 150 of 180 · imported 180"."""
        parts = [f"found {self.count:,} in PubMed ({self.taken:,} taken)"]
        if STAGES.index(self.stage) >= 1:
            parts.append(f"fetched {self.fetched:,} of {self.to_fetch:,} new")
        if STAGES.index(self.stage) >= 2:
            parts.append(f"imported {self.imported:,}")
        if STAGES.index(self.stage) >= 3:
            parts.append("ranked" if self.stage == "ranked" else f"indexed {self.indexed}")
        return " · ".join(parts)


@dataclass(frozen=True)
class RankedHit:
    """One ranked document: PMID (doc id), rank, score, and whether PubMed found it."""

    pmid: str
    rank: int
    score: float
    from_pubmed: bool


@dataclass(frozen=True)
class PubmedSearchResult:
    """What one PubMed search did and the ranking after it.

    Attributes:
        pubmed_query: The Entrez query sent.
        count: Records PubMed found in all.
        found: The PMIDs taken, in PubMed's relevance order.
        fetched: Records fetched (the ids the workspace lacked and PubMed returned).
        imported: New documents imported.
        hits: The union ranked by the schema's default ranking.
        ranking: What ranked them ("bm25+rerank").
        configuration: The schema's default ranking configuration.
        search_id: The search's row in ``pubmed_searches``.
        translation: How PubMed read the query.
    """

    pubmed_query: str
    count: int
    found: tuple[str, ...]
    fetched: int
    imported: int
    hits: tuple[RankedHit, ...]
    ranking: str
    configuration: str
    search_id: int
    translation: str = ""

    def to_json(self) -> dict[str, Any]:
        """``{"pubmed_query", "count", "fetched", "imported", "hits": [{"pmid", "rank",
        "score"}]}`` (the CLI's ``--json``)."""
        return {"pubmed_query": self.pubmed_query, "count": self.count, "fetched": self.fetched,
                "imported": self.imported,
                "hits": [{"pmid": h.pmid, "rank": h.rank, "score": round(h.score, 6)}
                         for h in self.hits]}


Report = Callable[[SearchProgress], None]


class SearchTracker:
    """The progress of one search: every report carries all counts so far
    (:class:`SearchProgress`), handed to ``progress`` when given."""

    def __init__(self, progress: Report | None = None) -> None:
        self.state = SearchProgress("found")
        self.progress = progress

    def report(self, **changes: Any) -> None:
        """Change the state and report it."""
        self.state = replace(self.state, **changes)
        if self.progress is not None:
            self.progress(self.state)


@dataclass(frozen=True)
class ImportedSearch:
    """Steps 1 to 3 of a search (found, fetched, imported), before any ranking.

    Attributes:
        found: PubMed's answer (its ids in relevance order).
        fetched: Records fetched (the ids the workspace lacked).
        imported: New documents imported.
        search_id: The search's row in ``pubmed_searches``.
    """

    found: EsearchResult
    fetched: int
    imported: int
    search_id: int


def search_pubmed(
    ws: Workspace, schema: Schema, slots: Mapping[str, str], *, settings: EntrezSettings,
    actor: str, query: str | None = None, max_hits: int = 200, rank_text: str | None = None,
    progress: Report | None = None, throttle: Throttle | None = None,
) -> PubmedSearchResult:
    """Search PubMed for a relation, import the new records and rank (module docstring).

    Args:
        ws: The workspace.
        schema: The relation's schema.
        slots: Slot -> entity text of the relation (query slots; at least one).
        settings: E-utilities settings (:func:`curation.pubmed.ncbi.ncbi_settings`).
        actor: Who searches (audit log, ``pubmed_searches``).
        query: An edited Entrez query instead of the built one.
        max_hits: PubMed ids to take (relevance order), 1 to 10,000.
        rank_text: The ranking's query text (default: the relation's templated question).
        progress: Called at each stage and after each fetched batch.
        throttle: Share a throttle with other requests (default: one for this search).

    Raises:
        CurationError: No query slot filled, ``max_hits`` out of range.
        FetchError: PubMed unreachable or answering errors (nothing is imported).
        WorkspaceBusyError: Another import kept running through every retry.
    """
    check_max_hits(max_hits)
    partial = typed_partial(ws, schema, slots)
    term = (query or "").strip() or build_pubmed_query(ws, schema.name, slots).text
    tracker = SearchTracker(progress)
    done = find_and_import(ws, schema.name, partial.query_key, term, settings=settings,
                           actor=actor, max_hits=max_hits, tracker=tracker,
                           throttle=throttle or Throttle.for_settings(settings))
    union = rank_union(ws, schema, partial, rank_text or partial.render(schema).text, max_hits,
                       progress=lambda name: tracker.report(stage="indexed", indexed=name))
    tracker.report(stage="ranked")
    found = done.found
    taken = set(found.ids)
    hits = tuple(RankedHit(h.doc_id, h.rank, h.score, h.doc_id in taken) for h in union.hits)
    logger.info("PubMed search %d for %s %s: %s", done.search_id, schema.name, partial.query_key,
                tracker.state.message())
    return PubmedSearchResult(term, found.count, found.ids, done.fetched, done.imported, hits,
                              union.label, union.configuration, done.search_id,
                              found.translation)


def check_max_hits(max_hits: int) -> None:
    """Raise :class:`CurationError` unless 1 <= ``max_hits`` <= 10,000."""
    if not 1 <= max_hits <= ESEARCH_MAX:
        raise CurationError(f"max hits {max_hits} is out of range; expected 1 to {ESEARCH_MAX:,}")


def find_and_import(ws: Workspace, schema: str, query_key: str, term: str, *,
                    settings: EntrezSettings, actor: str, max_hits: int, tracker: SearchTracker,
                    throttle: Throttle, mindate: str | None = None, maxdate: str | None = None
                    ) -> ImportedSearch:
    """Steps 1 to 3 of a search: esearch ``term`` (between the Entrez dates ``mindate`` and
    ``maxdate``, ``YYYY/MM/DD``, when given), fetch what the workspace lacks, import it with
    the search's record in one transaction. The indexes are not refreshed.

    Raises:
        FetchError: PubMed unreachable or answering errors (nothing is imported).
        WorkspaceBusyError: Another import kept running through every retry.
    """
    found = esearch(term, settings, throttle=throttle, retmax=max_hits, mindate=mindate,
                    maxdate=maxdate)
    known = set(Documents(ws).titles(found.ids))
    missing = [p for p in found.ids if p not in known]
    tracker.report(stage="found", count=found.count, taken=len(found.ids),
                   to_fetch=len(missing))
    docs = fetch_missing(found, missing, settings, throttle,
                         lambda n: tracker.report(stage="fetched", fetched=n))
    tracker.report(stage="fetched", fetched=len(docs))
    search_id, imported = retry_busy(  # another import, a long label write: wait it out
        lambda: import_search(ws, schema, query_key, found, docs, actor),
        "PubMed search: import")
    tracker.report(stage="imported", imported=imported)
    return ImportedSearch(found, len(docs), imported, search_id)


def fetch_missing(found: EsearchResult, missing: Sequence[str], settings: EntrezSettings,
                  throttle: Throttle, on_batch: Callable[[int], None] | None = None
                  ) -> list[Document]:
    """The records of ``missing`` (ids of ``found``), batch by batch of the result: a batch
    wholly missing and uncached by the search's ``WebEnv``, the others by PMID. A ``WebEnv``
    answer keeps only the ids esearch listed for its positions (nothing else is cached)."""
    want = set(missing)
    cached = cached_pmids(settings.cache_dir, missing)
    docs: dict[str, Document] = {}
    for start in range(0, len(found.ids), EFETCH_BATCH):
        window = found.ids[start:start + EFETCH_BATCH]
        todo = [p for p in window if p in want and p not in docs]
        if not todo:
            continue
        got: list[Document] = []
        if found.history is not None and len(todo) == len(window) and not cached & set(todo):
            try:
                got = fetch_pubmed_history(found.history, settings, expected=window,
                                           throttle=throttle, retstart=found.retstart + start,
                                           source=PUBMED_SOURCE)
            except EutilsError as exc:  # the history expired: ask by PMID
                logger.warning("%s; fetching the batch by PMID instead", exc)
        docs.update((d.doc_id, d) for d in got if d.doc_id in want)
        rest = [p for p in todo if p not in docs]
        if rest:
            docs.update((d.doc_id, d) for d in fetch_pubmed(rest, settings, throttle=throttle,
                                                            source=PUBMED_SOURCE))
        if on_batch is not None:
            on_batch(len(docs))
    return list(docs.values())


def import_search(ws: Workspace, schema: str, query_key: str, found: EsearchResult,
                  docs: Sequence[Document], actor: str) -> tuple[int, int]:
    """Import ``docs`` and record the search, in one transaction; (search id, documents
    added)."""
    with ws.transaction():
        present = set(Documents(ws).titles([d.doc_id for d in docs]))
        new = [d.doc_id for d in docs if d.doc_id not in present]
        added = 0
        if docs:
            report = import_items(ws, docs, reader=IMPORT_READER,
                                  path=f"PubMed search: {found.term[:200]}", actor=actor,
                                  progress=False, batch_size=len(docs))
            added = report.documents_added
        search_id = PubmedHits(ws).record(actor=actor, schema=schema, query_key=query_key,
                                          pubmed_query=found.term, hit_count=found.count,
                                          pmids=found.ids, fetched=len(docs), imported=new)
    return search_id, added
