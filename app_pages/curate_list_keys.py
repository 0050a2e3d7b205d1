"""Keyboard grades and bulk grades in the Curate page's list view (issue 36, item 12).

Keys, as in screening mode: ``1`` complete, ``2`` partial, ``3`` irrelevant, ``0`` skip grade
the *focused* card (outlined in blue; the toolbar names it) and move the focus to the next card;
``J`` / ``K`` move the focus down / up (the page scrolls to it), ``N`` puts the cursor in the
focused card's note field (Enter saves it), ``U`` undoes. The focus starts on the first unlabelled
card; a grade given with the mouse moves it to the card after the one clicked. Keys do not fire
while a text field has the cursor.

Bulk: every card has a *Select* box. While cards are selected, the same grade buttons (and keys)
grade all of them as one bulk grade (:meth:`curation.store.labels.Labels.record_many`: one batch
in the label history, each card keeping its note), and the next undo takes the whole batch back.

The buttons live in the toolbar fragment: a move re-draws the toolbar only (the outline is a
style rule drawn there), a grade or a selection the toolbar and the cards it changed.
"""

from __future__ import annotations

import html

import streamlit as st

from app_pages.common import current_user, flash, store_labels
from app_pages.curate_cards import (
    GRADE_KEYS,
    Cards,
    card_label,
    card_suffix,
    doc_key,
    grade_card,
    rerun_cards,
    typed_note,
)
from app_pages.safe import md
from curation.search.session import RankedDoc
from curation.store.labels import Grade
from curation.store.workspace import Workspace

FOCUS = "list_focus"  # {query_key: focused doc id, "moved": times a key moved the focus}
SELECTED = "list_selected"  # {query_key: set of selected doc ids}
_OUTLINE = "outline: 3px solid #2563eb; outline-offset: 2px; border-radius: 0.5rem;"
#: Scrolls the focused card into view after a key moved the focus (our script, ids are safe).
_SCROLL = ("<script>setTimeout(() => {{ const el = document.querySelector('.st-key-doc_{key}');"
           " if (el) {{ el.scrollIntoView({{block: 'nearest', behavior: 'smooth'}}); }} }}, 50);"
           "</script>")
#: Puts the cursor in the focused card's note field (N).
_NOTE = ("<script>setTimeout(() => {{ const el = document.querySelector("
         "'.st-key-doc_{key} [class*=\"st-key-note_\"] input'); if (el) {{ el.focus(); }} }},"
         " 80);</script>")


def selected_ids(query_key: str) -> set[str]:
    """The documents selected for a bulk grade in this relation's list (kept per relation)."""
    return st.session_state.setdefault(SELECTED, {}).setdefault(query_key, set())


def select_changed(query_key: str, doc_id: str, widget_key: str, suffix: str) -> None:
    """A card's Select box changed: keep the choice; the toolbar recounts."""
    chosen = selected_ids(query_key)
    if st.session_state.get(widget_key):
        chosen.add(doc_id)
    else:
        chosen.discard(doc_id)
    rerun_cards(suffix)


def focused_doc(query_key: str, docs: list[RankedDoc], grades: dict[str, Grade]) -> RankedDoc:
    """The card the keys act on: kept while it is in the list, else the first unlabelled one."""
    focus = st.session_state.setdefault(FOCUS, {"moved": 0})
    ids = [d.doc_id for d in docs]
    if focus.get(query_key) not in ids:
        focus[query_key] = next((d.doc_id for d in docs if d.doc_id not in grades), ids[0])
    return docs[ids.index(focus[query_key])]


def focus_after(query_key: str, docs: list[RankedDoc], doc_id: str, step: int = 1,
                scroll: bool = False) -> None:
    """Move the focus ``step`` cards on from ``doc_id`` (kept within the list)."""
    ids = [d.doc_id for d in docs]
    if doc_id not in ids:
        return
    focus = st.session_state.setdefault(FOCUS, {"moved": 0})
    focus[query_key] = ids[min(max(ids.index(doc_id) + step, 0), len(ids) - 1)]
    if scroll:
        focus["moved"] = focus.get("moved", 0) + 1
        focus["scroll"] = True


def _move(cards: Cards, docs: list[RankedDoc], current: str, step: int) -> None:
    focus_after(cards.partial.query_key, docs, current, step, scroll=True)


def _note(current: str) -> None:
    st.session_state.setdefault(FOCUS, {"moved": 0})["note"] = current


def _grade_key(ws: Workspace, cards: Cards, docs: list[RankedDoc], current: str,
               grade: Grade) -> None:
    """A grade key or button: the selected cards (one bulk grade), else the focused card."""
    key = cards.partial.query_key
    chosen = [d for d in docs if d.doc_id in selected_ids(key)]
    if chosen:
        _bulk(ws, cards, chosen, grade)
        return
    doc = next(d for d in docs if d.doc_id == current)
    user = current_user(ws)
    drawn = card_label(ws, user.name, cards.schema.name, key, current) if user else None
    grade_card(ws, cards, doc, grade, drawn=drawn,
               typed=typed_note(cards, current, drawn) if drawn else None)
    focus_after(key, docs, current, scroll=True)
    rerun_cards(card_suffix(current, key))


def _bulk(ws: Workspace, cards: Cards, chosen: list[RankedDoc], grade: Grade) -> None:
    """Grade the selected cards as one batch; the selection is cleared once they are stored."""
    user = current_user(ws)
    if user is None:
        flash("error", "Your session ended; sign in again to label.")
        return
    drafts = {}  # a note typed on an unlabelled card goes with its first grade
    for doc in chosen:
        now = card_label(ws, user.name, cards.schema.name, cards.partial.query_key, doc.doc_id)
        typed = typed_note(cards, doc.doc_id, now)
        if now.grade is None and typed:
            drafts[doc.doc_id] = typed
    stored = store_labels(ws, user=user, schema=cards.schema.name,
                          query_key=cards.partial.query_key, query_text=cards.query_text,
                          doc_ids=[d.doc_id for d in chosen], grade=grade.value, notes=drafts,
                          model_version=chosen[0].model_version,
                          order_labels=chosen[0].order_labels)
    if stored is not None:
        selected_ids(cards.partial.query_key).clear()
        flash("success", f"Graded {len(stored):d} abstracts as '{md(grade.value)}' in one bulk "
                         "grade; Undo takes all of them back.")
    rerun_cards(*(card_suffix(d.doc_id, cards.partial.query_key) for d in chosen))


def _select_all(query_key: str, docs: list[RankedDoc], select: bool) -> None:
    chosen = selected_ids(query_key)
    chosen.clear()
    if select:
        chosen.update(d.doc_id for d in docs)
    rerun_cards(*(card_suffix(d.doc_id, query_key) for d in docs))


def keys_row(cards: Cards, docs: list[RankedDoc], grades: dict[str, Grade]) -> None:
    """One toolbar row: what the keys act on, the grade buttons (keys 1 2 3 0), note, moves
    and the selection."""
    ws, key = cards.ctx.ws, cards.partial.query_key
    doc = focused_doc(key, docs, grades)
    chosen = sum(d.doc_id in selected_ids(key) for d in docs)
    focus = st.session_state[FOCUS]
    what = (f"Grade {chosen:d} selected as" if chosen else f"Keys: #{doc.rank:d} · {doc.doc_id}")
    script = ""
    if focus.pop("scroll", False):
        script += _SCROLL.format(key=doc_key(doc.doc_id))
    if focus.pop("note", None) == doc.doc_id:
        script += _NOTE.format(key=doc_key(doc.doc_id))
    with st.container(horizontal=True, vertical_alignment="center", key="list_keys"):
        st.html(f"<style>.st-key-doc_{doc_key(doc.doc_id)} {{ {_OUTLINE} }}</style>"
                f"<span class='kb-focus' data-doc='{html.escape(doc.doc_id)}' "
                f"data-moved='{focus.get('moved', 0):d}'>{html.escape(what)}</span>{script}",
                unsafe_allow_javascript=bool(script), width="content")
        for grade, shortcut in GRADE_KEYS.items():
            st.button(md(grade.value.capitalize()), key=f"list_{grade.value}", shortcut=shortcut,
                      on_click=_grade_key, args=(ws, cards, docs, doc.doc_id, grade))
        st.button("Note", key="list_note", shortcut="N", icon=":material/edit_note:",
                  on_click=_note, args=(doc.doc_id,))
        st.button("Previous", key="list_prev", shortcut="K", icon=":material/arrow_upward:",
                  on_click=_move, args=(cards, docs, doc.doc_id, -1))
        st.button("Next", key="list_next", shortcut="J", icon=":material/arrow_downward:",
                  on_click=_move, args=(cards, docs, doc.doc_id, +1))
        st.button("Clear selection" if chosen else "Select all", key="list_select",
                  icon=":material/deselect:" if chosen else ":material/select_all:",
                  on_click=_select_all, args=(key, docs, not chosen))
