"""Escaped HTML of a title and abstract with entity spans highlighted, one colour per slot.

Titles and abstracts are untrusted: every character of them goes through :func:`html.escape`, and
the only markup in the output is our own ``<mark>``, ``<div>`` and ``<span>`` tags (and, in
tooltips, ``<b>`` and ``<a>`` links built from validated ids), whose attribute values (slot
names, entity ids, URLs) are escaped too and whose colours must be CSS colour literals. A
``<script>`` in an abstract comes out as the text "&lt;script&gt;".

Per-slot toggles: the caller passes ``enabled_slots``; every mark carries ``data-slot`` and a
CSS class per slot (``kb-slot-gene``) so a page can also toggle with CSS.

An entity in two slots (FGFR1 as substrate and as catalyst of its autophosphorylation) is
marked once with both: the mark carries every slot's class, ``data-slots="substrate
catalyst"`` (``data-slot`` names the first), and the slots' colours in horizontal bands
(``linear-gradient``; the first colour is also the ``background-color``). The legend can
show such a pair as its own swatch (``render_legend(..., shared=...)``, :func:`shared_slots`).

Tooltips (``tips=True``, the Curate and Review pages): each mark is wrapped in a
``<span class="kb-ent">`` (focusable, ``tabindex="0"``, at an entity's first mark only, so a
list of cards is not a Tab stop per mention) followed by a ``<span class="kb-tip">`` with the
entity's name, slot, type and links (:mod:`curation.matching.tooltips`); the ``<mark>`` itself
still holds only text. Without tips (evidence sentences, benchmarks) the marks stand alone. No
mark carries a ``title``: internal ids and match scores never reach a curator.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from curation.matching.matcher import Span, resolve_overlaps
from curation.matching.tooltips import RecordLinks, entity_tip
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Colour-blind-friendly pastel backgrounds, assigned to slots in order.
PALETTE: tuple[str, ...] = ("#fde68a", "#bfdbfe", "#bbf7d0", "#fbcfe8", "#ddd6fe", "#fed7aa",
                            "#a5f3fc", "#e5e7eb")
_SWATCH = "padding:0 0.4em;margin-right:0.4em;border-radius:3px"
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


def _mark(text: str, spans: Sequence[Span], colours: Mapping[str, str],
          record_links: RecordLinks | None = None, focusable: bool = True) -> str:
    """One ``<mark>`` for spans of the same offsets: one slot, or several (an entity in two
    slots) shown with all their colours; with ``record_links`` (tooltips on) wrapped in a
    focusable ``kb-ent`` span with its :func:`entity_tip` after it."""
    first = spans[0]
    slots = [s.slot for s in spans]
    attrs = {
        "class": " ".join(["kb-mark", *(css_class(slot) for slot in slots)]
                          + (["kb-multi"] if len(spans) > 1 else [])),
        "data-slot": first.slot,
        **({"data-slots": " ".join(slots)} if len(spans) > 1 else {}),
        "data-entity": " ".join(dict.fromkeys(s.entity_id for s in spans)),
        "data-kind": first.kind.value,
        "style": _background([colours[slot] for slot in slots]),
    }
    rendered = " ".join(f'{k}="{html.escape(v, quote=True)}"' for k, v in attrs.items())
    mark = f"<mark {rendered}>{html.escape(text)}</mark>"
    if record_links is None:
        return mark
    focus = ' tabindex="0"' if focusable else ""
    return f'<span class="kb-ent"{focus}>{mark}{entity_tip(spans, record_links)}</span>'


def _background(colours: Sequence[str]) -> str:
    """CSS of a mark's background: one colour, or equal horizontal bands of several."""
    style = f"background-color:{colours[0]}"
    if len(colours) > 1:
        step = 100 / len(colours)
        stops = ",".join(f"{c} {i * step:.4g}% {(i + 1) * step:.4g}%"
                         for i, c in enumerate(colours))
        style += f";background-image:linear-gradient(to bottom,{stops})"
    return style


def _render_part(text: str, offset: int, groups: Sequence[Sequence[Span]],
                 colours: Mapping[str, str], record_links: RecordLinks | None = None,
                 focused: set[tuple[str, ...]] | None = None) -> str:
    """Escaped HTML of ``text`` (which starts at ``offset`` of the full text) with marks; with
    tooltips, only an entity's first mark (its ids not yet in ``focused``) is a Tab stop."""
    out: list[str] = []
    cursor = 0
    end_of_part = offset + len(text)
    for group in groups:
        span = group[0]
        start, end = max(span.start, offset) - offset, min(span.end, end_of_part) - offset
        if end <= start or start < cursor:
            continue
        out.append(html.escape(text[cursor:start]))
        ids = tuple(sorted({s.entity_id for s in group}))
        first = focused is None or ids not in focused
        if focused is not None:
            focused.add(ids)
        out.append(_mark(text[start:end], group, colours, record_links, first))
        cursor = end
    out.append(html.escape(text[cursor:]))
    return "".join(out)


def visible_spans(spans: Iterable[Span], enabled_slots: Collection[str] | None = None,
                  text_length: int | None = None) -> list[Span]:
    """Spans of the enabled slots, inside the text, without overlaps (longest leftmost wins)."""
    return [group[0] for group in visible_groups(spans, enabled_slots, text_length)]


def visible_groups(spans: Iterable[Span], enabled_slots: Collection[str] | None = None,
                   text_length: int | None = None,
                   slot_order: Sequence[str] = ()) -> list[tuple[Span, ...]]:
    """:func:`visible_spans`, each with the spans of other slots at the same offsets: one
    group per mark, its spans in ``slot_order`` (then first-seen order), one per slot."""
    candidates = [s for s in spans
                  if (enabled_slots is None or s.slot in enabled_slots) and s.end > s.start >= 0
                  and (text_length is None or s.end <= text_length)]
    by_key = {(s.start, s.end, s.kind, s.score): s for s in reversed(candidates)}
    at: dict[tuple[int, int], dict[str, Span]] = {}
    for s in candidates:
        at.setdefault((s.start, s.end), {}).setdefault(s.slot, s)
    rank = {slot: i for i, slot in enumerate(slot_order)}
    groups = []
    for key in resolve_overlaps(list(by_key)):
        first = by_key[key]
        same = at[(first.start, first.end)]  # slot -> its first span here, first-seen order
        group = [first, *(s for slot, s in same.items() if slot != first.slot)]
        if rank:
            group.sort(key=lambda s: rank.get(s.slot, len(rank)))
        groups.append(tuple(group))
    return groups


def render_highlighted(
    doc_title: str,
    doc_abstract: str,
    spans: Iterable[Span],
    slot_colours: Mapping[str, str] | None = None,
    enabled_slots: Collection[str] | None = None,
    *,
    tips: bool = False,
    record_links: RecordLinks | None = None,
) -> str:
    """HTML of a document with its entity spans marked; all document text escaped.

    Args:
        doc_title: Title (untrusted).
        doc_abstract: Abstract (untrusted).
        spans: Spans with offsets into ``title + " " + abstract`` (:attr:`Document.text`).
        slot_colours: Slot -> CSS colour (default: :func:`slot_colours` over the spans' slots).
        enabled_slots: Slots to highlight (default: all); the others render as plain text.
        tips: Give every mark its tooltip (name, slot, type, links; module docstring).
        record_links: With ``tips``, entity id of a span -> links to the KB records of the
            relation in view (:mod:`curation.matching.tooltips`).

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
    kept = visible_groups(spans, enabled_slots, total, list(colours))
    links = (record_links or {}) if tips else None
    focused: set[tuple[str, ...]] = set()  # one Tab stop per entity, its first mark
    title_html = _render_part(doc_title, 0, kept, colours, links, focused) if doc_title else ""
    abstract_html = _render_part(doc_abstract, abstract_offset, kept, colours, links,
                                 focused) if doc_abstract else ""
    return (f'<div class="kb-doc"><div class="kb-title">{title_html}</div>'
            f'<div class="kb-abstract">{abstract_html}</div></div>')


def slot_colours_for(spans: Iterable[Span], colours: Mapping[str, str]) -> dict[str, str]:
    """``colours`` completed with palette colours for slots of ``spans`` that have none."""
    missing = [s.slot for s in spans if s.slot not in colours]
    extra = slot_colours([*colours, *missing])
    return {**{s: extra[s] for s in missing}, **colours}


def shared_slots(spans: Iterable[Span], enabled_slots: Collection[str] | None = None,
                 slot_order: Sequence[str] = ()) -> list[tuple[str, ...]]:
    """The slot combinations marked together in ``spans`` (an entity in two slots), in
    first-seen order: ``[("substrate", "catalyst")]`` for FGFR1 autophosphorylation."""
    combos = (tuple(s.slot for s in group)
              for group in visible_groups(spans, enabled_slots, None, slot_order))
    return list(dict.fromkeys(c for c in combos if len(c) > 1))


def render_legend(
    slot_colours: Mapping[str, str],
    enabled_slots: Collection[str] | None = None,
    labels: Mapping[str, str] | None = None,
    shared: Iterable[Sequence[str]] = (),
) -> str:
    """HTML legend: one swatch per slot; switched-off slots carry ``kb-off`` and are struck out.

    Args:
        slot_colours: Slot -> CSS colour.
        enabled_slots: Slots currently highlighted (default: all).
        labels: Slot -> display label (default: the slot name).
        shared: Slot combinations marked together (:func:`shared_slots`): each gets a swatch
            in the colours of its marks ("substrate + catalyst"), class ``kb-legend-shared``.

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
            f'style="{style};{_SWATCH}">'
            f"{html.escape(label)}</span>")
    combos = dict.fromkeys(tuple(slot for slot in slot_colours if slot in combo)
                           for combo in shared)  # in the legend's slot order, once each
    for slots in combos:
        if len(slots) < 2:
            continue
        colours = [_checked_colour(slot, slot_colours[slot]) for slot in slots]
        label = " + ".join((labels or {}).get(slot, slot) for slot in slots)
        items.append(
            f'<span class="kb-legend-item kb-legend-shared" '
            f'data-slots="{html.escape(" ".join(slots), quote=True)}" '
            f'title="{html.escape("one entity in " + label, quote=True)}" '
            f'style="{_background(colours)};{_SWATCH}">{html.escape(label)}</span>')
    return f'<div class="kb-legend">{"".join(items)}</div>'
