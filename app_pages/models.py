"""Models: a schema's versions as a timeline (held-out metrics, labels used, who promoted it and
why, the gate's verdict) and, for admins, a rollback to an earlier version (audited).

The Activate button only records a request; :func:`curation.training.activation.start_activation`
checks the admin role and the written reason in the library, then queues a job that builds the
version's indexes (minutes) and switches once they are complete; the page returns at once and
shows the job's progress.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.activation_panel import running_activation
from app_pages.common import AppContext, flash, poll_job, run_page, show_flash
from app_pages.ranker_panel import ranker_section
from app_pages.safe import html_text, md
from curation.jobs.queue import Job, list_jobs
from curation.search.session import corpus_counts
from curation.simulation.dense import QueryStrategy, SimulationConfig
from curation.simulation.jobs import start_simulation
from curation.store.models import Models
from curation.store.relations import Relations
from curation.training.activation import progress_message, start_activation
from curation.training.retrain import VersionHistory, history
from kb_sources.errors import CurationError


def _request() -> None:
    st.session_state["rollback_request"] = {
        "version": st.session_state.get("rollback_version"),
        "reason": st.session_state.get("rollback_reason", ""),
    }


def handle_rollback(ctx: AppContext) -> None:
    """Queue a pending activation request as the signed-in user (refused for non-admins and
    without a reason, in the library); returns at once with the build's progress."""
    request = st.session_state.get("rollback_request")
    st.session_state["rollback_request"] = None
    if not request:
        return
    try:
        job = start_activation(ctx.ws, ctx.user, request.get("version") or "",
                               request.get("reason") or "")
    except CurationError as exc:
        st.error(md(exc))
        return
    flash("info", md(activation_started(ctx, job, request.get("version") or "")))


def activation_started(ctx: AppContext, job: Job, asked: str) -> str:
    """What the Activate button answers at once: the job and where its build stands (plain
    text: escape it to render it)."""
    version, schema = job.params.get("version", ""), job.params.get("schema", "")
    if version != asked:
        return (f"Activation job {job.id:d} of {version} is still {job.status.value}; "
                f"activate {asked} after it ends.")
    where = job.message or progress_message(version, "dense", 0, corpus_counts(ctx.ws)[0])
    active = Models(ctx.ws).active(schema)
    still = (f"{active.id} stays active until then" if active is not None
             and active.id != version else "searches switch when it is complete")
    return (f"Activating {version} in the background (job {job.id:d}): {where}. "
            f"{still}.")


def _simulate_request() -> None:
    st.session_state["simulate_request"] = {
        "schema": st.session_state.get("models_schema"),
        "config": {"rounds": int(st.session_state.get("sim_rounds", 3)),
                   "labels_per_round": int(st.session_state.get("sim_labels", 50)),
                   "strategy": st.session_state.get("sim_strategy", "top"),
                   "start": st.session_state.get("sim_start") or None},
    }


def handle_simulation(ctx: AppContext) -> None:
    """Submit a pending simulation request as the signed-in user (refused for non-admins)."""
    request = st.session_state.get("simulate_request")
    st.session_state["simulate_request"] = None
    if not request:
        return
    try:
        job = start_simulation(ctx.ws, ctx.user, request.get("schema") or "",
                               request.get("config") or {})
    except CurationError as exc:
        st.error(md(exc))
        return
    flash("success", f"Simulation job {job.id:d} started (in a copy of the workspace).")


def simulation_panel(ctx: AppContext, versions: list[str]) -> None:
    """Admins: run the simulated curator + retraining rounds; the latest result's rounds."""
    d = SimulationConfig()
    with st.expander("Simulate the feedback loop (admin)", expanded=False):
        cols = st.columns(4, vertical_alignment="bottom")
        cols[0].number_input("Rounds", 1, 10, d.rounds, key="sim_rounds")
        cols[1].number_input("Labels per round", 5, 500, d.labels_per_round, step=5,
                             key="sim_labels")
        cols[2].selectbox("Query strategy", [q.value for q in QueryStrategy], key="sim_strategy")
        cols[3].selectbox("Start from", ["", *versions], key="sim_start",
                          help="The KB-only model of round 0 (empty: train one in the copy)")
        st.button("Start simulation", key="sim_start_button", on_click=_simulate_request)
        jobs = list_jobs(ctx.ws, "simulate", limit=5)
        running = [j for j in jobs if not j.finished]
        if running:
            poll_job(ctx, running[0].id, "simulate")
        done = next((j for j in jobs if j.status.value == "done"), None)
        if done is not None:
            st.dataframe(pd.DataFrame(done.result.get("rounds", [])), hide_index=True,
                         key="sim_rounds_table", width="stretch")


#: The test-split metrics charted per version (``history`` rows) and their labels.
CHARTED = (("ndcg_at_10", "NDCG@10"), ("entity_recall_at_10", "EntityRecall@10"))


def evaluated(rows: list[VersionHistory]) -> tuple[list[VersionHistory], list[str]]:
    """(rows with test metrics, ids of the versions without: "not evaluated")."""
    def has_metrics(row: VersionHistory) -> bool:
        return any(isinstance(getattr(row, key), int | float) for key, _ in CHARTED)

    return ([r for r in rows if has_metrics(r)],
            [r.version for r in rows if not has_metrics(r)])


def timeline_chart(rows: list[VersionHistory]) -> go.Figure:
    """Held-out NDCG@10 and EntityRecall@10 per evaluated version (plotly lines, 0..1)."""
    fig = go.Figure()
    names = [html_text(r.version) for r in rows]
    for key, label in CHARTED:
        fig.add_trace(go.Scatter(x=names, y=[getattr(r, key) for r in rows], mode="lines+markers",
                                 name=label))
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      yaxis_title="test split", yaxis_range=[0, 1],
                      title="Held-out metrics per version")
    return fig


def metrics_chart(rows: list[VersionHistory]) -> None:
    """The chart of the evaluated versions; the others are listed as not evaluated."""
    shown, missing = evaluated(rows)
    if shown:
        st.plotly_chart(timeline_chart(shown), key="models_chart")
    if missing:
        names = ", ".join(str(v) for v in missing)
        st.caption(f"Not evaluated on the test split (no test metrics, so not charted): "
                   f"{md(names)}")


def failed_watch_runs(ctx: AppContext, schema: str) -> None:
    """PubMed watches of the schema whose last run failed, with why (issue 37: a failed run
    says why here; the next run catches up)."""
    from curation.store.watches import Watches

    watches = {w.id: w for w in Watches(ctx.ws).watches(schema=schema)}
    failed = [(watches[i], run) for i, run in Watches(ctx.ws).last_runs(watches).items()
              if run.status == "failed"]
    for watch, run in failed:
        st.warning(md(f"The PubMed watch {watch.id} of {watch.owner} ({watch.label}) failed on "
                      f"{run.finished_at[:16].replace('T', ' ')} UTC: {run.error}. Its next run "
                      "catches up from the last successful run."))


def render(ctx: AppContext) -> None:
    st.header("Models")
    handle_rollback(ctx)
    handle_simulation(ctx)
    show_flash()
    schemas = Relations(ctx.ws).evaluable_schemas()
    if not schemas:
        st.info("No relation cites a document of this workspace yet: no model to show.")
        return
    schema = st.selectbox("Schema", schemas, key="models_schema")
    failed_watch_runs(ctx, schema)
    ranker_section(ctx, schema)
    st.subheader("Dense model versions")
    rows = history(ctx.ws, schema)
    if not rows:
        st.info("No trained version of this schema yet. An admin starts one from the sidebar "
                "(Retraining) or with kbcurate retrain.")
        return
    metrics_chart(rows)
    frame = pd.DataFrame([{**r.to_json(), "gate": "; ".join(r.gate)} for r in rows])
    st.dataframe(frame, hide_index=True, key="models_table", width="stretch")
    running_activation(ctx, schema)
    if ctx.user.is_admin:
        with st.form("rollback_form"):
            st.selectbox("Make this version active (rollback or override the gate); its "
                         "indexes are built first, in the background",
                         [r.version for r in rows], key="rollback_version")
            st.text_input("Reason (required, audited)", key="rollback_reason")
            st.form_submit_button("Activate", on_click=_request, key="rollback_submit")
        simulation_panel(ctx, [r.version for r in rows])


run_page(render)
