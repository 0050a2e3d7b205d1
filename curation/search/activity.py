"""Labelling activity for the Worklist page: labels per day and grade, progress per user.

Only current labels count (a relabel's earlier versions and labels still waiting in the outbox are
left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from curation.store.labels import Grade, Labels
from curation.store.workspace import Workspace
from kb_sources.schema import Schema

if TYPE_CHECKING:
    from curation.search.worklist import WorklistRow


def _current_labels(ws: Workspace, schema: str | None, user: str | None) -> pd.DataFrame:
    rows = Labels(ws).current_rows(schema, user)
    return pd.DataFrame(rows, columns=["user", "query_key", "doc_id", "grade", "created_at"])


def label_activity(ws: Workspace, schema: Schema | str | None = None,
                   user: str | None = None) -> pd.DataFrame:
    """Current labels per day and grade (superseded versions and pending labels left out).

    Args:
        ws: The workspace.
        schema: Only labels of this schema (all when None).
        user: Only this user's labels (everyone's when None).

    Returns:
        Columns ``day`` (UTC calendar day, datetime64), ``grade`` (the grade's value) and
        ``labels`` (count); one row per day and grade that has labels, by day then grade order
        (complete, partial, irrelevant, skip).
    """
    name = schema.name if isinstance(schema, Schema) else schema
    frame = _current_labels(ws, name, user)
    if frame.empty:
        return pd.DataFrame({"day": pd.Series(dtype="datetime64[ns]"),
                             "grade": pd.Series(dtype=object),
                             "labels": pd.Series(dtype="int64")})
    frame["day"] = pd.to_datetime(frame["created_at"].str.slice(0, 10))
    out = frame.groupby(["day", "grade"]).size().rename("labels").reset_index()
    order = {g.value: i for i, g in enumerate(Grade)}
    out = out.sort_values(["day", "grade"], key=lambda s: s.map(order) if s.name == "grade"
                          else s, kind="stable")
    out["grade"] = out["grade"].astype(object)
    return out.reset_index(drop=True)


def progress_by_user(ws: Workspace, schema: Schema | str,
                     rows: Sequence[WorklistRow] = ()) -> pd.DataFrame:
    """Each user's current labels on a schema: total, per grade, relations touched, last day;
    with worklist ``rows``, also how many of their top-k abstracts the user has labelled.

    Returns:
        One row per user who labelled, most labels first (then by name): ``user``, ``labels``,
        one column per grade, ``relations``, ``last label`` (UTC day, text) and, with rows,
        ``worklist labelled``, ``worklist abstracts`` and ``worklist progress`` (0..1).
    """
    name = schema.name if isinstance(schema, Schema) else schema
    frame = _current_labels(ws, name, None)
    grades = [g.value for g in Grade]
    columns = ["user", "labels", *grades, "relations", "last label"]
    if rows:
        columns += ["worklist labelled", "worklist abstracts", "worklist progress"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    items = {(r.query_key, d) for r in rows for d in r.doc_ids}
    out = []
    for user, mine in frame.groupby("user", sort=True):
        by_grade = mine["grade"].value_counts()
        entry: dict[str, Any] = {"user": user, "labels": len(mine),
                                 **{g: int(by_grade.get(g, 0)) for g in grades},
                                 "relations": mine["query_key"].nunique(),
                                 "last label": str(mine["created_at"].max())[:10]}
        if rows:
            done = len(items & set(zip(mine["query_key"], mine["doc_id"], strict=True)))
            entry.update({"worklist labelled": done, "worklist abstracts": len(items),
                          "worklist progress": done / len(items) if items else 1.0})
        out.append(entry)
    result = pd.DataFrame(out, columns=columns)
    return result.sort_values(["labels", "user"], ascending=[False, True],
                              kind="stable").reset_index(drop=True)
