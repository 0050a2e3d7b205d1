"""Evaluate: run the evaluation harness as a background job and chart its metrics.

Starting a run is for admins, and the check is on the server side: the Start button only records a
request in session state; the page hands every request to
:func:`curation.evaluation.reporting.start_evaluation`, whose :func:`curation.jobs.queue.submit_job`
refuses a non-admin whatever the widgets or the session state say. Jobs live in the workspace, so
their state and results survive a page refresh; the page polls a running job in a fragment and keeps
working meanwhile. Training and retraining jobs (a later issue) plug into the same job list.

Besides the registered retrievers the page offers ``ranked`` (the schema's active learned-ranker
version, when one can be used) and ``best`` (issue 36 item 6): ``best`` measures every
configuration the workspace can run on the test split and records the best as the schema's
default ranking, as ``kbcurate evaluate --retriever best`` does (admins only, checked in the
library: :func:`curation.evaluation.best.choose_default`); it runs while the page waits (tens of
seconds: BM25, the entity rerank and the ranker over the test queries) and says what it chose,
with a warning when the split has fewer than 20 queries.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import AppContext, flash, poll_job, run_page, show_flash
from app_pages.safe import html_frame, html_text, md
from app_pages.training_panel import handle_training_request, training_panel
from curation.evaluation.best import BEST, choose_default
from curation.evaluation.reporting import (
    EVAL_SPLITS,
    evaluation_choices,
    job_frame,
    metrics_frame,
    per_query_frame,
    start_evaluation,
)
from curation.jobs.queue import Job, list_jobs
from curation.ranking.pipeline import RANKED
from curation.ranking.versions import active_ranker
from curation.search.choices import version_choices
from curation.search.ranked import describe
from curation.store.rankers import RankingChoice
from curation.store.relations import Relations
from kb_sources.errors import CurationError
from retrievers.errors import RetrieverError


def _request() -> None:
    st.session_state["eval_request"] = {
        "schema": st.session_state.get("eval_schema"),
        "retrievers": list(st.session_state.get("eval_retrievers") or []),
        "split": st.session_state.get("eval_split", "test"),
    }


def start_form(ctx: AppContext) -> None:
    """Schema, retrievers and split, and the Start button (admins only see it)."""
    schemas = Relations(ctx.ws).evaluable_schemas()
    if not schemas:
        st.info("No relation cites a document of this workspace yet: import the cited "
                "abstracts to evaluate.")
        return
    cols = st.columns([1, 2, 1, 1], vertical_alignment="bottom")
    schema = cols[0].selectbox("Schema", schemas, key="eval_schema")
    choices = retriever_options(ctx, schema)
    chosen = st.session_state.get("eval_retrievers", ["bm25"])  # less another schema's versions
    st.session_state["eval_retrievers"] = [c for c in chosen if c in choices]
    cols[1].multiselect("Retrievers", choices, key="eval_retrievers",
                        help="dense · VERSION / hybrid · VERSION: the schema's trained model "
                             "versions (Models page); ranked: its active learned ranker; "
                             "best: measure them all and make the best the default ranking")
    cols[2].selectbox("Split", EVAL_SPLITS, key="eval_split")
    cols[3].button("Start evaluation", key="eval_start", type="primary", on_click=_request)


def retriever_options(ctx: AppContext, schema: str) -> list[str]:
    """Registered retrievers (plain and entity-reranked), then dense and hybrid over each of the
    schema's candidate and active model versions ("dense · disease_gene-edel@2"), ``ranked``
    (when the schema has an active ranker version that can be used) and ``best``."""
    ranked = [RANKED] if active_ranker(ctx.ws, schema).version is not None else []
    return [*evaluation_choices(), *version_choices(ctx.ws, schema), *ranked, BEST]


def handle_request(ctx: AppContext) -> None:
    """Submit a pending request as the signed-in user (refused for non-admins)."""
    request = st.session_state.get("eval_request")
    st.session_state["eval_request"] = None
    if not request:
        return
    if BEST in (request.get("retrievers") or []):
        run_best(ctx, request)
        return
    try:
        job = start_evaluation(ctx.ws, ctx.user, request.get("schema") or "",
                               request.get("retrievers") or [], request.get("split") or "test")
    except (CurationError, RetrieverError) as exc:
        st.error(md(exc))
        return
    st.session_state["eval_job"] = job.id
    flash("success", f"Evaluation job {job.id:d} started; it runs in the background.")


def run_best(ctx: AppContext, request: dict) -> None:
    """Measure every runnable configuration and record the best as the schema's default (the
    library refuses a non-admin); the outcome shows in :func:`best_view`."""
    if request.get("retrievers") != [BEST]:
        st.error("best compares the configurations itself; choose it alone, without other "
                 "retrievers")
        return
    schema = request.get("schema") or ""
    try:
        with st.spinner(f"Measuring every ranking of {md(schema)} on its test split ..."):
            report, record = choose_default(ctx.ws, schema, user=ctx.user,
                                            split=request.get("split") or "test",
                                            progress=False)
    except (CurationError, RetrieverError) as exc:
        st.error(md(exc))
        return
    st.session_state["eval_best"] = {"schema": schema, "report": report.to_json(),
                                     "record": record.to_json()}


def best_view() -> None:
    """What the last ``best`` run of this session chose, and the scores it compared."""
    shown_best = st.session_state.get("eval_best")
    if not shown_best:
        return
    record = RankingChoice.from_json(shown_best["record"])
    if record is None:
        return
    st.success(f"Default ranking of {md(shown_best['schema'])}: {md(record.best)}, "
               f"{md(describe(record))}.")
    for warning in record.warnings:
        st.warning(md(warning))
    for note in record.notes:
        st.caption(md(note))
    means = metrics_frame(shown_best["report"])
    if not means.empty:
        st.dataframe(means.pivot(index="retriever", columns="metric", values="value").round(3),
                     key="eval_best_table", width="stretch")


def charts(job: Job) -> None:
    """Mean metrics per retriever and the per-query distribution of one metric."""
    import plotly.express as px

    report = job.result
    means = metrics_frame(report)
    if means.empty:
        st.info("This run has no metrics (no query in the split).")
        return
    st.caption(f"{md(report.get('schema'))} · split {md(report.get('split'))} · "
               f"{md(report.get('queries'))} queries")
    for warning in report.get("warnings") or []:
        st.warning(md(str(warning)))
    fig = px.bar(html_frame(means), x="metric", y="value", color="retriever", barmode="group",
                 title="Mean metrics per retriever")
    st.plotly_chart(fig, key="eval_bar", width="stretch")
    st.dataframe(means.pivot(index="retriever", columns="metric", values="value").round(3),
                 key="eval_table", width="stretch")
    metrics = list(dict.fromkeys(means["metric"]))
    metric = st.selectbox("Per-query distribution of", metrics, key="eval_metric",
                          index=metrics.index("ndcg@10") if "ndcg@10" in metrics else 0)
    per_query = per_query_frame(report, metric)
    fig = px.box(html_frame(per_query), x="retriever", y=html_text(metric), points="all",
                 hover_data=["query"], title=f"{html_text(metric)} per query")
    st.plotly_chart(fig, key="eval_box", width="stretch")


def job_view(ctx: AppContext, jobs: list[Job]) -> None:
    by_id = {j.id: j for j in jobs}
    if st.session_state.get("eval_job") not in by_id:
        st.session_state["eval_job"] = jobs[0].id
    # The status is not part of the option labels: the browser keeps a select's labels while its
    # options (the run ids) stay the same, so "queued" stayed on screen after the charts came.
    job_id = st.selectbox(
        "Evaluation run", list(by_id), key="eval_job",
        format_func=lambda i: f"#{i} · {by_id[i].params.get('schema')} · "
                              f"{', '.join(by_id[i].params.get('retrievers', []))} · "
                              f"{by_id[i].created_at}")
    job = by_id[job_id]
    st.caption(f"Run {job.id:d}: {md(job.status.value)} · by {md(job.created_by)} · updated "
               f"{md(job.updated_at)}")
    if not job.finished:
        poll_job(ctx, job.id, "eval")
    elif job.error:
        st.error(f"Run {job.id:d} {md(job.status.value)}: {md(job.error)}")
    else:
        charts(job)


def render(ctx: AppContext) -> None:
    st.subheader("Evaluate")
    if ctx.user.is_admin:
        start_form(ctx)
        training_panel(ctx, Relations(ctx.ws).evaluable_schemas())
    else:
        st.info("Starting an evaluation needs the admin role; past runs are shown below.")
    handle_request(ctx)
    handle_training_request(ctx)
    show_flash()
    best_view()
    jobs = list_jobs(ctx.ws, "evaluate")
    if not jobs:
        st.caption("No evaluation run yet.")
        return
    job_view(ctx, jobs)
    with st.expander(f"All evaluation runs ({len(jobs)})"):
        st.dataframe(job_frame(jobs), hide_index=True, key="eval_jobs", width="stretch")


def main() -> None:
    run_page(render)


if __name__ == "__main__":
    main()
