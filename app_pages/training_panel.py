"""Evaluate page, admin part: start a training round (EDEL, BiCA or BioHiCL) as a background
job, see the workspace's versions.

The button only records a request; :func:`curation.training.jobs.start_training` validates the
options and :func:`curation.jobs.queue.submit_job` refuses anyone but an admin (server side).
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import AppContext, flash, poll_job
from app_pages.safe import md
from curation.jobs.queue import list_jobs
from curation.store.models import list_models
from curation.training.jobs import start_training
from curation.training.mesh_descriptors import FROM_ANNOTATIONS
from curation.training.recipes import RECIPE_HELP, RECIPES, recipe_options
from kb_sources.errors import CurationError


def _request() -> None:
    recipe = st.session_state.get("train_recipe") or "edel"
    options = {"epochs": int(st.session_state.get("train_epochs", 1)),
               "max_seq_length": int(st.session_state.get("train_length", 128))}
    if recipe == "edel":
        options["negatives_per_class"] = int(st.session_state.get("train_negatives", 2))
    elif recipe == "bica":
        options["graph"] = st.session_state.get("train_graph") or "citations"
    elif recipe == "biohicl" and st.session_state.get("train_entity_mesh"):
        options.update(entity_mesh=True, mesh_descriptors=FROM_ANNOTATIONS)
    st.session_state["train_request"] = {
        "schema": st.session_state.get("train_schema"), "recipe": recipe, "options": options}


def handle_training_request(ctx: AppContext) -> None:
    """Submit a pending training request as the signed-in user (refused for non-admins)."""
    request = st.session_state.get("train_request")
    st.session_state["train_request"] = None
    if not request:
        return
    try:
        job = start_training(ctx.ws, ctx.user, request.get("schema") or "", request["options"],
                             recipe=request.get("recipe") or "edel")
    except CurationError as exc:
        st.error(md(exc))
        return
    st.session_state["train_job"] = job.id
    flash("success", f"Training job {job.id:d} started; the new version appears below when "
                     "done.")


def training_panel(ctx: AppContext, schemas: list[str]) -> None:
    """Start-training form (admins) and the workspace's model versions."""
    with st.expander("Train a model", expanded=False):
        if not schemas:
            st.info("No relation cites a document of this workspace yet: nothing to train on.")
            return
        recipe = st.radio("Recipe", RECIPES, key="train_recipe", horizontal=True,
                          format_func=lambda r: md(RECIPE_HELP[r].split(":")[0]))
        st.caption(md(RECIPE_HELP[recipe]))
        defaults = recipe_options(recipe)
        cols = st.columns([2, 1, 1, 1, 1], vertical_alignment="bottom")
        cols[0].selectbox("Schema", schemas, key="train_schema")
        cols[1].number_input("Epochs", 1, 20, defaults.epochs, key="train_epochs")
        if recipe == "edel":
            cols[2].number_input("Negatives / class", 1, 50, defaults.negatives_per_class,
                                 key="train_negatives")
        elif recipe == "bica":
            cols[2].selectbox("Graph", ("citations", "knn", "both"), key="train_graph",
                              help="citations: the paper; knn: a kNN graph of the corpus by the "
                                   "base model (adaptation: few abstracts here have citations)")
        elif recipe == "biohicl":
            cols[2].checkbox("Entity MeSH", key="train_entity_mesh",
                             help="also label documents by the MeSH ids of their disease and "
                                  "chemical annotations, named by the headings their mentions "
                                  "spell (an adaptation; reserved corpora never count)")
        cols[3].number_input("Max tokens", 32, 512, defaults.max_seq_length, step=32,
                             key="train_length")
        cols[4].button("Start training", key="train_start", type="primary", on_click=_request)
        st.caption(f"Base model {md(defaults.base)}; about 3 training examples/s at 128 tokens on "
                   "a 2-core CPU (an EDEL disease_gene round: 20-25 minutes).")
        jobs = list_jobs(ctx.ws, "train", limit=5)
        running = [j for j in jobs if not j.finished]
        if running:
            poll_job(ctx, running[0].id, "train")
        versions = list_models(ctx.ws)
        if versions:
            st.dataframe([{"version": v.id, "status": v.status.value, "base": v.base_model,
                           "dev NDCG@10": v.metrics.get("dev_ndcg@10"),
                           "created": v.created_at, "by": v.created_by} for v in versions],
                         hide_index=True, key="train_versions", width="stretch")
