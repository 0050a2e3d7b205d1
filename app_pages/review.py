"""Review: the label log with filters (each label's relation, document title and abstract),
relabelling with its audit trail, annotator agreement (Cohen's kappa on shared items), exports
(labels as CSV / JSONL, CIViC source suggestions); the disagreements view where a curator or admin
records final grades; the source-suggestion queue. In blind mode an annotator sees other users'
labels only on items they graded themselves (curation.access.adjudication)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.common import (
    AppContext,
    current_user,
    flash,
    run_page,
    save_pending_labels,
    show_flash,
    store_label,
)
from app_pages.review_items import disagreements_panel, document_view
from app_pages.review_suggestions import suggestions_panel
from app_pages.safe import md
from curation.access.adjudication import (
    blind_mode,
    relation_texts,
    sees_all_labels,
    set_blind_mode,
    visible_labels,
)
from curation.evaluation.reporting import (
    export_labels_bytes,
    label_history,
    labels_frame,
)
from curation.search.ranking_names import ranking_label
from curation.search.suggestions import list_suggestions, suggestions_csv
from curation.store.documents import Documents
from curation.store.labels import Grade, Label, Labels
from kb_sources.errors import CurationError

ALL = "(all)"
EXPORT_HELP = ("One row per listed label, with its item's final grade: final_grade, final_source "
               "(adjudicated or unanimous), adjudicated_by, adjudicated_at, adjudication_reason; "
               "empty while the item's grades disagree")


def _filters(ctx: AppContext) -> list[Label]:
    cols = st.columns(5, vertical_alignment="bottom")
    user = cols[0].selectbox("User", [ALL, *Labels(ctx.ws).users()], key="rv_user")
    grade = cols[1].selectbox("Label", [ALL, *(g.value for g in Grade)], key="rv_grade")
    model = cols[2].selectbox("Ranked by", [ALL, *Labels(ctx.ws).model_versions()],
                              key="rv_model", help="What ranked the abstract when it was "
                              "labelled (the label rows' model version, named in words)",
                              format_func=lambda v: v if v == ALL else ranking_label(v))
    since = cols[3].date_input("Since", key="rv_since", format="YYYY-MM-DD")
    superseded = cols[4].checkbox("Include superseded", key="rv_superseded",
                                  help="Show relabelled versions too (the audit trail)")
    return Labels(ctx.ws).find(user=None if user == ALL else user,
                               grade=None if grade == ALL else grade,
                               model_version=None if model == ALL else model,
                               since=since.isoformat() if since else None,
                               include_superseded=superseded)


def _relabel(ctx: AppContext, label: Label) -> None:
    user = current_user(ctx.ws)
    if user is None or user.name != label.user:
        flash("error", "You can relabel only your own labels.")
        return
    new = store_label(ctx.ws, user=user, schema=label.schema, query_key=label.query_key,
                      query_text=label.query_text, doc_id=label.doc_id,
                      grade=st.session_state["rv_new_grade"],
                      note=st.session_state.get("rv_new_note", ""),
                      model_version=label.model_version, train_size=label.train_size)
    if new is None:  # pending (saved later) or refused: store_label said which
        return
    st.session_state["rv_label"] = new.id
    flash("success", f"Relabelled {md(label.doc_id)} as {md(new.grade.value)}.")


def relabel_panel(ctx: AppContext, labels: list[Label]) -> None:
    """Relabel one of your own current labels; its earlier versions are listed."""
    mine = {lab.id: lab for lab in labels if lab.user == ctx.user.name and not lab.superseded_by}
    if not mine:
        st.caption("None of your current labels is in this list; relabel your own labels here.")
        return
    label_id = st.selectbox(
        "Relabel one of your labels", list(mine), key="rv_label",
        format_func=lambda i: f"#{i} · {mine[i].doc_id} · {mine[i].grade.value} · "
                              f"{mine[i].query_text[:60]}")
    label = mine[label_id]
    if st.session_state.get("rv_for") != label.id:  # a label chosen: start from its grade, note
        st.session_state["rv_for"] = label.id
        st.session_state["rv_new_grade"] = label.grade.value
        st.session_state["rv_new_note"] = label.note
    cols = st.columns([2, 3, 1], vertical_alignment="bottom")
    cols[0].selectbox("New label", [g.value for g in Grade], key="rv_new_grade")
    cols[1].text_input("Note", key="rv_new_note")
    cols[2].button("Relabel", key="rv_relabel", on_click=_relabel, args=(ctx, label))
    history = label_history(ctx.ws, label)
    if len(history) > 1:
        st.caption("Earlier versions (newest first)")
        st.dataframe(labels_frame(history), hide_index=True, key="rv_history", width="stretch")


def agreement_panel(ctx: AppContext) -> None:
    users = Labels(ctx.ws).users()
    if len(users) < 2:
        st.caption("Agreement needs labels from two annotators.")
        return
    pair = Labels(ctx.ws).busiest_pair() or (users[0], users[1])  # most shared items first
    cols = st.columns(2)
    a = cols[0].selectbox("Annotator A", users, index=users.index(pair[0]), key="ag_a")
    b = cols[1].selectbox("Annotator B", users, index=users.index(pair[1]), key="ag_b")
    if a == b:
        st.caption("Choose two different annotators.")
        return
    result = Labels(ctx.ws).agreement(a, b)
    cols = st.columns(3)
    cols[0].metric("Shared items", result.shared)
    cols[1].metric("Observed agreement", "–" if result.shared == 0 else f"{result.observed:.3f}")
    cols[2].metric("Cohen's kappa", "–" if result.shared == 0 else f"{result.kappa:.3f}")


def export_panel(ctx: AppContext, labels: list[Label]) -> None:
    """Downloads of the listed labels, each with its item's final grade (adjudicated, else
    unanimous; blind mode applies to it as to the labels), and of the source suggestions."""
    cols = st.columns(3)
    cols[0].download_button("Labels as CSV", key="rv_export_csv", file_name="labels.csv",
                            data=lambda: export_labels_bytes(ctx.ws, labels, "csv", ctx.user),
                            mime="text/csv", on_click="ignore", help=EXPORT_HELP)
    cols[1].download_button("Labels as JSONL", key="rv_export_jsonl", file_name="labels.jsonl",
                            data=lambda: export_labels_bytes(ctx.ws, labels, "jsonl", ctx.user),
                            mime="application/jsonl", on_click="ignore", help=EXPORT_HELP)
    suggestions = list_suggestions(ctx.ws)
    cols[2].download_button(f"CIViC source suggestions ({len(suggestions)})",
                            key="rv_export_suggestions", file_name="source_suggestions.csv",
                            data=lambda: suggestions_csv(suggestions, ctx.ws.schemas()),
                            mime="text/csv", on_click="ignore", disabled=not suggestions)


def log_frame(ctx: AppContext, labels: list[Label]) -> pd.DataFrame:
    """The label log with each label's document title and relation entities."""
    frame = labels_frame(labels)
    titles = Documents(ctx.ws).titles([lab.doc_id for lab in labels])
    relations = relation_texts(ctx.ws, {(lab.schema, lab.query_key) for lab in labels})
    at = list(frame.columns).index("doc_id") + 1
    frame.insert(at, "title", [titles.get(lab.doc_id, "") for lab in labels])
    frame.insert(at + 1, "relation", [relations[lab.schema, lab.query_key] for lab in labels])
    return frame


def _toggle_blind(ctx: AppContext) -> None:
    try:
        on = set_blind_mode(ctx.ws, bool(st.session_state.get("rv_blind")),
                            user=current_user(ctx.ws))
    except CurationError as exc:
        flash("error", md(exc))
        return
    flash("success", "Blind review is on: annotators see others' labels only on items they "
                     "graded." if on else "Blind review is off: everyone sees every label.")


def blind_panel(ctx: AppContext, shown: int, total: int) -> None:
    """The admin's blind-review switch; what blind mode hides from an annotator."""
    if ctx.user.is_admin:
        st.toggle("Blind review", key="rv_blind", value=blind_mode(ctx.ws),
                  on_change=_toggle_blind, args=(ctx,),
                  help="Annotators see other users' labels on an item only after grading it")
    elif shown < total:
        st.caption(f"Blind review: {total - shown:,} labels of other users stay hidden until "
                   "you grade their items.")


def labels_panel(ctx: AppContext) -> None:
    found = _filters(ctx)
    labels = visible_labels(ctx.ws, found, ctx.user)
    blind_panel(ctx, len(labels), len(found))
    st.caption(f"{len(labels):,} labels · select a row to read its abstract")
    event = st.dataframe(log_frame(ctx, labels), hide_index=True, key="rv_table",
                         width="stretch", height=260, on_select="rerun",
                         selection_mode="single-row")
    rows = event.selection.rows if event else []
    if rows and rows[0] < len(labels):
        picked = labels[rows[0]]
        document_view(ctx, picked.doc_id, "rv_doc", (picked.schema, picked.query_key))
    relabel_panel(ctx, labels)
    if sees_all_labels(ctx.ws, ctx.user):  # kappa compares other users' grades
        st.markdown("**Agreement between two annotators** (shared items, skips left out)")
        agreement_panel(ctx)
    st.markdown("**Export**")
    export_panel(ctx, labels)


def render(ctx: AppContext) -> None:
    st.subheader("Review")
    show_flash()
    save_pending_labels(ctx)
    tabs = st.tabs(["Labels", "Disagreements", "Suggestions"])
    with tabs[0]:
        labels_panel(ctx)
    with tabs[1]:
        disagreements_panel(ctx)
    with tabs[2]:
        suggestions_panel(ctx)


def main() -> None:
    run_page(render)


if __name__ == "__main__":
    main()
