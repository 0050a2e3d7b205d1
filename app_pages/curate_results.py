"""The ranked abstracts of the Curate page: highlights, labels, undo and progress.

Drawn as nested fragments over the session's cached search result (no search again): the panel
(:data:`RESULTS_FRAGMENT`), its toolbar (:data:`TOOLBAR_FRAGMENT`: messages, progress, undo)
and one fragment per card. A label click writes one row in the label control's callback and
re-draws only that card and the toolbar (``st.rerun`` with their keys), not every card of the
list: the browser then updates a few elements instead of all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import streamlit as st

from app_pages.common import AppContext, current_user, flash, short_hash, show_flash, store_label
from app_pages.safe import md
from curation.matching.highlight import render_legend, slot_colours
from curation.search.cards import highlighted_html
from curation.search.session import RankedDoc, SearchResult, card_html, label_progress, queue_order
from curation.store.labels import Grade, Labels
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

GRADES = (Grade.COMPLETE, Grade.PARTIAL, Grade.IRRELEVANT, Grade.SKIP)
GRADE_OPTIONS = tuple(g.value for g in GRADES)
_UNSAFE_KEY = re.compile(r"[^A-Za-z0-9_-]+")
RESULTS_FRAGMENT = "curate_results"
TOOLBAR_FRAGMENT = "curate_toolbar"
SHOWN_CARDS = "shown_cards"  # the card suffixes the panel drew last (their fragments exist)


@dataclass(frozen=True)
class Cards:
    """What every abstract card of one result list shares."""

    ctx: AppContext
    schema: Schema
    partial: PartialRelation
    query_text: str
    colours: dict[str, str]
    enabled: frozenset[str]


def doc_key(doc_id: str) -> str:
    """A widget-key-safe form of a document id (PMIDs stay as they are)."""
    safe = _UNSAFE_KEY.sub("_", doc_id)
    return safe if safe == doc_id and len(safe) <= 40 else f"{safe[:30]}_{short_hash(doc_id)}"


def card_suffix(doc_id: str, query_key: str) -> str:
    """The widget-key suffix of one card: document and partial relation."""
    return f"{doc_key(doc_id)}_{short_hash(query_key)}"


def _rerun_cards(*suffixes: str) -> None:
    """From a callback: re-draw only the toolbar and these cards (those drawn last run)."""
    drawn = st.session_state.get(SHOWN_CARDS, ())
    st.rerun([TOOLBAR_FRAGMENT, *(f"card_{s}" for s in suffixes if s in drawn)])


def _label(ws: Workspace, cards: Cards, doc: RankedDoc, keys: tuple[str, str]) -> None:
    """Record the grade just chosen in a card's label control (with the card's note)."""
    grade_key, note_key = keys
    grade = st.session_state.get(grade_key)
    user = current_user(ws)
    if grade is None:  # the chosen grade was clicked again: the label stays as it is
        return
    if user is None:
        flash("error", "Your session ended; sign in again to label.")
    else:
        had_pending = bool(Labels(ws).pending())
        stored = store_label(ws, user=user, schema=cards.schema.name,
                             query_key=cards.partial.query_key, query_text=cards.query_text,
                             doc_id=doc.doc_id, grade=grade,
                             note=st.session_state.get(note_key, ""),
                             model_version=doc.model_version)
        if stored is None or had_pending:  # the sidebar's pending count changed: whole page
            st.rerun()
    _rerun_cards(card_suffix(doc.doc_id, cards.partial.query_key))


def _note_changed(ws: Workspace, cards: Cards, doc: RankedDoc, keys: tuple[str, str],
                  shown: str | None) -> None:
    """A note typed after the label: store it with the same grade (a relabel, audited). When
    the grade changes in the same click, :func:`_label` stores both."""
    if shown is not None and st.session_state.get(keys[0]) == shown:
        _label(ws, cards, doc, keys)


def _undo(ws: Workspace) -> None:
    user = current_user(ws)
    try:  # pending labels are saved first, which needs the write lock
        label = Labels(ws).undo_last(user.name) if user else None
    except CurationError as exc:
        flash("error", f"Nothing was undone: {md(exc)}")
        return
    if label is None:
        flash("info", "Nothing to undo.")
        return
    flash("info", f"Undid your label '{md(label.grade.value)}' on {md(label.doc_id)}.")
    # the card's note field shows the note of the label now current (the one the undone label
    # had replaced, or none), so the next click cannot re-save the undone note
    restored = Labels(ws).current(label.user, label.schema, label.query_key, label.doc_id)
    suffix = card_suffix(label.doc_id, label.query_key)
    st.session_state[f"note_{suffix}"] = restored.note if restored else ""
    _rerun_cards(suffix)


def _reorder() -> None:
    """The "Unlabelled first" toggle (in the toolbar) re-sorts the cards: the whole panel."""
    st.rerun(RESULTS_FRAGMENT)


@st.fragment(key=TOOLBAR_FRAGMENT)
def _toolbar(ctx: AppContext, schema: Schema, partial: PartialRelation,
             result: SearchResult) -> None:
    """Messages, progress (recounted whenever a card's label changes), undo and the order."""
    show_flash()
    pending = pending_grades(ctx.ws, ctx.user.name, schema.name, partial.query_key)
    grades = {**Labels(ctx.ws).grades(schema.name, partial.query_key, ctx.user.name),
              **pending}  # a pending label is newer than the stored one it will supersede
    labelled = label_progress(result.docs, grades).labelled
    waiting = sum(d.doc_id in pending for d in result.docs)
    total = len(result.docs)
    with st.container(horizontal=True, vertical_alignment="bottom", key="results_toolbar"):
        st.progress(labelled / total if total else 0.0,
                    text=f"Labelled {labelled:d} of {total:d} shown"
                         + (f" ({waiting:d} pending, not saved yet)" if waiting else "")
                         + f" · ranked by {md(result.model_version)}")
        st.button("Undo last label", key="undo", on_click=_undo, args=(ctx.ws,), shortcut="U",
                  icon=":material/undo:")
        st.toggle("Unlabelled first", key="unlabelled_first", on_change=_reorder, wrap=True)


def highlight_controls(schema: Schema) -> tuple[dict[str, str], frozenset[str]]:
    """One row: a checkbox per slot and the colour legend."""
    colours = slot_colours(schema.slot_names)
    with st.container(horizontal=True, vertical_alignment="center", key="highlight_row"):
        st.caption("Highlight")
        enabled = frozenset(slot for slot in colours
                            if st.checkbox(md(slot), value=True, key=f"hl_{slot}", wrap=True))
        st.markdown(render_legend(colours, enabled), unsafe_allow_html=True, width="content")
    return colours, enabled


def _card(cards: Cards, doc: RankedDoc) -> None:
    """One abstract as its own fragment (key ``card_<suffix>``): a label click re-draws it
    alone (with the toolbar)."""
    suffix = card_suffix(doc.doc_id, cards.partial.query_key)
    st.fragment(_card_body, key=f"card_{suffix}")(cards, doc, suffix)


def _card_grade(cards: Cards, doc_id: str) -> tuple[Grade | None, bool]:
    """The user's current grade of one card and whether it is pending (in the outbox)."""
    ctx = cards.ctx
    pending = pending_grades(ctx.ws, ctx.user.name, cards.schema.name, cards.partial.query_key)
    if doc_id in pending:
        return pending[doc_id], True
    label = Labels(ctx.ws).current(ctx.user.name, cards.schema.name, cards.partial.query_key,
                                   doc_id)
    return (label.grade if label else None), False


def _card_body(cards: Cards, doc: RankedDoc, suffix: str) -> None:
    """One abstract: one HTML block (first line + highlighted text, rendered once per document
    and highlight setting), the label control and a note. The grade is read here, not passed
    in, since the card re-draws alone after its label changed. A pending grade (kept in the
    outbox, not in the database yet) is marked as such."""
    grade, pending = _card_grade(cards, doc.doc_id)
    grade_key, note_key = f"grade_{suffix}", f"note_{suffix}"
    st.session_state[grade_key] = grade.value if grade else None  # the stored label
    with st.container(border=True, key=f"doc_{doc_key(doc.doc_id)}"):
        label = grade.value if grade else None
        if label and pending:
            label += " (pending)"
        highlighted = highlighted_html(doc, cards.colours, cards.enabled)
        st.markdown(card_html(doc, highlighted, label, colours=cards.colours,
                              enabled_slots=cards.enabled), unsafe_allow_html=True)
        with st.container(horizontal=True, vertical_alignment="center"):
            st.segmented_control("Label", GRADE_OPTIONS, key=grade_key,
                                 format_func=str.capitalize, label_visibility="collapsed",
                                 on_change=_label, args=(cards.ctx.ws, cards, doc,
                                                         (grade_key, note_key)))
            st.text_input("Note", key=note_key, placeholder="note (optional)",
                          label_visibility="collapsed", width=320, on_change=_note_changed,
                          args=(cards.ctx.ws, cards, doc, (grade_key, note_key),
                                grade.value if grade else None))
            if pending:
                st.caption(":material/schedule: pending: not saved yet, kept and saved "
                           "automatically")


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
    _toolbar(ctx, schema, partial, result)
    no_mention_warning(schema, partial, result)
    colours, enabled = highlight_controls(schema)
    cards = Cards(ctx, schema, partial, result.query_text, colours, enabled)
    docs = ordered_docs(ctx.user.name, partial, result, grades)
    st.session_state[SHOWN_CARDS] = frozenset(card_suffix(d.doc_id, partial.query_key)
                                              for d in docs)
    for doc in docs:
        _card(cards, doc)


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


def pending_grades(ws: Workspace, user: str, schema: str, query_key: str) -> dict[str, Grade]:
    """doc_id -> grade of the user's labels for one partial relation that wait in the outbox
    (the latest wins)."""
    return {p.doc_id: p.grade for p in Labels(ws).pending(user)
            if p.schema == schema and p.query_key == query_key}


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
