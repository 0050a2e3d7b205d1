"""Sidebar, every page: what is still being built (a new workspace's rankers and default
rankings, :mod:`curation.training.defaults`), model versions being activated (everyone sees the
progress: "building the index of V: N of M documents") and activations that ended in the last
ten minutes.

Activating a version is a background job (:func:`curation.training.activation.start_activation`):
the old version serves searches until the new one's indexes are complete, so a curator who sees
the bar knows why "dense · active" still ranks with the previous version.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import AppContext, poll_job
from app_pages.safe import md
from curation.jobs.queue import Job, JobStatus, list_jobs
from curation.training.activation import ACTIVATE, unfinished_activation
from curation.training.job_kinds import DEFAULTS_JOB_KIND

#: Seconds an ended activation stays said in the sidebar.
ENDED_SHOWN_S = 600
#: What the sidebar says while a new workspace's rankers and defaults are built.
BUILDING = ("Still being built: each schema's learned ranker and its measured default "
            "ranking. Until it is done, schemas rank by bm25 + entity rerank.")


def activation_sidebar(ctx: AppContext) -> None:
    """The sidebar block (see the module docstring); app.py calls it on every page."""
    building = [j for j in list_jobs(ctx.ws, DEFAULTS_JOB_KIND, limit=3) if not j.finished]
    jobs = list_jobs(ctx.ws, ACTIVATE, limit=10)
    with st.sidebar:
        for job in building:
            st.caption(BUILDING)
            poll_job(ctx, job.id, "defaults_sidebar")
        for job in jobs:
            if not job.finished:
                poll_job(ctx, job.id, "activation_sidebar")
            elif job.idle_s <= ENDED_SHOWN_S:
                st.caption(md(ended_text(job)))


def ended_text(job: Job) -> str:
    """How an activation job ended, in one line of plain text (escape it to render it)."""
    version = str(job.params.get("version", ""))
    schema = str(job.params.get("schema", ""))
    if job.status is JobStatus.DONE:
        result = job.result
        rate = result.get("docs_per_s")
        took = (f"index of {int(result.get('documents', 0)):,} documents built in "
                f"{float(result.get('seconds', 0.0)):.0f} s"
                + (f", {float(rate):.1f} documents/s" if rate else ", from cached vectors"))
        return f"{version} is now the active {schema} model (job {job.id:d}: {took})."
    reason = job.error or "no reason recorded"
    return (f"Activating {version} (job {job.id:d}) {job.status.value}: {reason}. The "
            f"previous {schema} version stays active.")


def running_activation(ctx: AppContext, schema: str) -> Job | None:
    """The schema's unfinished activation job, shown with progress (the Models page)."""
    job = unfinished_activation(ctx.ws, schema)
    if job is not None:
        poll_job(ctx, job.id, "activation_page")
    return job
