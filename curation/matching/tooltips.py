"""The tooltip of one highlighted entity: its name, slot and type in words, how it matched, and
links to NCBI Gene / UniProt / MeSH / ... and to the KB records of the relation in view.

A native ``title`` cannot hold links, so the tooltip is HTML placed right after its ``<mark>``
(:func:`curation.matching.highlight.render_highlighted` with ``tips=True``)::

    <span class="kb-ent" tabindex="0"><mark ...>BRAF</mark><span class="kb-tip" role="tooltip">
    <span class="kb-tip-entity"><b class="kb-tip-name">BRAF</b>
    <span class="kb-tip-what">gene</span>
    <span class="kb-tip-links"><a href="https://www.ncbi.nlm.nih.gov/gene/673" ...>NCBI Gene
    673</a></span></span></span></span>

The app's style sheet hides ``.kb-tip`` (``display: none``: copying the abstract or reading
its ``innerText`` never includes it) and shows it on ``:hover`` and ``:focus-within`` of its
``kb-ent``. Everything in it is escaped: names, slots and labels with :func:`html.escape`,
and links only ever come from validated ids (:mod:`curation.matching.entity_links`) or, for
KB record links passed in, only ``https://`` URLs (others are dropped).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from curation.matching.entity_links import Link, entity_links
from curation.matching.matcher import Span
from curation.matching.patterns import MatchKind

__all__ = ["MAX_RECORD_LINKS", "RecordLinks", "entity_tip", "record_links_key"]

#: Entity key -> links to the KB records it fills a slot of (see :func:`entity_tip`).
RecordLinks = Mapping[str, Sequence[Link]]
#: KB record links shown per entity (the rest are counted: "and 3 more").
MAX_RECORD_LINKS = 4

_HOW = {
    MatchKind.SYNONYM: "matched by a synonym",
    MatchKind.NORMALISED: "matched another spelling",
    MatchKind.ABBREVIATION: "matched an abbreviation the text defines",
    MatchKind.FUZZY: "matched a near spelling",
}


def _words(text: str) -> str:
    """Plain words of a slot or type name: ``cell_line`` -> ``cell line``, one line."""
    return " ".join(text.replace("_", " ").split())


def _link(link: Link) -> str:
    return (f'<a href="{html.escape(link.url, quote=True)}" target="_blank" '
            f'rel="noopener noreferrer">{html.escape(_words(link.label))}</a>')


def _how(span: Span) -> str:
    how = _HOW.get(span.kind, "")
    if span.kind is MatchKind.FUZZY:
        how += f" ({span.score:.0%} alike)"
    return how


def _item(group: Sequence[Span], records: Sequence[Link]) -> str:
    """One entity of a tooltip (a mark may hold several: an entity in two slots, or two
    entities at the same offsets)."""
    first = group[0]
    name = _words(first.name) if first.name.strip() else " ".join(first.text.split())
    slots = " and ".join(dict.fromkeys(_words(s.slot) for s in group))
    etype = _words(first.etype)
    what = slots + (f" ({etype})" if etype and etype.lower() != slots.lower() else "")
    parts = [f'<b class="kb-tip-name">{html.escape(name)}</b>',
             f'<span class="kb-tip-what">{html.escape(what)}</span>']
    how = _how(first)
    if how:
        parts.append(f'<span class="kb-tip-how">{html.escape(how)}</span>')
    links = entity_links(first.etype or first.slot, first.entity_id)
    if links:
        parts.append(f'<span class="kb-tip-links">{" ".join(map(_link, links))}</span>')
    safe_records = [r for r in records if r.url.startswith("https://")]
    if safe_records:
        shown = " ".join(_link(link) for link in safe_records[:MAX_RECORD_LINKS])
        more = len(safe_records) - MAX_RECORD_LINKS
        if more > 0:
            shown += f' <span class="kb-tip-more">and {more:d} more</span>'
        parts.append(f'<span class="kb-tip-records"><span class="kb-tip-label">KB records:'
                     f"</span> {shown}</span>")
    if not links and not safe_records:
        parts.append('<span class="kb-tip-none">no database link for this entity</span>')
    return f'<span class="kb-tip-entity">{" ".join(parts)}</span>'


def entity_tip(spans: Sequence[Span], record_links: RecordLinks | None = None) -> str:
    """The ``<span class="kb-tip">`` of one mark's spans (same offsets, one per slot).

    Args:
        spans: The mark's spans; spans of one entity (same ``entity_id``) share one entry
            ("substrate and catalyst").
        record_links: Entity id of a span -> links to the KB records of the relation in view
            that the entity fills a slot of (an entity without an external id: a CIViC
            variant or drug). Only ``https://`` URLs are shown.

    Returns:
        Escaped HTML: the entity's preferred name (the span's ``name``, else the matched
        text), its slot(s) and type in words, how it matched when not by its name, its
        database links and, on a line of their own ("KB records:"), its record links (all
        ``target="_blank" rel="noopener noreferrer"``).
    """
    by_entity: dict[str, list[Span]] = {}
    for span in spans:
        by_entity.setdefault(span.entity_id, []).append(span)
    items = [_item(group, (record_links or {}).get(entity_id, ()))
             for entity_id, group in by_entity.items()]
    return f'<span class="kb-tip" role="tooltip">{"".join(items)}</span>'


def record_links_key(record_links: RecordLinks | None
                     ) -> tuple[tuple[str, tuple[Link, ...]], ...] | None:
    """A hashable, order-free form of ``record_links`` (a cache key); None stays None."""
    if record_links is None:
        return None
    return tuple(sorted((key, tuple(links)) for key, links in record_links.items()))
