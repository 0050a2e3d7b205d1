"""The Suggestions tab of the Review page: the source-suggestion queue, moderated by curators and
admins (accept or reject with a reason; curation.search.suggestions.moderate_suggestion), and the
CIViC evidence-item drafts of the accepted ones (curation.search.civic_draft: CSV or JSON for
CIViC's form, never submitted by the tool)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.common import AppContext, current_user, flash, get_matcher, show_flash
from app_pages.safe import md
from curation.access.adjudication import REVIEWER_ROLES
from curation.search.civic_draft import FORMATS, NOTICE, civic_drafts
from curation.search.suggestions import (
    STATUS_COLUMNS,
    SourceSuggestion,
    SuggestionStatus,
    list_suggestions,
    moderate_suggestion,
    suggestions_csv,
)
from kb_sources.errors import CurationError

ALL = "(all)"
STATUS_CHOICES = (*(s.value for s in SuggestionStatus), ALL)


def suggestions_frame(rows: list[SourceSuggestion]) -> pd.DataFrame:
    columns = ["id", "status", "pmid", "relation", "answer", "comment", "confirmed_by",
               "created_at", *STATUS_COLUMNS[1:]]
    return pd.DataFrame.from_records(
        [{"id": s.id, "status": s.status.value, "pmid": s.pmid,
          "relation": " · ".join(f"{k}: {v}" for k, v in s.slots.items() if v),
          "answer": s.answer, "comment": s.comment, "confirmed_by": s.confirmed_by,
          "created_at": s.created_at, "reviewed_by": s.reviewed_by,
          "reviewed_at": s.reviewed_at or "", "review_reason": s.review_reason} for s in rows],
        columns=columns)


def _moderate(ctx: AppContext, suggestion_id: int, status: SuggestionStatus) -> None:
    try:
        row = moderate_suggestion(ctx.ws, suggestion_id, status,
                                  st.session_state.get("sg_reason", ""),
                                  user=current_user(ctx.ws))
    except CurationError as exc:
        flash("error", md(exc), where="moderation")
        return
    st.session_state["sg_reason"] = ""
    flash("success", f"Suggestion {row.id:d} (PMID {md(row.pmid)}, {md(row.answer)}) "
                     f"{md(row.status.value)}.", where="moderation")


def _moderation_form(ctx: AppContext, rows: list[SourceSuggestion]) -> None:
    by_id = {s.id: s for s in rows}
    if st.session_state.get("sg_pick") not in by_id:
        st.session_state["sg_pick"] = next(iter(by_id))
    chosen = by_id[st.selectbox(
        "Suggestion", list(by_id), key="sg_pick",
        format_func=lambda i: f"#{i} · PMID {by_id[i].pmid} · {by_id[i].answer} · "
                              f"{by_id[i].status.value}")]
    st.text_input("Reason (required to reject)", key="sg_reason")
    cols = st.columns(2)
    cols[0].button("Accept", key="sg_accept", type="primary", on_click=_moderate,
                   args=(ctx, chosen.id, SuggestionStatus.ACCEPTED),
                   disabled=chosen.status is SuggestionStatus.ACCEPTED)
    cols[1].button("Reject", key="sg_reject", on_click=_moderate,
                   args=(ctx, chosen.id, SuggestionStatus.REJECTED),
                   disabled=chosen.status is SuggestionStatus.REJECTED)


def _export(ctx: AppContext, rows: list[SourceSuggestion]) -> None:
    """The CSV export, shown whenever the workspace has a suggestion: the listed ones, or all of
    them when none has the chosen status (accepting the last new suggestion empties the "new"
    list; the export stays, now of every suggestion)."""
    if rows:
        st.download_button("These suggestions as CSV", key="sg_export",
                           file_name="source_suggestions.csv", mime="text/csv",
                           on_click="ignore", data=lambda: suggestions_csv(rows,
                                                                           ctx.ws.schemas()))
        return
    every = list_suggestions(ctx.ws)
    if every:
        st.download_button(f"All {len(every):,} suggestions as CSV", key="sg_export",
                           file_name="source_suggestions.csv", mime="text/csv",
                           on_click="ignore", data=lambda: suggestions_csv(every,
                                                                           ctx.ws.schemas()))


def draft_text(ctx: AppContext, accepted: list[SourceSuggestion], fmt: str) -> str:
    """The CIViC drafts of ``accepted`` as ``fmt`` (csv or json) text; a suggestion whose
    schema the workspace no longer has is left out."""
    schemas = ctx.ws.schemas()
    drafts = civic_drafts(ctx.ws, [s for s in accepted if s.schema in schemas],
                          matcher=get_matcher())
    return FORMATS[fmt][0](drafts)


def _drafts(ctx: AppContext) -> None:
    """Downloads of the CIViC evidence-item drafts of every accepted suggestion."""
    accepted = list_suggestions(ctx.ws, status=SuggestionStatus.ACCEPTED)
    if not accepted:
        return
    st.caption(f"CIViC evidence-item drafts of the {len(accepted):,} accepted suggestion(s): "
               "pre-filled from the relation and the abstract's evidence sentences. " + NOTICE)
    cols = st.columns(2)
    for col, fmt in zip(cols, FORMATS, strict=True):
        _, suffix, mime = FORMATS[fmt]
        col.download_button(md(f"CIViC drafts ({fmt.upper()})"), key=f"sg_drafts_{fmt}",
                            file_name=f"civic_evidence_drafts.{suffix}", mime=mime,
                            on_click="ignore",
                            data=lambda fmt=fmt: draft_text(ctx, accepted, fmt))


def suggestions_panel(ctx: AppContext) -> None:
    """Source suggestions by status; curators and admins accept or reject them; CIViC drafts
    of the accepted ones."""
    status = st.selectbox("Status", STATUS_CHOICES, key="sg_status")
    rows = list_suggestions(ctx.ws, status=None if status == ALL else status)
    st.caption(f"{len(rows):,} source suggestion(s)")
    show_flash("moderation")
    _export(ctx, rows)
    _drafts(ctx)
    if not rows:
        return
    st.dataframe(suggestions_frame(rows), hide_index=True, key="sg_table", width="stretch",
                 column_config={"pmid": st.column_config.TextColumn("pmid", width=100)})
    if ctx.user.role in REVIEWER_ROLES:
        _moderation_form(ctx, rows)
    else:
        st.caption("Curators and admins accept or reject suggestions.")
