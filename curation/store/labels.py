"""Relevance labels: record, relabel (audited), undo, query, export, agreement.

Every label stores who gave it, when, for which partial relation and query, which document, the
grade, an optional note, and which model version (and training-set size) ranked the document.
A relabel never overwrites: the new row supersedes the old one, and the audit log keeps both.
Undo removes the user's latest label (its full row goes to the audit log first) and re-activates
the label it had superseded, so no label is ever lost.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import CurationError, parse_choice


class Grade(StrEnum):
    """How well a document completes the partial relation."""

    COMPLETE = "complete"  # names the query entities and an answer
    PARTIAL = "partial"  # some of them
    IRRELEVANT = "irrelevant"
    SKIP = "skip"  # not judged

    @classmethod
    def parse(cls, value: str | Grade) -> Grade:
        return parse_choice(cls, value, "grade")


@dataclass(frozen=True)
class Label:
    """One stored relevance label."""

    id: int
    created_at: str
    user: str
    schema: str
    query_key: str
    query_text: str
    doc_id: str
    grade: Grade
    note: str
    model_version: str
    train_size: int | None
    superseded_by: int | None = None

    @classmethod
    def from_row(cls, row: Any) -> Label:
        data = dict(row)
        data["grade"] = Grade(data["grade"])
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["grade"] = self.grade.value
        return data


def record_label(
    ws: Workspace,
    *,
    user: str,
    schema: str,
    query_key: str,
    query_text: str,
    doc_id: str,
    grade: str | Grade,
    note: str = "",
    model_version: str = "",
    train_size: int | None = None,
) -> Label:
    """Store a label (one transaction). Labelling the same item again supersedes the old label."""
    grade = Grade.parse(grade)
    if not user.strip():
        raise CurationError("A label needs a user; sign in first")
    with ws.transaction():
        old = _active(ws, user, schema, query_key, doc_id)
        cur = ws.conn.execute(
            "INSERT INTO labels(created_at, user, schema, query_key, query_text, doc_id, grade, "
            "note, model_version, train_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (utcnow(), user, schema, query_key, query_text, doc_id, grade.value, note.strip(),
             model_version, train_size))
        new_id = int(cur.lastrowid)
        if old is not None:
            ws.conn.execute("UPDATE labels SET superseded_by = ? WHERE id = ?", (new_id, old.id))
            ws.audit(user, "relabel", "label", str(new_id), before=old.to_json(),
                     after={"grade": grade.value, "note": note.strip()})
        else:
            ws.audit(user, "label", "label", str(new_id),
                     after={"doc_id": doc_id, "grade": grade.value, "query_key": query_key})
    return get_label(ws, new_id)


def _active(ws: Workspace, user: str, schema: str, query_key: str, doc_id: str) -> Label | None:
    row = ws.conn.execute(
        "SELECT * FROM labels WHERE user = ? AND schema = ? AND query_key = ? AND doc_id = ? "
        "AND superseded_by IS NULL ORDER BY id DESC LIMIT 1",
        (user, schema, query_key, doc_id)).fetchone()
    return Label.from_row(row) if row else None


def get_label(ws: Workspace, label_id: int) -> Label:
    row = ws.conn.execute("SELECT * FROM labels WHERE id = ?", (label_id,)).fetchone()
    if row is None:
        raise CurationError(f"No label with id {label_id}")
    return Label.from_row(row)


def undo_last_label(ws: Workspace, user: str) -> Label | None:
    """Remove the user's most recent label; returns it, or None when there is nothing to undo."""
    with ws.transaction():
        row = ws.conn.execute(
            "SELECT * FROM labels WHERE user = ? AND superseded_by IS NULL ORDER BY id DESC "
            "LIMIT 1", (user,)).fetchone()
        if row is None:
            return None
        label = Label.from_row(row)
        ws.conn.execute("UPDATE labels SET superseded_by = NULL WHERE superseded_by = ?",
                        (label.id,))
        ws.conn.execute("DELETE FROM labels WHERE id = ?", (label.id,))
        ws.audit(user, "undo", "label", str(label.id), before=label.to_json())
    return label


def list_labels(
    ws: Workspace,
    *,
    user: str | None = None,
    schema: str | None = None,
    query_key: str | None = None,
    grade: str | None = None,
    model_version: str | None = None,
    since: str | None = None,
    include_superseded: bool = False,
) -> list[Label]:
    """Labels matching every given filter, newest first (``since``: ISO date or timestamp)."""
    sql = "SELECT * FROM labels WHERE 1 = 1"
    params: list[Any] = []
    for column, value in (("user", user), ("schema", schema), ("query_key", query_key),
                          ("grade", Grade.parse(grade).value if grade else None),
                          ("model_version", model_version)):
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    if since:
        sql += " AND created_at >= ?"
        params.append(since)
    if not include_superseded:
        sql += " AND superseded_by IS NULL"
    return [Label.from_row(r) for r in ws.conn.execute(sql + " ORDER BY id DESC", params)]


def labelled_grades(ws: Workspace, schema: str, query_key: str, user: str) -> dict[str, Grade]:
    """doc_id -> current grade of this user's labels for one partial relation."""
    return {lab.doc_id: lab.grade
            for lab in list_labels(ws, user=user, schema=schema, query_key=query_key)}


@dataclass(frozen=True)
class Agreement:
    """Agreement of two annotators on the items both labelled (skips excluded)."""

    user_a: str
    user_b: str
    shared: int
    observed: float
    kappa: float


def agreement(ws: Workspace, user_a: str, user_b: str) -> Agreement:
    """Cohen's kappa between two annotators over their shared (query, document) items."""
    from sklearn.metrics import cohen_kappa_score

    def grades(user: str) -> dict[tuple[str, str, str], str]:
        return {(lab.schema, lab.query_key, lab.doc_id): lab.grade.value
                for lab in list_labels(ws, user=user) if lab.grade is not Grade.SKIP}

    a, b = grades(user_a), grades(user_b)
    shared = sorted(set(a) & set(b))
    if not shared:
        return Agreement(user_a, user_b, 0, float("nan"), float("nan"))
    ya, yb = [a[k] for k in shared], [b[k] for k in shared]
    observed = sum(x == y for x, y in zip(ya, yb, strict=True)) / len(shared)
    kappa = 1.0 if len(set(ya) | set(yb)) == 1 else float(cohen_kappa_score(ya, yb))
    return Agreement(user_a, user_b, len(shared), observed, kappa)


_EXPORT_FIELDS: Sequence[str] = ("id", "created_at", "user", "schema", "query_key", "query_text",
                                 "doc_id", "grade", "note", "model_version", "train_size")


def export_labels(labels: Sequence[Label], path: str | Path) -> Path:
    """Write labels as CSV or JSONL (by the file suffix)."""
    path = Path(path)
    rows = [{k: lab.to_json()[k] for k in _EXPORT_FIELDS} for lab in labels]
    if path.suffix.lower() == ".jsonl":
        with open(path, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif path.suffix.lower() in (".csv", ".tsv"):
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(_EXPORT_FIELDS), delimiter=delimiter)
            writer.writeheader()
            writer.writerows(rows)
    else:
        raise CurationError(f"Cannot export labels to {path.name}: use a .csv, .tsv or .jsonl "
                            "file name")
    return path
