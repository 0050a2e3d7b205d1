"""What the Curate page's list and screening views share about a card's label.

A card shows the signed-in curator's *current* label of its abstract: the stored one, or the
newest one waiting in the outbox (pending). :class:`CardLabel` names it with an ``ident`` that
changes whenever the current label does (a new label, a relabel, an undo). The list view keys its
note field by that ident, so the field always shows the current label's note: after an undo it is
a new widget showing the re-activated label's note (or nothing), and a note the browser still
holds for the undone label belongs to a widget that no longer exists, so it can never be stored
again (issue 36, item 1). A regrade keeps the current note unless the curator changed it
(:func:`regrade_note`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import streamlit as st

from app_pages.common import AppContext, current_user, flash, short_hash, store_label
from app_pages.safe import md
from curation.search.session import RankedDoc
from curation.store.labels import Grade, Label, Labels
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

GRADES = (Grade.COMPLETE, Grade.PARTIAL, Grade.IRRELEVANT, Grade.SKIP)
GRADE_OPTIONS = tuple(g.value for g in GRADES)
#: Grade -> key, in screening mode and in the list view (shown on the buttons).
GRADE_KEYS = {Grade.COMPLETE: "1", Grade.PARTIAL: "2", Grade.IRRELEVANT: "3", Grade.SKIP: "0"}
RESULTS_FRAGMENT = "curate_results"
TOOLBAR_FRAGMENT = "curate_toolbar"
SHOWN_CARDS = "shown_cards"  # the card suffixes the panel drew last (their fragments exist)
_UNSAFE_KEY = re.compile(r"[^A-Za-z0-9_-]+")
#: Abstract ids named in an undo message.
NAMED = 3


@dataclass(frozen=True)
class Cards:
    """What every abstract card of one result list shares."""

    ctx: AppContext
    schema: Schema
    partial: PartialRelation
    query_text: str
    colours: dict[str, str]
    enabled: frozenset[str]


@dataclass(frozen=True)
class CardLabel:
    """The curator's current label of one card.

    Attributes:
        grade: The grade, or None when the abstract is not labelled.
        note: Its note ("" without a label).
        ident: Changes whenever the current label does: the label's id, ``p<outbox id>`` for a
            pending one, ``none`` for no label.
        pending: The label waits in the outbox (not in the database yet).
    """

    grade: Grade | None
    note: str
    ident: str
    pending: bool = False


NO_LABEL = CardLabel(None, "", "none")


def doc_key(doc_id: str) -> str:
    """A widget-key-safe form of a document id (PMIDs stay as they are)."""
    safe = _UNSAFE_KEY.sub("_", doc_id)
    return safe if safe == doc_id and len(safe) <= 40 else f"{safe[:30]}_{short_hash(doc_id)}"


def card_suffix(doc_id: str, query_key: str) -> str:
    """The widget-key suffix of one card: document and partial relation."""
    return f"{doc_key(doc_id)}_{short_hash(query_key)}"


def rerun_cards(*suffixes: str) -> None:
    """From a callback: re-draw only the toolbar and these cards (those drawn last run)."""
    drawn = st.session_state.get(SHOWN_CARDS, ())
    st.rerun([TOOLBAR_FRAGMENT, *(f"card_{s}" for s in suffixes if s in drawn)])


def note_key(suffix: str, label: CardLabel) -> str:
    """The widget key of a card's note field while ``label`` is its current label."""
    return f"note_{suffix}_{label.ident}"


def typed_note(cards: Cards, doc_id: str, label: CardLabel) -> str | None:
    """What the card's note field holds now (None: the field was not drawn for ``label``)."""
    return st.session_state.get(note_key(card_suffix(doc_id, cards.partial.query_key), label))


def pending_grades(ws: Workspace, user: str, schema: str, query_key: str) -> dict[str, Grade]:
    """doc_id -> grade of the user's labels for one partial relation that wait in the outbox
    (the latest wins)."""
    return {p.doc_id: p.grade for p in Labels(ws).pending(user)
            if p.schema == schema and p.query_key == query_key}


def card_label(ws: Workspace, user: str, schema: str, query_key: str,
               doc_id: str) -> CardLabel:
    """The user's current label of one card: the newest pending one, else the stored one."""
    waiting = [p for p in Labels(ws).pending(user)
               if (p.schema, p.query_key, p.doc_id) == (schema, query_key, doc_id)]
    if waiting:
        last = waiting[-1]
        return CardLabel(last.grade, last.note, f"p{last.outbox_id[:12]}", pending=True)
    label = Labels(ws).current(user, schema, query_key, doc_id)
    return NO_LABEL if label is None else CardLabel(label.grade, label.note, str(label.id))


def regrade_note(ws: Workspace, user: str, cards: Cards, doc_id: str, typed: str | None,
                 drawn: CardLabel) -> str:
    """The note a new grade of one card carries: what the curator typed in the card's note field
    when it differs from the note the field was drawn with, else the current label's note (a
    regrade keeps the note, also one given meanwhile on the Review page or in another tab)."""
    if typed is not None and typed.strip() != drawn.note:
        return typed.strip()
    now = card_label(ws, user, cards.schema.name, cards.partial.query_key, doc_id)
    return now.note if now.grade is not None else drawn.note


def grade_card(ws: Workspace, cards: Cards, doc: RankedDoc, grade: Grade, *,
               typed: str | None = None, drawn: CardLabel | None = None) -> Label | None:
    """Store one card's new grade with the note :func:`regrade_note` gives (``typed``: the
    card's note field, ``drawn``: the label the card showed; None: the current one). Returns
    the label, or None when it is pending or refused (flashed); the whole page is re-drawn then,
    and when pending labels were saved with it (the sidebar counts them)."""
    user = current_user(ws)
    if user is None:
        flash("error", "Your session ended; sign in again to label.")
        return None
    key = cards.partial.query_key
    drawn = drawn or card_label(ws, user.name, cards.schema.name, key, doc.doc_id)
    had_pending = bool(Labels(ws).pending())
    stored = store_label(ws, user=user, schema=cards.schema.name, query_key=key,
                         query_text=cards.query_text, doc_id=doc.doc_id, grade=grade.value,
                         note=regrade_note(ws, user.name, cards, doc.doc_id, typed, drawn),
                         model_version=doc.model_version,
                         order_labels=doc.order_labels)
    if stored is None or had_pending:
        st.rerun()
    return stored


def undo_message(undone: list[Label], back: Label | None = None) -> str:
    """What an undo says (plain text: the caller escapes it): one label, or a bulk grade's.

    ``back`` is the label of that abstract the undo brought back (None: it has none now). An
    undone note edit (a relabel with the same grade) says the note went back and the grade
    stays, so the card and the message agree."""
    first = undone[0]
    if len(undone) == 1 and back is not None and back.grade is first.grade:
        was = f"'{back.note[:60]}'" if back.note else "empty"
        return (f"Undid your note edit on {first.doc_id}: the note is {was} again; its label "
                f"'{first.grade.value}' stays.")
    if len(undone) == 1 and back is not None:
        return (f"Undid your label '{first.grade.value}' on {first.doc_id}: it is "
                f"'{back.grade.value}' again.")
    if len(undone) == 1:
        return f"Undid your label '{first.grade.value}' on {first.doc_id}."
    ids = sorted(lab.doc_id for lab in undone)
    named = ", ".join(ids[:NAMED]) + (f" and {len(ids) - NAMED:d} more" if len(ids) > NAMED
                                      else "")
    grades = ", ".join(sorted({lab.grade.value for lab in undone}))
    return f"Undid your bulk grade: {len(undone):d} labels '{grades}' on {named}."


def undo_labels(ws: Workspace, where: str = "page") -> list[Label]:
    """Undo the signed-in user's last label (a bulk grade's labels together) and say so at
    ``where``; the labels undone, newest first (none: the message says why)."""
    user = current_user(ws)
    try:  # pending labels are saved first, which needs the write lock
        undone = Labels(ws).undo(user.name) if user else []
    except CurationError as exc:
        flash("error", f"Nothing was undone: {md(exc)}", where=where)
        return []
    if not undone:
        flash("info", "Nothing to undo.", where=where)
        return []
    first = undone[0]
    back = (Labels(ws).current(first.user, first.schema, first.query_key, first.doc_id)
            if len(undone) == 1 else None)
    flash("info", md(undo_message(undone, back)), where=where)
    return undone
