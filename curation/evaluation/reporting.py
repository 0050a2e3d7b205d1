"""Tables behind the Review and Evaluate pages: the label log, exports, evaluation frames.

Pure functions over the workspace and the evaluation report JSON
(:meth:`curation.evaluation.harness.EvaluationReport.to_json`), so the pages only draw what
these return.
The pages read their pick lists (users, model versions, evaluable schemas) from the store's
repositories directly: :meth:`~curation.store.labels.Labels.users`,
:meth:`~curation.store.labels.Labels.model_versions` and
:meth:`~curation.store.relations.Relations.evaluable_schemas`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from curation.access.label_export import export_labels_with_final_grades
from curation.access.users import User
from curation.evaluation.harness import SPLITS
from curation.evaluation.runner import check_retriever_names
from curation.jobs.queue import Job, submit_job
from curation.search.rerank import RERANK_SUFFIX
from curation.store.labels import Label, Labels
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from retrievers.registry import retriever_names

logger = logging.getLogger(__name__)

EVAL_SPLITS: tuple[str, ...] = (*SPLITS[::-1], "all")  # test first
LABEL_COLUMNS = ("id", "created_at", "user", "grade", "doc_id", "query_text", "note",
                 "model_version", "schema", "superseded_by")


# -- label log ----------------------------------------------------------------------------------
def labels_frame(labels: Sequence[Label]) -> pd.DataFrame:
    """The label log as a table (newest first, as given)."""
    rows = [{c: lab.to_json()[c] for c in LABEL_COLUMNS} for lab in labels]
    return pd.DataFrame.from_records(rows, columns=list(LABEL_COLUMNS))


def label_history(ws: Workspace, label: Label) -> list[Label]:
    """Every version of one user's label on one item, newest first (the relabel trail)."""
    return [lab for lab in Labels(ws).find(user=label.user, schema=label.schema,
                                           query_key=label.query_key, include_superseded=True)
            if lab.doc_id == label.doc_id]


def export_labels_bytes(ws: Workspace, labels: Sequence[Label], fmt: str,
                        viewer: User | None = None) -> bytes:
    """Write ``labels`` with their items' final grades to ``WS/exports/labels-<time>.<fmt>``
    (csv or jsonl; :func:`curation.access.label_export.export_labels_with_final_grades`, blind
    mode applied for ``viewer``); return the bytes."""
    if fmt not in ("csv", "jsonl"):
        raise CurationError(f"Unknown export format {fmt!r}. Available options: csv, jsonl")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    path = export_labels_with_final_grades(ws, labels,
                                           ws.root / "exports" / f"labels-{stamp}.{fmt}",
                                           viewer=viewer)
    return path.read_bytes()


# -- evaluation ----------------------------------------------------------------------------------
def evaluation_choices() -> list[str]:
    """Retrievers an evaluation can compare: each registered one, plain and entity-reranked."""
    names = retriever_names()
    return names + [n + RERANK_SUFFIX for n in names]


def start_evaluation(ws: Workspace, user: User | None, schema: str, retrievers: Sequence[str],
                     split: str = "test") -> Job:
    """Submit an evaluation job; the role check happens in :func:`curation.jobs.queue.submit_job`.

    A run that cannot work is refused before it is queued: a split without queries (a small KB
    such as the PTM sample puts all its few query entities elsewhere) is named with the splits
    that do have queries.

    Raises:
        PermissionDenied: ``user`` is not an admin.
        CurationError: No retriever, an unknown retriever or split, or a split without queries.
    """
    from curation.access.users import require_admin
    from curation.evaluation.harness import build_task

    require_admin(user, "Starting a job of kind 'evaluate'")  # the words of submit_job
    if not retrievers:
        raise CurationError("Choose at least one retriever to evaluate")
    check_retriever_names(retrievers)
    if split not in EVAL_SPLITS:
        raise CurationError(f"Unknown split {split!r}. Available options: "
                            f"{', '.join(EVAL_SPLITS)}")
    task = build_task(ws, schema)
    if not task.split(split):
        counts = {name: len(task.split(name)) for name in EVAL_SPLITS}
        have = [f"{name} ({n})" for name, n in counts.items() if n]
        raise CurationError(
            f"The {split} split of {task.schema} has no query, so this run would measure "
            "nothing. " + (f"Choose another split in the Split menu: {', '.join(have)} "
                           "have queries." if have else
                           "No relation of this schema cites a document of the workspace yet."))
    return submit_job(ws, "evaluate", {"schema": schema, "retrievers": list(retrievers),
                                       "split": split}, user=user)


def metrics_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """Mean metrics in long form: retriever, metric, value (NaN metrics left out)."""
    rows = [{"retriever": name, "metric": metric, "value": float(value)}
            for name, values in report.get("retrievers", {}).items()
            for metric, value in values.items()
            if metric != "queries" and isinstance(value, int | float) and not math.isnan(value)]
    return pd.DataFrame.from_records(rows, columns=["retriever", "metric", "value"])


def per_query_frame(report: Mapping[str, Any], metric: str) -> pd.DataFrame:
    """One row per (retriever, query) with the value of ``metric``."""
    rows = [{"retriever": name, "query": qid, metric: float(values[metric])}
            for name, per_query in report.get("per_query", {}).items()
            for qid, values in per_query.items() if metric in values]
    return pd.DataFrame.from_records(rows, columns=["retriever", "query", metric])


def job_frame(jobs: Sequence[Job]) -> pd.DataFrame:
    """Jobs as a table: id, status, progress, message, who and when, parameters."""
    rows = [{"id": j.id, "status": j.status.value, "progress": round(j.progress, 3),
             "message": j.message, "created_by": j.created_by, "created_at": j.created_at,
             "params": ", ".join(f"{k}={v}" for k, v in sorted(j.params.items()))}
            for j in jobs]
    return pd.DataFrame.from_records(rows, columns=["id", "status", "progress", "message",
                                                    "created_by", "created_at", "params"])
