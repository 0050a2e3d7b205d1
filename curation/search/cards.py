"""One ranked abstract as the Curate page shows it, and its card as escaped HTML.

A card's highlighted text and evidence sentences depend only on the document (text, spans,
evidence) and the highlight settings, not on its label, so they are rendered once per process
and reused (:func:`highlighted_html`, and the evidence part of :func:`card_html`): a label click
re-draws every card of the list, and only the first line (the label) changed.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from curation.matching.entity_links import Link
from curation.matching.evidence import Evidence, mark_colours, render_evidence
from curation.matching.highlight import render_highlighted
from curation.matching.matcher import Span
from curation.matching.tooltips import RecordLinks, record_links_key
from curation.search.candidates import is_pmid
from kb_sources.types import joined_text

PUBMED_URL = "https://pubmed.ncbi.nlm.nih.gov/{pmid}/"
#: Rendered cards kept per process (a few result lists of 50 in a few highlight settings).
RENDERED_CARDS = 512


@dataclass(frozen=True)
class RankedDoc:
    """One ranked abstract as the Curate page shows it.

    Attributes:
        doc_id: Document id (the PMID for PubMed records).
        title: Title (untrusted text: escape before display).
        abstract: Abstract (untrusted text).
        year: Publication year, when known.
        journal: Journal name ("" when unknown; untrusted text).
        score: Retriever score (comparable within one ranking).
        rank: 1-based rank.
        cited_by_kb: The KB already cites this PMID for the partial relation.
        spans: Entity mentions (offsets into ``title + " " + abstract``) per slot.
        model_version: What ranked it (the hit's retriever label, "+rerank" when reranked).
        evidence: Sentences (offsets into :attr:`text`) where a query entity and an answer
            co-occur, best first, or the one naming the most query entities
            (:mod:`curation.matching.evidence`).
        reasons: Why the learned ranker put it here: its top three feature contributions in
            words (plain text; empty for other retrievers).
        from_pubmed: When a "Search PubMed" imported it (UTC, ISO 8601; "" for documents
            that came otherwise): the card says "from PubMed, DATE".
        new_since: The day since which a watch of the relation found it new (``YYYY-MM-DD``;
            "" for none): the card says "NEW since DATE".
        order_labels: Shown in the order learned within the query from this many labels of
            the relation (:func:`curation.screening.order.learned_order`); None: as ranked.
            A label given on it records it.
    """

    doc_id: str
    title: str
    abstract: str
    year: int | None
    journal: str
    score: float
    rank: int
    cited_by_kb: bool
    spans: tuple[Span, ...]
    model_version: str
    evidence: tuple[Evidence, ...] = ()
    reasons: tuple[str, ...] = ()
    from_pubmed: str = ""
    new_since: str = ""
    order_labels: int | None = None

    @property
    def text(self) -> str:
        """Title and abstract joined as the span offsets expect."""
        return joined_text(self.title, self.abstract)

    @property
    def pmid(self) -> str | None:
        """The PMID (digits), or None for a document that is not a PubMed record."""
        return self.doc_id if is_pmid(self.doc_id) else None

    @property
    def pubmed_url(self) -> str | None:
        return PUBMED_URL.format(pmid=self.pmid) if self.pmid else None


def highlighted_html(doc: RankedDoc, colours: Mapping[str, str],
                     enabled_slots: Collection[str] | None = None,
                     record_links: RecordLinks | None = None) -> str:
    """The card's title and abstract with the entity marks and their tooltips
    (:func:`~curation.matching.highlight.render_highlighted` with ``tips=True``: name, slot,
    NCBI Gene / MeSH / UniProt links, and ``record_links``: entity id -> links to the KB
    records of the relation in view), rendered once per document, highlight setting and
    record links."""
    return _highlighted(doc, _colour_key(colours), _enabled_key(enabled_slots),
                        record_links_key(record_links))


def _colour_key(colours: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(colours.items()))


def _enabled_key(enabled_slots: Collection[str] | None) -> frozenset[str] | None:
    return None if enabled_slots is None else frozenset(enabled_slots)


@lru_cache(maxsize=RENDERED_CARDS)
def _highlighted(doc: RankedDoc, colours: tuple[tuple[str, str], ...],
                 enabled: frozenset[str] | None,
                 records: tuple[tuple[str, tuple[Link, ...]], ...] | None = None) -> str:
    return render_highlighted(doc.title, doc.abstract, doc.spans, dict(colours), enabled,
                              tips=True, record_links=dict(records or ()))


@lru_cache(maxsize=RENDERED_CARDS)
def _evidence(doc: RankedDoc, colours: tuple[tuple[str, str], ...],
              enabled: frozenset[str] | None) -> str:
    return render_evidence(doc.text, doc.evidence, doc.spans, dict(colours), enabled)



def card_html(doc: RankedDoc, highlighted: str, grade: str | None = None, *,
              colours: Mapping[str, str] | None = None,
              enabled_slots: Collection[str] | None = None) -> str:
    """One result card as escaped HTML: a first line (rank, PubMed link, year, journal, score,
    the current label, a badge when the KB cites it, one when a PubMed search fetched it, one
    when a watch found it new) above
    ``highlighted`` (the output of :func:`curation.matching.highlight.render_highlighted`), then
    the evidence sentences (:func:`curation.matching.evidence.render_evidence`) and, for the
    learned ranker, why it ranks the document here.

    Document text is escaped; the link is built only from a validated PMID. Newlines become
    spaces so a markdown renderer keeps the whole card one HTML block.

    Args:
        doc: The ranked document.
        highlighted: Its highlighted title and abstract.
        grade: The current label, shown in the first line.
        colours: Slot -> colour of the evidence marks (default: the colours of the marks in
            ``highlighted``, so the sentences match the abstract above them).
        enabled_slots: Slots marked in the evidence (default: every slot when ``colours`` is
            given, else the slots that have a mark in ``highlighted``).
    """
    parts = [f"<b>#{doc.rank}</b>"]
    parts.append(f'<a href="{doc.pubmed_url}" target="_blank" rel="noopener noreferrer">'
                 f"PMID {doc.pmid}</a>" if doc.pmid else html.escape(doc.doc_id))
    if doc.year:
        parts.append(str(doc.year))
    if doc.journal:
        parts.append(f"<i>{html.escape(doc.journal)}</i>")
    parts.append(f"score {doc.score:.3g}")
    if grade:
        parts.append(f'<span class="kb-grade">labelled <b>{html.escape(grade)}</b></span>')
    if doc.cited_by_kb:
        parts.append('<span class="kb-badge">cited by KB</span>')
    if doc.from_pubmed:
        parts.append('<span class="kb-badge kb-pubmed">from PubMed, '
                     f"{html.escape(doc.from_pubmed[:10])}</span>")
    if doc.new_since:
        parts.append('<span class="kb-badge kb-new">NEW since '
                     f"{html.escape(doc.new_since[:10])}</span>")
    header = f'<div class="kb-meta">{" · ".join(parts)}</div>'
    if colours is None:
        colours = mark_colours(highlighted)
        enabled_slots = frozenset(colours) if enabled_slots is None else enabled_slots
    evidence = _evidence(doc, _colour_key(colours), _enabled_key(enabled_slots))
    why = ""
    if doc.reasons:
        why = ('<div class="kb-why"><b>Why this rank:</b> '
               + "; ".join(html.escape(r) for r in doc.reasons) + "</div>")
    return (header + highlighted + evidence + why).replace("\r", " ").replace("\n", " ")


def with_fetch_dates(docs: Sequence[RankedDoc], dates: Mapping[str, str]
                     ) -> tuple[RankedDoc, ...]:
    """``docs`` with :attr:`RankedDoc.from_pubmed` set from ``dates`` (doc id -> when a PubMed
    search imported it, :meth:`curation.store.pubmed_hits.PubmedHits.fetch_dates`)."""
    return tuple(replace(d, from_pubmed=dates[d.doc_id]) if d.doc_id in dates else d
                 for d in docs)


def with_new_since(docs: Sequence[RankedDoc], dates: Mapping[str, str]
                   ) -> tuple[RankedDoc, ...]:
    """``docs`` with :attr:`RankedDoc.new_since` set from ``dates`` (doc id -> the day since
    which a watch found it new, :func:`curation.pubmed.watch_digest.new_since`)."""
    return tuple(replace(d, new_since=dates[d.doc_id]) if d.doc_id in dates else d
                 for d in docs)
