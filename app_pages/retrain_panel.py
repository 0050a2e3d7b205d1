"""Sidebar, every page: the running retraining round (everyone sees its progress), the last
learned-ranker rounds per schema (everyone: a curator whose labels started a round sees what it
did, promoted or kept and why; issue 36 item 5) and, for admins, per schema: the active version,
the labels the next round will learn from that it did not (counted by the round's own selection,
so a round resets the count only by what it used; issue 44 item 3), the labels no round can use
and why, and Retrain.

The Retrain button only records a request; :func:`curation.training.jobs.start_retrain` refuses
anyone but an admin (server side) and returns the running job instead of starting a second one.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import AppContext, flash, poll_job
from app_pages.ranker_panel import round_line
from app_pages.safe import md
from curation.jobs.queue import Job, JobStatus, list_jobs
from curation.store.labels import Grade
from curation.store.relations import Relations
from curation.training.jobs import start_retrain
from curation.training.label_plan import NOT_USED_REASONS, next_round_labels
from curation.training.recipes import get_recipe, options_class, recipe_names
from curation.training.retrain import RetrainOptions
from curation.training.round_history import last_rounds_per_schema
from curation.training.scoring import EVALUATIONS
from kb_sources.errors import CurationError


def _request() -> None:
    recipe = st.session_state.get("retrain_recipe") or "edel"
    st.session_state["retrain_request"] = {
        "schema": st.session_state.get("retrain_schema"),
        "options": {
            "recipe": recipe,
            "training": {"epochs": int(st.session_state.get(f"retrain_epochs_{recipe}", 1))},
            "warm_start": not st.session_state.get("retrain_from_base", False),
            "tolerance_pp": float(st.session_state.get("retrain_tolerance", 0.5)),
            "evaluation": st.session_state.get("retrain_evaluation") or "corpus",
            "small_test_reason": st.session_state.get("retrain_small_reason") or "",
        },
    }


def handle_retrain_request(ctx: AppContext) -> None:
    """Submit a pending Retrain request as the signed-in user (refused for non-admins)."""
    request = st.session_state.get("retrain_request")
    st.session_state["retrain_request"] = None
    if not request:
        return
    try:
        job = start_retrain(ctx.ws, ctx.user, request.get("schema") or "", request["options"])
    except CurationError as exc:
        st.sidebar.error(md(exc))
        return
    flash("success", f"Retraining job {job.id:d} for {md(job.params.get('schema'))} is running; "
                     "the new version is promoted only if it beats the active one on held-out "
                     "queries.")


def retrain_sidebar(ctx: AppContext) -> None:
    """The sidebar block (see the module docstring)."""
    handle_retrain_request(ctx)
    jobs = list_jobs(ctx.ws, "retrain", limit=5)
    running = [j for j in jobs if not j.finished]
    with st.sidebar:
        if running:
            poll_job(ctx, running[0].id, "retrain")
        else:
            ended_lately(jobs)
        ranker_rounds(ctx)
        if not ctx.user.is_admin:
            return
        with st.expander("Retraining", expanded=False):
            schemas = Relations(ctx.ws).evaluable_schemas()
            if not schemas:
                st.caption("No relation cites a document of this workspace: nothing to train on.")
                return
            schema = st.selectbox("Schema", schemas, key="retrain_schema")
            _status(ctx, schema)
            recipe = st.selectbox("Recipe", recipe_names(), key="retrain_recipe",
                                  help=md("; ".join(f"{k}: {get_recipe(k).labels}"
                                                    for k in recipe_names())))
            st.caption(md(f"Labels become: {get_recipe(recipe).labels}"))
            loop = RetrainOptions()
            st.number_input("Epochs", 1, 20, options_class(recipe)().epochs,
                            key=f"retrain_epochs_{recipe}")
            st.number_input("Gate tolerance (pp)", 0.0, 10.0, loop.tolerance_pp, step=0.5,
                            key="retrain_tolerance")
            st.selectbox("Gate measures on", list(EVALUATIONS), key="retrain_evaluation",
                         format_func=lambda k: EVALUATION_WORDS.get(k, k),
                         help="the whole corpus is what kbcurate evaluate scores; the test pool "
                              "encodes a few thousand documents instead of every one (a "
                              "promoted version still encodes the corpus for its index)")
            st.checkbox("Start from the base model (not the active version)",
                        key="retrain_from_base")
            st.text_input("Reason to promote on < 20 test queries (optional)",
                          key="retrain_small_reason",
                          help="the gate does not promote on fewer than 20 held-out queries "
                               "unless an admin writes why (audited)")
            st.button("Retrain", key="retrain_start", type="primary", on_click=_request,
                      disabled=bool(running))


#: How the gate may measure a round (:data:`curation.training.scoring.EVALUATIONS`), in words.
EVALUATION_WORDS = {"corpus": "the whole corpus (slow on a CPU)",
                    "pool": "a test pool: gold + BM25 top 30 + 500 random (faster)"}

#: Ranker rounds listed per schema in the sidebar.
SIDEBAR_ROUNDS = 3


def ranker_rounds(ctx: AppContext) -> None:
    """The learned ranker's rounds: one running now (per schema), and the last rounds per schema
    (when, labels, held-out scores, promoted or kept and why)."""
    running = [j for j in list_jobs(ctx.ws, "rank", limit=10) if not j.finished]
    for job in running:
        st.caption(f"Ranker round of {md(job.params.get('schema'))} "
                   f"{md(job.status.value)} (job {job.id:d}): {md(job.message or 'queued')}")
    rounds = last_rounds_per_schema(ctx.ws, SIDEBAR_ROUNDS)
    if not rounds:
        return
    with st.expander("Ranker rounds", expanded=False, key="ranker_rounds_sidebar"):
        for schema, records in rounds.items():
            st.caption(f"**{md(schema)}**")
            for rec in records:
                st.caption(md(round_line(rec)))


#: Seconds a cancelled or failed round stays said in the sidebar.
ENDED_SHOWN_S = 600


def ended_lately(jobs: list[Job]) -> None:
    """Say how the last round ended when it was cancelled or failed in the last ten minutes
    (the progress bar is gone; without this the round just vanished)."""
    last = jobs[0] if jobs else None
    if last is None or last.status not in (JobStatus.CANCELLED, JobStatus.FAILED):
        return
    if last.idle_s > ENDED_SHOWN_S:
        return
    schema = last.params.get("schema", "")
    st.caption(f"Retraining job {last.id:d} ({md(schema)}) {md(last.status.value)}: "
               f"{md(last.error or 'no reason recorded')}")


def _status(ctx: AppContext, schema: str) -> None:
    count = next_round_labels(ctx.ws, schema)
    grades = " · ".join(f"{g.value} {count.new.get(g.value, 0):,}" for g in Grade
                        if g is not Grade.SKIP)
    st.caption(f"Active: {md(count.active) if count.active else 'none (BM25 and zero-shot only)'}")
    st.caption(f"Labels since it was trained: {md(grades)}")
    if count.learned:
        st.caption(f"The next round learns from {count.total:,} labels: these and the "
                   f"{count.learned:,} the active version learned already.")
    if count.not_usable:
        why = "; ".join(f"{k} {n:,} ({NOT_USED_REASONS.get(k, k)})"
                        for k, n in sorted(count.not_usable.items()))
        st.caption(md(f"Not usable: {sum(count.not_usable.values()):,} — {why}"))
