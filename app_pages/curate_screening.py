"""Screening mode of the Curate page: one abstract at a time, large, labelled from the keyboard.

Keys (shown on the buttons): ``1`` complete, ``2`` partial, ``3`` irrelevant, ``0`` skip; ``N``
opens a note for the abstract with its current note (Enter saves it), ``U`` undoes your last label
(a bulk grade's labels together) and goes back to that abstract, ``J`` / ``K`` next / previous.
The abstract's current note is shown above it, and a new grade keeps it unless a note was
typed. A grade records the label and shows the next abstract in the list's order (next
unlabelled first, as in the list view). Streamlit reserves the ``C`` and ``R`` keys (clear
cache, rerun), so the letter set C/P/I/S cannot be bound; the digits are the grade keys.
Shortcuts do not fire while the note field has the focus.

Drawn as a fragment like the list: a key press writes one row in the button's callback and
re-draws only this panel from the session's cached search result.

Screening mode is a queue, not a page (issue 43): after the shown list (the sidebar's
"Abstracts to show") it goes on through the relation's screening queue
(:mod:`app_pages.screening_panel`), one candidate at a time, each the best not yet labelled of
the order chosen (learned within the query, or as ranked:
:func:`curation.screening.order.next_candidate`), its text fetched when it is shown. The
candidates shown beyond the list stay in the sequence, so K goes back through them.

The counter names both numbers: the abstract's place in this screening sequence (next unlabelled
first, so it differs from the rank once labels reorder the list) out of the shown list and the
queue's other candidates, and its rank in the ranking, the "#N" on the card ("Abstract 11 of
1,000 · rank #14"). The URL keeps the view and the abstract on screen (``view=screening&doc=ID``,
:mod:`app_pages.place`), so a reload or a shared link opens the same abstract in screening mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import streamlit as st

from app_pages.common import (
    AppContext,
    current_user,
    flash,
    get_matcher,
    show_flash,
    store_label,
)
from app_pages.curate_cards import (
    GRADE_KEYS,
    Cards,
    card_label,
    doc_key,
    pending_grades,
    undo_labels,
)
from app_pages.curate_results import highlight_controls, no_mention_warning, ordered_docs
from app_pages.entity_tips import record_links
from app_pages.place import remember_place, take_pending_doc
from app_pages.pubmed_panel import with_badges
from app_pages.safe import md
from app_pages.screening_panel import (
    ORDERS,
    SCREENING_NOW,
    Screening,
    keyword_marks,
    relation_labels,
)
from curation.screening.order import next_candidate
from curation.screening.view import screening_view
from curation.search.cards import highlighted_html
from curation.search.ranking_names import ranking_label
from curation.search.session import (
    RankedDoc,
    SearchResult,
    card_html,
    ranked_doc,
    slot_entities,
    with_spans,
)
from curation.search.suggestions import accepted_answers
from curation.store.documents import Documents
from curation.store.labels import Grade, Labels
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
from kb_sources.schema import Schema
from retrievers.base import Hit

__all__ = ["GRADE_KEYS", "screening_panel", "shown_doc"]
KEYS_HELP = ("Keys: 1 complete · 2 partial · 3 irrelevant · 0 skip · N note · U undo · J next "
             "· K previous")
#: {"key": the list's identity, "pos": index in the sequence, "doc": id on screen, "more": the
#: queue's candidates shown after the list, as [doc id, order_labels] pairs}
POSITION = "screen_pos"
NOTE_OPEN = "screen_note_open"
NOTE_DRAFT = "screen_note_draft"  # {doc_id: note typed before the grade}
NOTE_INPUT = "screen_note"


def _position(order_key: tuple, docs: list[RankedDoc], grades: dict[str, Grade],
              queue: Screening | None) -> dict:
    """Where the curator is (the session's :data:`POSITION`): kept while the list holds the
    same abstracts (in the order they had when it was opened: a label that re-orders the list
    learned within the query does not move the abstracts under the curator; the queue's next
    candidates follow the new order), else the abstract a link or reload named (in the list,
    or further down the queue), else the first unlabelled abstract (past the list when all of
    it is labelled)."""
    saved = st.session_state.setdefault(POSITION, {})
    wanted = take_pending_doc()
    ids = [d.doc_id for d in docs]
    key = (*order_key, frozenset(ids))
    if wanted in ids:
        saved.clear()
        saved.update(key=key, ids=ids, pos=ids.index(wanted), more=[])
    elif wanted and queue is not None and queue.queue is not None \
            and wanted in queue.queue.index():
        saved.clear()
        saved.update(key=key, ids=ids, pos=len(ids), more=[[wanted, None]])
    elif saved.get("key") != key:
        listed = set(ids)
        past = queue is not None and queue.queue is not None and any(
            d not in listed for d in queue.queue.doc_ids)  # all labelled: on into the queue
        first = next((i for i, d in enumerate(docs) if d.doc_id not in grades),
                     len(ids) if past else 0)
        saved.clear()
        saved.update(key=key, ids=ids, pos=first, more=[])
    return saved


@dataclass(frozen=True)
class _Shown:
    """The abstract on screen: its card, its place in the sequence of ``total``, the
    sequence so far (doc ids: the list, then the queue's candidates shown after it)."""

    doc: RankedDoc
    pos: int
    total: int
    sequence: tuple[str, ...]


def _queue_now(partial: PartialRelation) -> Screening | None:
    """This run's screening of the relation when it has a queue (else the list alone)."""
    now = st.session_state.get(SCREENING_NOW)
    ok = isinstance(now, Screening) and now.query_key == partial.query_key and now.queue
    return now if ok else None


def _sequence(ctx: AppContext, schema: str, now: Screening | None, ids: list[str],
              saved: dict) -> int:
    """The sequence's length once the position is in it: the queue's next candidate is added
    when the curator moved past the last one (J, or a grade, on it). Returns the total:
    the list and the queue's other candidates."""
    more: list = saved["more"]
    if now is None or now.queue is None or now.view is None:
        saved["pos"] = min(max(saved["pos"], 0), max(len(ids) - 1, 0))
        return len(ids)
    shown = set(ids)
    total = len(ids) + sum(d not in shown for d in now.queue.doc_ids)
    if saved["pos"] >= len(ids) + len(more) and len(ids) + len(more) < total:
        view = screening_view(now.queue, relation_labels(ctx, schema, now.query_key))
        pick = next_candidate(now.queue, view, {*ids, *(d for d, _ in more)},
                              learned=now.mode == ORDERS[1])
        if pick is not None:
            more.append(list(pick))
    saved["pos"] = min(max(saved["pos"], 0), max(len(ids) + len(more) - 1, 0))
    return total


def _queue_doc(ctx: AppContext, schema: Schema, partial: PartialRelation, result: SearchResult,
               now: Screening, doc_id: str, order_labels: int | None) -> RankedDoc:
    """A queue candidate beyond the list as a card: its text fetched now, highlighted as the
    list's cards are (the query's entities, known and suggested answers), ranked by its place
    in the queue's ranked order."""
    assert now.queue is not None
    i = now.queue.index()[doc_id]
    doc = ranked_doc(Documents(ctx.ws).rows_by_id([doc_id]).get(doc_id),
                     Hit(doc_id, float(now.queue.static[i]), i + 1), doc_id in partial.pmids,
                     result.model_version)
    known = [*(c.entity for c in result.candidates),
             *accepted_answers(ctx.ws, schema, partial.query_key)]
    spans = tuple(get_matcher().find_spans(slot_entities(schema, partial, known), doc.text))
    doc = with_spans(replace(doc, order_labels=order_labels), spans, schema)
    return with_badges(ctx, replace(result, docs=(doc,)), partial).docs[0]


def _shown(ctx: AppContext, schema: Schema, partial: PartialRelation, result: SearchResult,
           grades: dict[str, Grade]) -> _Shown:
    """The abstract to show: in the list (next unlabelled first, :func:`ordered_docs`) or,
    past it, the queue's candidate at that place."""
    docs = ordered_docs(ctx.user.name, partial, result, grades)
    now = _queue_now(partial)
    order_key = (ctx.user.name, partial.query_key, result.query_text, result.model_version,
                 id(now.queue) if now else None)  # a queue built again: on from the list
    saved = _position(order_key, docs, grades, now)
    by_id = {d.doc_id: d for d in docs}
    ids: list[str] = saved["ids"]
    docs = [by_id[i] for i in ids]
    total = _sequence(ctx, schema.name, now, ids, saved)
    pos = saved["pos"]
    if pos < len(docs) or now is None:
        doc = docs[pos]
    else:
        doc = _queue_doc(ctx, schema, partial, result, now, *saved["more"][pos - len(docs)])
    saved["doc"] = doc.doc_id
    return _Shown(doc, pos, total, (*ids, *(d for d, _ in saved["more"])))


def shown_doc() -> str | None:
    """The document id screening mode showed last (for the URL of a full page run)."""
    return st.session_state.get(POSITION, {}).get("doc")


def _move(step: int) -> None:
    st.session_state[POSITION]["pos"] = st.session_state[POSITION].get("pos", 0) + step
    st.session_state[NOTE_OPEN] = False


def _grade(ws: Workspace, cards: Cards, doc: RankedDoc, grade: Grade) -> None:
    """Record ``grade`` (with the note typed for this abstract) and show the next abstract."""
    user = current_user(ws)
    if user is None:
        flash("error", "Your session ended; sign in again to label.", where="screen")
        return
    drafts: dict[str, str] = st.session_state.setdefault(NOTE_DRAFT, {})
    note = drafts.get(doc.doc_id)
    if note is None:  # a regrade keeps the current label's note
        note = card_label(ws, user.name, cards.schema.name, cards.partial.query_key,
                          doc.doc_id).note
    stored = store_label(ws, user=user, schema=cards.schema.name,
                         query_key=cards.partial.query_key, query_text=cards.query_text,
                         doc_id=doc.doc_id, grade=grade.value, note=note,
                         model_version=doc.model_version, order_labels=doc.order_labels)
    kept = doc.doc_id in pending_grades(ws, user.name, cards.schema.name, cards.partial.query_key)
    if stored is not None or kept:  # refused: stay, the error says why
        drafts.pop(doc.doc_id, None)
        _move(+1)


def _note_saved(ws: Workspace, cards: Cards, doc: RankedDoc, grade: Grade | None) -> None:
    """Enter in the note field: an abstract already labelled is relabelled with the note (same
    grade, audited; nothing when the note is unchanged); otherwise the note waits for the grade
    key."""
    note = st.session_state.get(NOTE_INPUT, "").strip()
    st.session_state[NOTE_OPEN] = False
    user = current_user(ws)
    if grade is not None and user is not None and note == card_label(
            ws, user.name, cards.schema.name, cards.partial.query_key, doc.doc_id).note:
        return
    if grade is None or user is None:
        st.session_state.setdefault(NOTE_DRAFT, {})[doc.doc_id] = note
        if note:
            flash("info", "Note kept: it is saved with the label you give this abstract.",
                  where="screen")
        return
    store_label(ws, user=user, schema=cards.schema.name, query_key=cards.partial.query_key,
                query_text=cards.query_text, doc_id=doc.doc_id, grade=grade.value, note=note,
                model_version=doc.model_version, order_labels=doc.order_labels)


def _undo(ws: Workspace, ids: list[str]) -> None:
    """Undo your last label (a bulk grade's labels together) and go back to its abstract when it
    is in this sequence (``ids``). An abstract left without a label keeps the undone note
    waiting for its next grade; one whose earlier label came back shows that label's note."""
    undone = undo_labels(ws, where="screen")
    for label in undone:
        if label.note and card_label(ws, label.user, label.schema, label.query_key,
                                     label.doc_id).grade is None:
            st.session_state.setdefault(NOTE_DRAFT, {})[label.doc_id] = label.note
    back = [ids.index(lab.doc_id) for lab in undone if lab.doc_id in ids]
    if back:
        st.session_state[POSITION]["pos"] = min(back)
    st.session_state[NOTE_OPEN] = False


def _open_note(draft: str) -> None:
    st.session_state[NOTE_OPEN] = True
    st.session_state[NOTE_INPUT] = draft


def _focus_note() -> None:
    """Put the cursor in the note field just opened (our script, no user text in it)."""
    st.html("<script>setTimeout(() => { const el = document.querySelector("
            "'.st-key-screen_note input'); if (el) { el.focus(); } }, 50);</script>",
            unsafe_allow_javascript=True)


@st.fragment
def screening_panel(ctx: AppContext, schema: Schema, partial: PartialRelation,
                    result: SearchResult, place: Mapping[str, str]) -> None:
    """One abstract, large, with the grade, note, undo and move keys. ``place`` is the page's
    URL place (:func:`app_pages.place.place_params` with ``screening``); the abstract on screen
    is added to it."""
    if not result.docs:
        st.info("No abstract matches this query. Edit the query or try another retriever.")
        return
    pending = pending_grades(ctx.ws, ctx.user.name, schema.name, partial.query_key)
    grades = {**Labels(ctx.ws).grades(schema.name, partial.query_key, ctx.user.name),
              **pending}
    no_mention_warning(schema, partial, result)
    shown = _shown(ctx, schema, partial, result, grades)
    doc, pos, total = shown.doc, shown.pos, shown.total
    remember_place({**place, "doc": doc.doc_id})
    grade = grades.get(doc.doc_id)
    labelled = sum(d in grades for d in shown.sequence)
    st.progress(min(labelled / total, 1.0),
                text=f"Abstract {pos + 1:,d} of {total:,d} · rank #{doc.rank:d} · labelled "
                     f"{labelled:,d} · ranked by {md(ranking_label(result.model_version))}")
    colours, enabled = highlight_controls(schema)
    cards = Cards(ctx, schema, partial, result.query_text, colours, enabled)
    current = card_label(ctx.ws, ctx.user.name, schema.name, partial.query_key, doc.doc_id)
    draft = st.session_state.get(NOTE_DRAFT, {}).get(doc.doc_id)
    with st.container(horizontal=True, vertical_alignment="center", key="screen_keys"):
        for g, key in GRADE_KEYS.items():
            st.button(md(g.value.capitalize()), key=f"screen_{g.value}", shortcut=key,
                      type="primary" if grade is g else "secondary",
                      on_click=_grade, args=(ctx.ws, cards, doc, g))
        st.button("Note", key="screen_note_btn", shortcut="N", icon=":material/edit_note:",
                  on_click=_open_note, args=(draft if draft is not None else current.note,))
        st.button("Undo", key="screen_undo", shortcut="U", icon=":material/undo:",
                  on_click=_undo, args=(ctx.ws, list(shown.sequence)))
        st.button("Previous", key="screen_prev", shortcut="K", on_click=_move, args=(-1,),
                  disabled=pos == 0, icon=":material/arrow_back:")
        st.button("Next", key="screen_next", shortcut="J", on_click=_move, args=(+1,),
                  disabled=pos >= total - 1, icon=":material/arrow_forward:")
    show_flash("screen")
    if st.session_state.get(NOTE_OPEN):
        st.text_input("Note for this abstract (Enter saves it)", key=NOTE_INPUT,
                      on_change=_note_saved, args=(ctx.ws, cards, doc, grade))
        _focus_note()
    elif draft:
        st.caption(f"Note waiting for a grade: {md(draft)}")
    elif current.note:
        st.caption(f":material/sticky_note_2: Note: {md(current.note)}")
    label = grade.value + (" (pending)" if doc.doc_id in pending else "") if grade else None
    highlighted = keyword_marks(highlighted_html(doc, colours, enabled,
                                                 record_links(ctx.ws, partial)))
    with st.container(border=True, key=f"screen_doc_{doc_key(doc.doc_id)}"):
        st.markdown(card_html(doc, highlighted, label, colours=colours, enabled_slots=enabled),
                    unsafe_allow_html=True)
    if pos == total - 1 and grade is not None:
        st.success(f"End of the list: {labelled:,d} of {total:,d} abstracts of this query "
                   "labelled. Pick the next relation, or press K to go back.")
    st.caption(KEYS_HELP)
