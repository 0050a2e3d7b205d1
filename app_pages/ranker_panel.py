"""The Models page's learned-ranker section: a schema's ranker versions (held-out metrics, labels
used, which is active), the default ranking and the measurement that chose it, how many new
labels wait for the next round, and, for admins, rollback, a round started now and the
retraining schedule.

A damaged version record or an active version that cannot be used (its folder gone, its model
damaged) is named in a warning; the other versions stay listed and an admin can activate one of
them or train a new one (issue 35).

Buttons only record requests; :func:`curation.training.ranker.promote_ranker`,
:func:`~curation.training.ranker.start_round` and
:func:`~curation.training.ranker.set_ranker_schedule` check the admin role in the library.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.common import AppContext, flash
from app_pages.safe import md
from curation.ranking.versions import ActiveRanker, active_ranker, scan_versions
from curation.search.ranked import default_for
from curation.store.rankers import Rankers
from curation.training.ranker import promote_ranker, set_ranker_schedule, start_round
from kb_sources.errors import CurationError


def _request(kind: str) -> None:
    st.session_state["ranker_request"] = {
        "kind": kind,
        "version": st.session_state.get("ranker_version"),
        "reason": st.session_state.get("ranker_reason", ""),
        "every": st.session_state.get("ranker_every"),
        "schema": st.session_state.get("models_schema"),
    }


def handle_request(ctx: AppContext) -> None:
    """Carry out a pending rollback, round or schedule change as the signed-in user."""
    request = st.session_state.get("ranker_request")
    st.session_state["ranker_request"] = None
    if not request:
        return
    try:
        if request["kind"] == "activate":
            version = promote_ranker(ctx.ws, request.get("version") or "", user=ctx.user,
                                     reason=request.get("reason") or "")
            flash("success", f"{md(version.id)} now ranks {md(version.schema)}.")
        elif request["kind"] == "train":
            job = start_round(ctx.ws, request.get("schema") or "", user=ctx.user)
            flash("success", f"Ranker round job {job.id:d} started; its version shows here when "
                             "it ends.")
        else:
            every = set_ranker_schedule(ctx.ws, int(request.get("every") or 0), user=ctx.user)
            flash("success", f"The ranker retrains after {every:d} new labels."
                  if every else "The ranker no longer retrains by itself.")
    except CurationError as exc:
        st.error(md(exc))


def version_rows(ctx: AppContext, schema: str,
                 state: ActiveRanker | None = None) -> tuple[list[dict], tuple[str, ...]]:
    """(one row per version of ``schema``, newest first; one line per damaged record)."""
    state = state or active_ranker(ctx.ws, schema)
    found = scan_versions(ctx.ws, schema)
    rows = []
    for v in reversed(found.versions):
        m = v.manifest
        rows.append({"version": v.id, "active": state.ident == v.id,
                     "model": m.get("kind", ""),
                     "dev NDCG@10": v.metrics.get("dev", {}).get("ndcg@10"),
                     "test NDCG@10": v.metrics.get("test", {}).get("ndcg@10"),
                     "labels used": len(m.get("labels_used", [])),
                     "dense features": ", ".join(
                         x for x in (m.get("dense") or "", "base" if m.get("base") else "") if x)
                     or "none",
                     "model file": "cannot be used" if state.ident == v.id and state.problem
                     else "present" if v.file.is_file() else "missing",
                     "created": m.get("created_at", ""), "by": m.get("created_by", "")})
    return rows, found.problems


def ranker_section(ctx: AppContext, schema: str) -> None:
    """The learned ranker of ``schema``."""
    st.subheader("Learned ranker")
    handle_request(ctx)
    default = default_for(ctx.ws, schema)
    every = Rankers(ctx.ws).retrain_every()
    st.caption(f"Default ranking: {md(default.configuration)}, {md(default.reason)}. "
               + (f"Retrains after every {every:d} new labels; "
                  f"{Rankers(ctx.ws).labels_waiting(schema):d} wait for the next round."
                  if every else "Automatic retraining is off."))
    state = active_ranker(ctx.ws, schema)
    if state.problem:
        st.warning(md(state.notice(default.configuration)))
    rows, problems = version_rows(ctx, schema, state)
    for problem in problems:
        st.warning(md(f"Skipped a damaged ranker version: {problem}"))
    if not rows:
        st.info("No ranker version yet: the first round runs after the first labels, or an "
                "admin starts one below (or runs kbcurate rank train).")
    else:
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="ranker_table", width="stretch")
    if not ctx.user.is_admin:
        return
    with st.expander("Ranker settings (admin)", expanded=bool(state.problem)):
        if rows:
            st.selectbox("Rank with this version (rollback or override the gate)",
                         [r["version"] for r in rows], key="ranker_version")
            st.text_input("Reason (required, audited)", key="ranker_reason")
            st.button("Activate", key="ranker_activate", on_click=_request, args=("activate",))
        st.button("Train a new version now (in the background)", key="ranker_train",
                  on_click=_request, args=("train",))
        st.number_input("Retrain after this many new labels (0: never)", 0, 10_000, every,
                        step=5, key="ranker_every")
        st.button("Save", key="ranker_every_save", on_click=_request, args=("schedule",))
