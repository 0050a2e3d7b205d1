"""Each schema's learned ranker and measured default ranking, for a workspace that has none yet.

:func:`rank_and_measure` trains each evaluable schema's ranker as the system (a minute or two
per schema on 2 CPU cores; the gate promotes it when it beats bm25 + rerank on the held-out
queries) and records the measured best as the schema's default (``kbcurate evaluate
--retriever best``, with its warning below 20 test queries), so a newcomer sees ``ranked`` on
disease_gene rather than bm25 + rerank. A schema that already has a recorded default is left as
it is.

``kbcurate demo`` runs it in the background job :data:`DEFAULTS_JOB_KIND`
(:func:`start_defaults_job`, :func:`run_defaults_job`) after the imports and serves the app at
once: until the job ends the schemas rank by bm25 + rerank and the sidebar says what is still
being built (:mod:`app_pages.activation_panel`). ``kbcurate demo --no-serve`` runs it before
it returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from curation.evaluation.best import choose_default
from curation.evaluation.harness import build_task
from curation.jobs.kinds import SYSTEM_USER
from curation.jobs.queue import Job, submit_job
from curation.search.ranked import describe
from curation.store.rankers import Rankers
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from curation.training.job_kinds import DEFAULTS_JOB_KIND
from curation.training.ranker import train_ranker
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]


def schemas_to_measure(ws: Workspace) -> list[str]:
    """The evaluable schemas that have no recorded default ranking yet and a test query to
    measure one on (a schema without, such as the PTM sample, could never be measured: each
    demo start would retrain its ranker for nothing)."""
    return [s for s in Relations(ws).evaluable_schemas()
            if Rankers(ws).default_ranking(s) is None and build_task(ws, s).split("test")]


def rank_and_measure(ws: Workspace, *, progress: bool = True,
                     report: Report | None = None) -> list[str]:
    """Train each schema's ranker as the system and record the measured best as its default;
    one line per schema. Schemas with a recorded default are left alone; one that cannot be
    trained or measured (no train or test query) says why and keeps bm25 + rerank.

    Args:
        ws: The workspace.
        progress: Progress bars (the CLI).
        report: ``report(fraction, message)`` before each schema (a job's progress).
    """
    todo = schemas_to_measure(ws)
    lines = []
    for done, schema in enumerate(todo):
        if report is not None:
            report(done / len(todo), f"{schema}: training its ranker, then measuring the "
                                     f"default ({done + 1} of {len(todo)})")
        lines.append(_rank_schema(ws, schema, progress))
        logger.info("%s", lines[-1])
    return lines


def _rank_schema(ws: Workspace, schema: str, progress: bool) -> str:
    started = time.perf_counter()
    try:
        round_ = train_ranker(ws, schema, user=SYSTEM_USER, progress=progress,
                              trigger="kbcurate demo")
        ranker = f"{round_.version.id} {'promoted' if round_.activated else 'kept as a candidate'}"
    except CurationError as exc:
        logger.info("no ranker for %s (%s)", schema, exc)
        ranker = f"no ranker ({exc})"
    try:
        _, record = choose_default(ws, schema, user=SYSTEM_USER, progress=False)
        default = f"default {record.best}, {describe(record)}"
    except CurationError as exc:
        default = f"default bm25+rerank (not measured: {exc})"
    return f"{schema}: {ranker}; {default} ({time.perf_counter() - started:.0f} s)"


def run_defaults_job(ctx: Any) -> dict[str, Any]:
    """Background job entry point: :func:`rank_and_measure`, its progress in the job row."""
    lines = rank_and_measure(ctx.ws, progress=False, report=ctx.progress)
    ctx.progress(1.0, f"{len(lines)} schema(s) ranked and measured")
    return {"schemas": lines}


def start_defaults_job(ws: Workspace, *, start: bool = True) -> Job | None:
    """Queue :data:`DEFAULTS_JOB_KIND` as the system when a schema lacks a default (None when
    none does); ``start``: hand it to the job queue (tests run it themselves)."""
    if not schemas_to_measure(ws):
        return None
    return submit_job(ws, DEFAULTS_JOB_KIND, {}, user=SYSTEM_USER, start=start)
