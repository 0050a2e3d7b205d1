"""The ranked abstracts of the Curate page: highlights, labels, notes, undo and progress.

Drawn as nested fragments over the session's cached search result (no search again): the panel
(:data:`RESULTS_FRAGMENT`), its toolbar (:data:`TOOLBAR_FRAGMENT`: messages, progress, undo, the
keyboard and bulk grades of :mod:`app_pages.curate_list_keys`) and one fragment per card. Every
card shows its current label's note (:mod:`app_pages.curate_cards`); a regrade keeps it unless
the curator changed it. A label click writes one row in the label control's callback and
re-draws only that card and the toolbar (``st.rerun`` with their keys), not every card of the
list: the browser then updates a few elements instead of all of them.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import AppContext, show_flash
from app_pages.curate_cards import (
    GRADE_OPTIONS,
    RESULTS_FRAGMENT,
    SHOWN_CARDS,
    TOOLBAR_FRAGMENT,
    CardLabel,
    Cards,
    card_label,
    card_suffix,
    doc_key,
    grade_card,
    note_key,
    pending_grades,
    rerun_cards,
    undo_labels,
)
from app_pages.curate_list_keys import focus_after, keys_row, select_changed, selected_ids
from app_pages.entity_tips import record_links
from app_pages.safe import md
from app_pages.screening_panel import keyword_marks
from curation.matching.highlight import render_legend, slot_colours
from curation.search.cards import highlighted_html
from curation.search.ranking_names import ranking_label
from curation.search.session import RankedDoc, SearchResult, card_html, label_progress, queue_order
from curation.store.labels import Grade, Labels
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
from kb_sources.schema import Schema


def _label(ws: Workspace, cards: Cards, doc: RankedDoc, docs: list[RankedDoc],
           drawn: CardLabel) -> None:
    """Record the grade just chosen in a card's label control, with the note
    :func:`~app_pages.curate_cards.regrade_note` gives; the keyboard focus moves to the next
    card."""
    suffix = card_suffix(doc.doc_id, cards.partial.query_key)
    grade = st.session_state.get(f"grade_{suffix}")
    if grade is None:  # the chosen grade was clicked again: the label stays as it is
        return
    stored = grade_card(ws, cards, doc, Grade(grade), drawn=drawn,
                        typed=st.session_state.get(note_key(suffix, drawn)))
    if stored is not None:
        focus_after(cards.partial.query_key, docs, doc.doc_id)
    rerun_cards(suffix)


def _note_changed(ws: Workspace, cards: Cards, doc: RankedDoc, drawn: CardLabel) -> None:
    """Enter (or leaving the field) after a note was typed. On a labelled card: the note is
    stored with the same grade (a relabel, audited). On an unlabelled card it labels nothing: it
    waits in the field for the grade. A card whose label changed since it was drawn (an undo, a
    label from another tab) stores nothing: it is drawn again with the current label's note."""
    key = cards.partial.query_key
    suffix = card_suffix(doc.doc_id, key)
    now = card_label(ws, cards.ctx.user.name, cards.schema.name, key, doc.doc_id)
    note = str(st.session_state.get(note_key(suffix, drawn)) or "").strip()
    if now.ident == drawn.ident and drawn.grade is not None and note != drawn.note:
        grade_card(ws, cards, doc, drawn.grade, typed=note, drawn=drawn)
        rerun_cards(suffix)  # with the toolbar; otherwise the card alone re-draws


def _undo(ws: Workspace, cards: Cards, docs: list[RankedDoc]) -> None:
    """Undo your last label (a bulk grade's labels together); the focus goes back to it."""
    undone = undo_labels(ws)
    key = cards.partial.query_key
    shown = {d.doc_id for d in docs}
    if undone and undone[-1].doc_id in shown:
        focus_after(key, docs, undone[-1].doc_id, step=0, scroll=True)
    rerun_cards(*(card_suffix(lab.doc_id, lab.query_key) for lab in undone))


def _reorder() -> None:
    """The "Unlabelled first" toggle (in the toolbar) re-sorts the cards: the whole panel."""
    st.rerun(RESULTS_FRAGMENT)


@st.fragment(key=TOOLBAR_FRAGMENT)
def _toolbar(cards: Cards, result: SearchResult) -> None:
    """Messages, progress (recounted whenever a card's label changes), undo, the order, and the
    keyboard and bulk grades (:mod:`app_pages.curate_list_keys`)."""
    ctx, schema, partial = cards.ctx, cards.schema, cards.partial
    show_flash()
    pending = pending_grades(ctx.ws, ctx.user.name, schema.name, partial.query_key)
    grades = {**Labels(ctx.ws).grades(schema.name, partial.query_key, ctx.user.name),
              **pending}  # a pending label is newer than the stored one it will supersede
    labelled = label_progress(result.docs, grades).labelled
    waiting = sum(d.doc_id in pending for d in result.docs)
    total = len(result.docs)
    docs = ordered_docs(ctx.user.name, partial, result, grades)
    with st.container(horizontal=True, vertical_alignment="bottom", key="results_toolbar"):
        st.progress(labelled / total if total else 0.0,
                    text=f"Labelled {labelled:d} of {total:d} shown"
                         + (f" ({waiting:d} pending, not saved yet)" if waiting else "")
                         + f" · ranked by {md(ranking_label(result.model_version))}")
        st.button("Undo last label", key="undo", on_click=_undo, args=(ctx.ws, cards, docs),
                  shortcut="U", icon=":material/undo:")
        st.toggle("Unlabelled first", key="unlabelled_first", on_change=_reorder, wrap=True)
    keys_row(cards, docs, grades)


def highlight_controls(schema: Schema) -> tuple[dict[str, str], frozenset[str]]:
    """One row: a checkbox per slot and the colour legend."""
    colours = slot_colours(schema.slot_names)
    with st.container(horizontal=True, vertical_alignment="center", key="highlight_row"):
        st.caption("Highlight")
        enabled = frozenset(slot for slot in colours
                            if st.checkbox(md(slot), value=True, key=f"hl_{slot}", wrap=True))
        st.markdown(render_legend(colours, enabled), unsafe_allow_html=True, width="content")
    return colours, enabled


def _card(cards: Cards, doc: RankedDoc, docs: list[RankedDoc]) -> None:
    """One abstract as its own fragment (key ``card_<suffix>``): a label click re-draws it
    alone (with the toolbar)."""
    suffix = card_suffix(doc.doc_id, cards.partial.query_key)
    st.fragment(_card_body, key=f"card_{suffix}")(cards, doc, suffix, docs)


def _card_body(cards: Cards, doc: RankedDoc, suffix: str, docs: list[RankedDoc]) -> None:
    """One abstract: one HTML block (first line + highlighted text, rendered once per document
    and highlight setting), the label control, the note of the current label and the Select box
    of bulk grades. The label is read here, not passed in, since the card re-draws alone after
    its label changed. A pending label (kept in the outbox, not in the database yet) is marked
    as such. The note field's key follows the current label (:func:`note_key`)."""
    ctx, key = cards.ctx, cards.partial.query_key
    label = card_label(ctx.ws, ctx.user.name, cards.schema.name, key, doc.doc_id)
    grade_key, select_key, notes = f"grade_{suffix}", f"sel_{suffix}", note_key(suffix, label)
    st.session_state[grade_key] = label.grade.value if label.grade else None  # the stored label
    st.session_state[select_key] = doc.doc_id in selected_ids(key)
    draft = "" if label.grade else str(st.session_state.get(notes) or "").strip()
    with st.container(border=True, key=f"doc_{doc_key(doc.doc_id)}"):
        shown = label.grade.value if label.grade else None
        if shown and label.pending:
            shown += " (pending)"
        highlighted = keyword_marks(highlighted_html(doc, cards.colours, cards.enabled,
                                                     record_links(cards.ctx.ws, cards.partial)))
        st.markdown(card_html(doc, highlighted, shown, colours=cards.colours,
                              enabled_slots=cards.enabled), unsafe_allow_html=True)
        with st.container(horizontal=True, vertical_alignment="center"):
            st.checkbox("Select", key=select_key, on_change=select_changed,
                        args=(key, doc.doc_id, select_key, suffix), label_visibility="collapsed",
                        help="Select abstracts to grade them together with the toolbar's grade "
                             "buttons (one undo takes a bulk grade back)")
            st.segmented_control("Label", GRADE_OPTIONS, key=grade_key,
                                 format_func=str.capitalize, label_visibility="collapsed",
                                 on_change=_label, args=(ctx.ws, cards, doc, docs, label))
            st.text_input("Note", value=label.note, key=notes, placeholder="note (optional)",
                          label_visibility="collapsed", width="stretch",
                          on_change=_note_changed, args=(ctx.ws, cards, doc, label))
            if label.pending:
                st.caption(":material/schedule: pending: not saved yet, kept and saved "
                           "automatically")
            elif draft:
                st.caption("Note kept: it is saved with the grade you give this abstract")


@st.fragment(key=RESULTS_FRAGMENT)
def results_panel(ctx: AppContext, schema: Schema, partial: PartialRelation,
                  result: SearchResult) -> None:
    """Toolbar, highlight toggles and one card per abstract (see :func:`ordered_docs`)."""
    if not result.docs:
        show_flash()
        st.info("No abstract matches this query. Edit the query or try another retriever.")
        return
    pending = pending_grades(ctx.ws, ctx.user.name, schema.name, partial.query_key)
    grades = {**Labels(ctx.ws).grades(schema.name, partial.query_key, ctx.user.name),
              **pending}
    _toolbar(Cards(ctx, schema, partial, result.query_text, {}, frozenset()), result)
    no_mention_warning(schema, partial, result)
    colours, enabled = highlight_controls(schema)
    cards = Cards(ctx, schema, partial, result.query_text, colours, enabled)
    docs = ordered_docs(ctx.user.name, partial, result, grades)
    st.session_state[SHOWN_CARDS] = frozenset(card_suffix(d.doc_id, partial.query_key)
                                              for d in docs)
    for doc in docs:
        _card(cards, doc, docs)


def no_mention_warning(schema: Schema, partial: PartialRelation, result: SearchResult) -> None:
    """Say so above the list when no abstract mentions any query entity (nor a synonym)."""
    slots = set(schema.query_slots)
    if any(span.slot in slots for doc in result.docs for span in doc.spans):
        return
    names = ", ".join(e.text for slot in schema.query_slots for e in partial.query.get(slot, ()))
    st.warning(f"None of these {len(result.docs)} abstracts mentions {md(names)} (as written or "
               "by a known synonym): they rank by the rest of the query only. The corpus may "
               "not hold evidence for this relation, or it names the entities differently; "
               "import more abstracts or add a synonym.")


def ordered_docs(user: str, partial: PartialRelation, result: SearchResult,
             grades: dict[str, Grade]) -> list[RankedDoc]:
    """Cards next unlabelled first, in the order they had when this result was opened (or the
    toggle changed): a card does not jump away under the pointer when it is labelled. The order
    is the signed-in user's (another user in the same browser gets their own)."""
    first = st.session_state["unlabelled_first"]
    key = (user, partial.query_key, result.query_text, result.model_version, first,
           tuple(d.doc_id for d in result.docs))
    saved = st.session_state["card_order"]
    if saved.get("key") != key:
        order = queue_order(result.docs, grades, first)
        saved.clear()
        saved.update(key=key, ids=[d.doc_id for d in order])
    by_id = {d.doc_id: d for d in result.docs}
    return [by_id[i] for i in saved["ids"]]
