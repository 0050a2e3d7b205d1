"""Evaluate page, admin part: start a training round of any recipe (EDEL, BiCA, BioHiCL or a
plug-in) as a background job, see the workspace's versions. The form is generated from the
recipe's options (a widget per field: its type, choices and help text).

The button only records a request; :func:`curation.training.jobs.start_training` validates the
options and :func:`curation.jobs.queue.submit_job` refuses anyone but an admin (server side).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages.common import AppContext, flash, poll_job
from app_pages.safe import md
from curation.jobs.queue import list_jobs
from curation.store.models import Models
from curation.training.jobs import start_training
from curation.training.recipes import (
    OptionField,
    option_fields,
    options_class,
    recipe_help,
    recipe_names,
)
from curation.training.scoring import version_test_metric
from kb_sources.errors import CurationError

#: Options shown first (the rest of the shared ones sit under "More options").
MAIN_OPTIONS = ("base", "epochs", "max_seq_length")
#: Widget key of an option of the training form.
KEY = "train_opt_{}_{}"


def _request() -> None:
    recipe = st.session_state.get("train_recipe") or "edel"
    options = {}
    for f in option_fields(options_class(recipe)):
        value = st.session_state.get(KEY.format(recipe, f.name))
        if f.kind is str and f.optional and value == "":
            value = None
        if value is not None or f.optional:
            options[f.name] = f.kind(value) if value is not None else None
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


def _widget(recipe: str, f: OptionField, where: Any) -> None:
    """One option's widget, generated from its field: type, choices, help text."""
    key, label = KEY.format(recipe, f.name), f.name.replace("_", " ").capitalize()
    if f.kind is bool:
        where.checkbox(md(label), value=bool(f.default), key=key, help=md(f.help))
    elif f.choices:
        where.selectbox(md(label), list(f.choices), index=list(f.choices).index(f.default),
                        key=key, help=md(f.help))
    elif f.kind is int:
        where.number_input(md(label), value=f.default, step=1, key=key, help=md(f.help),
                           placeholder="all" if f.optional else None)
    elif f.kind is float:
        where.number_input(md(label), value=float(f.default), key=key, help=md(f.help),
                           format="%g")
    else:
        where.text_input(md(label), value=f.default or "", key=key, help=md(f.help))


def training_panel(ctx: AppContext, schemas: list[str]) -> None:
    """Start-training form (admins) and the workspace's model versions."""
    with st.expander("Train a model", expanded=False):
        if not schemas:
            st.info("No relation cites a document of this workspace yet: nothing to train on.")
            return
        names = recipe_names()
        helps = recipe_help()
        recipe = st.radio("Recipe", names, key="train_recipe", horizontal=True,
                          format_func=lambda r: md(helps[r].split(":")[0]))
        st.caption(md(helps[recipe]))
        st.selectbox("Schema", schemas, key="train_schema")
        specs = option_fields(options_class(recipe))
        main = [f for f in specs if f.name in MAIN_OPTIONS or not f.shared]
        cols = st.columns(4)
        for i, f in enumerate(main):
            _widget(recipe, f, cols[i % 4])
        with st.expander("More options", expanded=False):
            cols = st.columns(4)
            for i, f in enumerate(f for f in specs if f not in main):
                _widget(recipe, f, cols[i % 4])
        st.button("Start training", key="train_start", type="primary", on_click=_request)
        st.caption("About 3 training examples/s at 128 tokens on a 2-core CPU (an EDEL "
                   "disease_gene round: 20-25 minutes), then the new version is scored on the "
                   "test split.")
        jobs = list_jobs(ctx.ws, "train", limit=5)
        running = [j for j in jobs if not j.finished]
        if running:
            poll_job(ctx, running[0].id, "train")
        versions = Models(ctx.ws).versions()
        if versions:
            st.dataframe([{"version": v.id, "status": v.status.value, "base": v.base_model,
                           "dev NDCG@10": v.metrics.get("dev_ndcg@10"),
                           "test NDCG@10": version_test_metric(v),
                           "warnings": " · ".join(v.metrics.get("warnings") or []),
                           "created": v.created_at, "by": v.created_by} for v in versions],
                         hide_index=True, key="train_versions", width="stretch")
