"""Models: a schema's versions as a timeline (held-out metrics, labels used, who promoted it and
why, the gate's verdict) and, for admins, a rollback to an earlier version (audited).

The Roll back button only records a request; :func:`curation.training.retrain.promote` checks the
admin role and the written reason in the library.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.common import AppContext, flash, run_page, show_flash
from app_pages.safe import html_text, md
from curation.evaluation.reporting import evaluable_schemas
from curation.training.retrain import history, promote
from kb_sources.errors import CurationError


def _request() -> None:
    st.session_state["rollback_request"] = {
        "version": st.session_state.get("rollback_version"),
        "reason": st.session_state.get("rollback_reason", ""),
    }


def handle_rollback(ctx: AppContext) -> None:
    request = st.session_state.get("rollback_request")
    st.session_state["rollback_request"] = None
    if not request:
        return
    try:
        version = promote(ctx.ws, request.get("version") or "", user=ctx.user,
                          reason=request.get("reason") or "")
    except CurationError as exc:
        st.error(md(exc))
        return
    flash("success", f"{md(version.id)} is now the active {md(version.schema)} model.")


def timeline_chart(rows: list[dict]) -> go.Figure:
    """Held-out NDCG@10 and EntityRecall@10 per version (plotly lines)."""
    fig = go.Figure()
    names = [html_text(r["version"]) for r in rows]
    for key, label in (("ndcg@10", "NDCG@10"), ("entity_recall@10", "EntityRecall@10")):
        fig.add_trace(go.Scatter(x=names, y=[r[key] for r in rows], mode="lines+markers",
                                 name=label))
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      yaxis_title="test split", title="Held-out metrics per version")
    return fig


def render(ctx: AppContext) -> None:
    st.header("Models")
    handle_rollback(ctx)
    show_flash()
    schemas = evaluable_schemas(ctx.ws)
    if not schemas:
        st.info("No relation cites a document of this workspace yet: no model to show.")
        return
    schema = st.selectbox("Schema", schemas, key="models_schema")
    rows = history(ctx.ws, schema)
    if not rows:
        st.info("No trained version of this schema yet. An admin starts one from the sidebar "
                "(Retraining) or with kbcurate retrain.")
        return
    st.plotly_chart(timeline_chart(rows), key="models_chart")
    frame = pd.DataFrame([{**r, "gate": "; ".join(r["gate"])} for r in rows])
    st.dataframe(frame, hide_index=True, key="models_table", width="stretch")
    if ctx.user.is_admin:
        with st.form("rollback_form"):
            st.selectbox("Make this version active (rollback or override the gate)",
                         [r["version"] for r in rows], key="rollback_version")
            st.text_input("Reason (required, audited)", key="rollback_reason")
            st.form_submit_button("Activate", on_click=_request, key="rollback_submit")


run_page(render)
