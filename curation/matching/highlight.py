"""Escaped HTML of a title and abstract with entity spans highlighted, one colour per slot.

Titles and abstracts are untrusted: every character of them goes through :func:`html.escape`, and
the only markup in the output is our own ``<mark>``, ``<div>`` and ``<span>`` tags, whose
attribute values (slot names, entity ids) are escaped too and whose colours must be CSS colour
literals. A ``<script>`` in an abstract comes out as the text "&lt;script&gt;".

Per-slot toggles: the caller passes ``enabled_slots``; every mark carries ``data-slot`` and a
CSS class per slot (``kb-slot-gene``) so a page can also toggle with CSS.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from curation.matching.matcher import Span, resolve_overlaps
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Colour-blind-friendly pastel backgrounds, assigned to slots in order.
PALETTE: tuple[str, ...] = ("#fde68a", "#bfdbfe", "#bbf7d0", "#fbcfe8", "#ddd6fe", "#fed7aa",
                            "#a5f3fc", "#e5e7eb")
_COLOUR = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})|[a-zA-Z]{3,20}")


def slot_colours(slots: Iterable[str], palette: Sequence[str] = PALETTE) -> dict[str, str]:
    """One colour per slot, in the order given (the palette repeats after its last colour)."""
    return {slot: palette[i % len(palette)] for i, slot in enumerate(dict.fromkeys(slots))}


def css_class(slot: str) -> str:
    """CSS class of a slot: ``kb-slot-`` + the slot name reduced to ``[a-z0-9_-]``."""
    name = re.sub(r"[^a-z0-9_-]+", "-", slot.lower()).strip("-")
    return f"kb-slot-{name or 'slot'}"


def _checked_colour(slot: str, colour: str) -> str:
    if not _COLOUR.fullmatch(colour):
        raise CurationError(
            f"Colour {colour!r} for slot {slot!r} is not a CSS colour literal; "
            "use #rgb, #rrggbb, #rrggbbaa or a colour name such as 'gold'")
    return colour


def _mark(text: str, span: Span, colour: str) -> str:
    attrs = {
        "class": f"kb-mark {css_class(span.slot)}",
        "data-slot": span.slot,
        "data-entity": span.entity_id,
        "data-kind": span.kind.value,
        "title": f"{span.slot}: {span.entity_id} ({span.kind.value}, {span.score:.2f})",
        "style": f"background-color:{colour}",
    }
    rendered = " ".join(f'{k}="{html.escape(v, quote=True)}"' for k, v in attrs.items())
    return f"<mark {rendered}>{html.escape(text)}</mark>"


def _render_part(text: str, offset: int, spans: Sequence[Span],
                 colours: Mapping[str, str]) -> str:
    """Escaped HTML of ``text`` (which starts at ``offset`` of the full text) with marks."""
    out: list[str] = []
    cursor = 0
    end_of_part = offset + len(text)
    for span in spans:
        start, end = max(span.start, offset) - offset, min(span.end, end_of_part) - offset
        if end <= start or start < cursor:
            continue
        out.append(html.escape(text[cursor:start]))
        out.append(_mark(text[start:end], span, colours[span.slot]))
        cursor = end
    out.append(html.escape(text[cursor:]))
    return "".join(out)


def visible_spans(spans: Iterable[Span], enabled_slots: Collection[str] | None = None,
                  text_length: int | None = None) -> list[Span]:
    """Spans of the enabled slots, inside the text, without overlaps (longest leftmost wins)."""
    candidates = [s for s in spans
                  if (enabled_slots is None or s.slot in enabled_slots) and s.end > s.start >= 0
                  and (text_length is None or s.end <= text_length)]
    by_key = {(s.start, s.end, s.kind, s.score): s for s in reversed(candidates)}
    kept = resolve_overlaps(list(by_key))
    return [by_key[k] for k in kept]


def render_highlighted(
    doc_title: str,
    doc_abstract: str,
    spans: Iterable[Span],
    slot_colours: Mapping[str, str] | None = None,
    enabled_slots: Collection[str] | None = None,
) -> str:
    """HTML of a document with its entity spans marked; all document text escaped.

    Args:
        doc_title: Title (untrusted).
        doc_abstract: Abstract (untrusted).
        spans: Spans with offsets into ``title + " " + abstract`` (:attr:`Document.text`).
        slot_colours: Slot -> CSS colour (default: :func:`slot_colours` over the spans' slots).
        enabled_slots: Slots to highlight (default: all); the others render as plain text.

    Returns:
        ``<div class="kb-doc">`` with a title and an abstract ``<div>``.

    Raises:
        CurationError: A colour is not a CSS colour literal.
    """
    spans = list(spans)
    colours = dict(slot_colours or {})
    for slot, colour in slot_colours_for(spans, colours).items():
        colours[slot] = _checked_colour(slot, colour)
    abstract_offset = len(doc_title) + 1 if doc_title and doc_abstract else 0
    total = len(doc_title) + len(doc_abstract) + (1 if doc_title and doc_abstract else 0)
    kept = visible_spans(spans, enabled_slots, total)
    title_html = _render_part(doc_title, 0, kept, colours) if doc_title else ""
    abstract_html = _render_part(doc_abstract, abstract_offset, kept, colours) \
        if doc_abstract else ""
    return (f'<div class="kb-doc"><div class="kb-title">{title_html}</div>'
            f'<div class="kb-abstract">{abstract_html}</div></div>')


def slot_colours_for(spans: Iterable[Span], colours: Mapping[str, str]) -> dict[str, str]:
    """``colours`` completed with palette colours for slots of ``spans`` that have none."""
    missing = [s.slot for s in spans if s.slot not in colours]
    extra = slot_colours([*colours, *missing])
    return {**{s: extra[s] for s in missing}, **colours}


def render_legend(
    slot_colours: Mapping[str, str],
    enabled_slots: Collection[str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> str:
    """HTML legend: one swatch per slot; switched-off slots carry ``kb-off`` and are struck out.

    Args:
        slot_colours: Slot -> CSS colour.
        enabled_slots: Slots currently highlighted (default: all).
        labels: Slot -> display label (default: the slot name).

    Raises:
        CurationError: A colour is not a CSS colour literal.
    """
    items = []
    for slot, colour in slot_colours.items():
        on = enabled_slots is None or slot in enabled_slots
        label = (labels or {}).get(slot, slot)
        style = f"background-color:{_checked_colour(slot, colour)}"
        if not on:
            style += ";opacity:0.45;text-decoration:line-through"
        classes = f"kb-legend-item {css_class(slot)}" + ("" if on else " kb-off")
        items.append(
            f'<span class="{html.escape(classes, quote=True)}" '
            f'data-slot="{html.escape(slot, quote=True)}" data-enabled="{str(on).lower()}" '
            f'style="{style};padding:0 0.4em;margin-right:0.4em;border-radius:3px">'
            f"{html.escape(label)}</span>")
    return f'<div class="kb-legend">{"".join(items)}</div>'
