"""Panels of the Review page about single items: a document's title and abstract, and the
disagreements view where a curator or admin records the final grade (curation.access.adjudication).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.common import AppContext, current_user, flash, show_flash
from app_pages.safe import md
from curation.access.adjudication import (
    REVIEWER_ROLES,
    Disagreement,
    adjudicate,
    adjudication_history,
    disagreements,
    document_titles,
    relation_texts,
)
from curation.search.candidates import is_pmid
from curation.search.session import fetch_documents
from kb_sources.errors import CurationError

#: The grades a final decision may give (a skip decides nothing).
FINAL_GRADES = ("complete", "partial", "irrelevant")
PUBMED_URL = "https://pubmed.ncbi.nlm.nih.gov/{}/"


def document_view(ctx: AppContext, doc_id: str, key: str) -> None:
    """Title and abstract of one document (escaped), with a PubMed link for a PMID."""
    doc = fetch_documents(ctx.ws, [doc_id]).get(doc_id)
    if doc is None:
        st.caption(f"Document {md(doc_id)} is not in the workspace.")
        return
    with st.container(border=True):
        st.markdown(f"**{md(doc['title'] or '(no title)')}** · {md(doc_id)}"
                    + (f" ({doc['year']:d})" if doc.get("year") else ""))
        if doc.get("journal"):
            st.caption(md(doc["journal"]))
        st.markdown(md(doc["abstract"]) if doc["abstract"] else "*(no abstract)*")
        if is_pmid(doc_id):
            st.link_button("Open in PubMed", PUBMED_URL.format(doc_id), key=f"{key}_pubmed")


def disagreements_frame(ctx: AppContext, items: list[Disagreement]) -> pd.DataFrame:
    """One row per item: relation, document, each user's grade, the final grade."""
    relations = relation_texts(ctx.ws, {(d.schema, d.query_key) for d in items})
    titles = document_titles(ctx.ws, [d.doc_id for d in items])
    return pd.DataFrame.from_records(
        [{"schema": d.schema, "relation": relations[d.schema, d.query_key] or d.query_text,
          "doc_id": d.doc_id, "title": titles.get(d.doc_id, ""),
          "grades": " · ".join(f"{user}: {grade.value}" for user, grade in d.grades),
          "final": d.adjudication.grade.value if d.adjudication else "",
          "decided_by": d.adjudication.user if d.adjudication else "",
          "reason": d.adjudication.reason if d.adjudication else ""} for d in items],
        columns=["schema", "relation", "doc_id", "title", "grades", "final", "decided_by",
                 "reason"])


def _record(ctx: AppContext, item: Disagreement) -> None:
    try:
        adj = adjudicate(ctx.ws, *item.item, st.session_state.get("dg_grade", ""),
                         st.session_state.get("dg_reason", ""), user=current_user(ctx.ws))
    except CurationError as exc:
        flash("error", md(exc), where="adjudication")
        return
    st.session_state["dg_reason"] = ""
    flash("success", f"Final grade of {md(adj.doc_id)} recorded: {md(adj.grade.value)}.",
          where="adjudication")


def disagreements_panel(ctx: AppContext) -> None:
    """Items two annotators graded differently; a curator or admin records the final grade."""
    items = disagreements(ctx.ws, viewer=ctx.user)
    if not items:
        st.caption("No disagreements: every item labelled by several users has one grade.")
        show_flash("adjudication")
        return
    open_items = sum(not d.resolved for d in items)
    st.caption(f"{len(items):,} items graded differently, {open_items:,} without a final grade "
               "(skips are not grades)")
    st.dataframe(disagreements_frame(ctx, items), hide_index=True, key="dg_table",
                 width="stretch")
    by_key = {"\x1f".join(d.item): d for d in items}
    if st.session_state.get("dg_item") not in by_key:
        st.session_state["dg_item"] = next(iter(by_key))
    chosen = by_key[st.selectbox(
        "Item", list(by_key), key="dg_item",
        format_func=lambda k: f"{by_key[k].doc_id} · {by_key[k].query_text[:60]} · "
                              + ("settled" if by_key[k].resolved else "open"))]
    document_view(ctx, chosen.doc_id, "dg_doc")
    history = adjudication_history(ctx.ws, *chosen.item)
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
                   args=(ctx, chosen))
    show_flash("adjudication")
