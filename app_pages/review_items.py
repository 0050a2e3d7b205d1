"""Panels of the Review page about single items: a document's title and abstract with the
relation's entities highlighted as on the Curate page, and the disagreements view where a curator
or admin records the final grade (curation.access.adjudication).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.common import AppContext, current_user, flash, get_matcher, show_flash
from app_pages.entity_tips import record_links
from app_pages.safe import md
from curation.access.adjudication import (
    REVIEWER_ROLES,
    Disagreement,
    Item,
    adjudicate,
    disagreements,
    next_open_item,
    relation_texts,
)
from curation.matching.highlight import render_highlighted, render_legend, slot_colours
from curation.search.candidates import is_pmid
from curation.search.item_highlight import item_relation, item_spans
from curation.store.adjudications import Adjudications
from curation.store.documents import Documents
from kb_sources.errors import CurationError
from kb_sources.types import joined_text

#: The grades a final decision may give (a skip decides nothing).
FINAL_GRADES = ("complete", "partial", "irrelevant")
PUBMED_URL = "https://pubmed.ncbi.nlm.nih.gov/{}/"
#: Pixels per character and the padding of a table column sized to its longest text.
CHAR_PX, PAD_PX = 7.0, 32


def document_view(ctx: AppContext, doc_id: str, key: str,
                  relation: tuple[str, str] | None = None) -> None:
    """Title and abstract of one document (escaped), with a PubMed link for a PMID; with
    ``relation`` (schema, query_key) its entities are highlighted as on the Curate page, each
    with its tooltip (name, slot, database and KB record links)."""
    doc = Documents(ctx.ws).rows_by_id([doc_id]).get(doc_id)
    if doc is None:
        st.caption(f"Document {md(doc_id)} is not in the workspace.")
        return
    title, abstract = doc.title or "", doc.abstract or ""
    schema = ctx.ws.schemas().get(relation[0]) if relation else None
    partial = item_relation(ctx.ws, schema, relation[1]) if schema and relation else None
    colours = slot_colours(schema.slot_names) if schema else {}
    spans = []
    if schema and partial:
        text = joined_text(title, abstract)  # unstripped: the spans' offsets
        spans = item_spans(ctx.ws, schema, partial, doc_id, text, get_matcher())
    with st.container(border=True, key=f"{key}_box"):
        st.caption(md(doc_id) + (f" ({doc.year:d})" if doc.year else "")
                   + (f" · {md(doc.journal)}" if doc.journal else ""))
        if partial is not None:
            st.markdown(render_legend(colours), unsafe_allow_html=True)
        elif relation:
            st.caption(f"No KB relation or typed query of {md(relation[0])} has the key "
                       f"{md(relation[1])}: the abstract is shown without highlights.")
        st.markdown(render_highlighted(title, abstract, spans, colours, tips=True,
                                       record_links=record_links(ctx.ws, partial)
                                       if partial else None),
                    unsafe_allow_html=True)
        if not (title and abstract):
            st.caption("(no title)" if abstract else "(no abstract)")
        if is_pmid(doc_id):
            st.link_button("Open in PubMed", PUBMED_URL.format(doc_id), key=f"{key}_pubmed")


def _joined(pairs: tuple[tuple[str, str], ...]) -> str:
    return " · ".join(f"{user}: {text}" for user, text in pairs if text)


def disagreements_frame(ctx: AppContext, items: list[Disagreement]) -> pd.DataFrame:
    """One row per item: relation, document, each user's grade and note, the final grade."""
    relations = relation_texts(ctx.ws, {(d.schema, d.query_key) for d in items})
    titles = Documents(ctx.ws).titles([d.doc_id for d in items])
    return pd.DataFrame.from_records(
        [{"schema": d.schema, "relation": relations[d.schema, d.query_key] or d.query_text,
          "doc_id": d.doc_id, "title": titles.get(d.doc_id, ""),
          "grades": _joined(tuple((user, grade.value) for user, grade in d.grades)),
          "notes": _joined(d.notes),
          "final": d.adjudication.grade.value if d.adjudication else "",
          "decided_by": d.adjudication.user if d.adjudication else "",
          "reason": d.adjudication.reason if d.adjudication else ""} for d in items],
        columns=["schema", "relation", "doc_id", "title", "grades", "notes", "final",
                 "decided_by", "reason"])


def fitted_width(texts: pd.Series) -> int:
    """Pixels a table column needs to show its longest text uncut."""
    longest = max((len(str(t)) for t in texts), default=0)
    return int(max(longest, 8) * CHAR_PX + PAD_PX)


def _record(ctx: AppContext, item: Disagreement, order: tuple[Item, ...]) -> None:
    """Record the final grade, then select the next open item (in the order shown)."""
    try:
        adj = adjudicate(ctx.ws, *item.item, st.session_state.get("dg_grade", ""),
                         st.session_state.get("dg_reason", ""), user=current_user(ctx.ws))
    except CurationError as exc:
        flash("error", md(exc), where="adjudication")
        return
    st.session_state["dg_reason"] = ""
    fresh = {d.item: d for d in disagreements(ctx.ws, viewer=ctx.user)}
    following = next_open_item([fresh[i] for i in order if i in fresh], item.item)
    recorded = (f"Final grade of {adj.doc_id} ({item.query_text[:60]}) recorded: "
                f"{adj.grade.value}.")  # plain text: escaped below
    if following is None:
        flash("success", f"{md(recorded)} No open disagreement is left.", where="adjudication")
        return
    st.session_state["dg_item"] = "\x1f".join(following.item)
    flash("success", f"{md(recorded)} Next open item: {md(following.doc_id)} · "
                     f"{md(following.query_text[:60])}.", where="adjudication")


def _annotators(item: Disagreement) -> None:
    """Each annotator's grade and note, one line each (notes are untrusted text)."""
    notes = dict(item.notes)
    for user, grade in item.grades:
        note = notes.get(user, "")
        st.markdown(f"- **{md(user)}**: {md(grade.value)} · "
                    + (f"note: {md(note)}" if note.strip() else "*no note*"))


def disagreements_panel(ctx: AppContext) -> None:
    """Items two annotators graded differently; a curator or admin records the final grade."""
    items = disagreements(ctx.ws, viewer=ctx.user)
    if not items:
        st.caption("No disagreements: every item labelled by several users has one grade.")
        show_flash("adjudication")
        return
    open_items = sum(not d.resolved for d in items)
    st.caption(f"{len(items):,} items graded differently, {open_items:,} without a final grade "
               "(skips are not grades)"
               + ("" if open_items else ": every disagreement is settled"))
    frame = disagreements_frame(ctx, items)
    st.dataframe(frame, hide_index=True, key="dg_table", width="stretch", column_config={
        "relation": st.column_config.TextColumn("relation", width="medium"),
        "title": st.column_config.TextColumn("title", width="medium"),
        "grades": st.column_config.TextColumn("grades", width=fitted_width(frame["grades"]),
                                              pinned=True),
        "notes": st.column_config.TextColumn("notes", width="large")})
    by_key = {"\x1f".join(d.item): d for d in items}
    if st.session_state.get("dg_item") not in by_key:
        st.session_state["dg_item"] = next(iter(by_key))
    chosen = by_key[st.selectbox(
        "Item", list(by_key), key="dg_item",
        format_func=lambda k: f"{by_key[k].doc_id} · {by_key[k].query_text[:60]} · "
                              + ("settled" if by_key[k].resolved else "open"))]
    _annotators(chosen)
    document_view(ctx, chosen.doc_id, "dg_doc", (chosen.schema, chosen.query_key))
    history = Adjudications(ctx.ws).history(*chosen.item)
    if history:
        st.caption(f"Final grade **{md(history[0].grade.value)}** by {md(history[0].user)} "
                   f"({md(history[0].created_at[:16])}): {md(history[0].reason)}")
        if len(history) > 1:
            st.caption(f"{len(history) - 1:d} earlier decision(s), superseded")
    if ctx.user.role not in REVIEWER_ROLES:
        st.caption("Curators and admins record the final grade.")
        return
    cols = st.columns([1, 3, 1], vertical_alignment="bottom")
    cols[0].selectbox("Final grade", FINAL_GRADES, key="dg_grade")
    cols[1].text_input("Reason (required)", key="dg_reason")
    cols[2].button("Record final grade", key="dg_save", type="primary", on_click=_record,
                   args=(ctx, chosen, tuple(d.item for d in items)))
    show_flash("adjudication")
