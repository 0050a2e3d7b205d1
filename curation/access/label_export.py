"""Label exports with each item's final grade (the CLI's ``labels export`` and the Review
page's download buttons write the same files), the relation in words and the abstract's title,
so that a spreadsheet reads without the workspace.

The columns are those of :func:`curation.store.label_files.export_labels` (listed in
:data:`curation.store.label_files.EXPORT_COLUMNS_HELP`); the final-grade ones come from
:func:`curation.access.adjudication.final_grades`: a curator's adjudicated grade (with who, when
and why), else the grade every current non-skip label of the item gives, else empty.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from curation.access.adjudication import FinalGrade, Item, final_grades, relation_texts
from curation.access.users import User
from curation.store.documents import Documents
from curation.store.label_files import export_labels
from curation.store.labels import Label
from curation.store.workspace import Workspace

__all__ = ["export_labels_with_final_grades", "final_columns"]

logger = logging.getLogger(__name__)


def final_columns(final: FinalGrade) -> dict[str, Any]:
    """The export's final-grade columns (:data:`curation.store.label_files.FINAL_FIELDS`) of one
    item ("" for the adjudication columns of a unanimous grade)."""
    adj = final.adjudication
    return {"final_grade": final.grade.value, "final_source": final.source,
            "adjudicated_by": adj.user if adj else "",
            "adjudicated_at": adj.created_at if adj else "",
            "adjudication_reason": adj.reason if adj else ""}


def export_labels_with_final_grades(ws: Workspace, labels: Sequence[Label], path: str | Path, *,
                                    viewer: User | None = None) -> Path:
    """Write ``labels`` (CSV, TSV or JSONL, by the suffix) with their items' final grades.

    Args:
        ws: The workspace.
        labels: The labels to write, one row each.
        path: The output file.
        viewer: Who downloads (the app's signed-in user): in blind mode an annotator gets the
            final grade only of items they graded themselves, as the Review page shows them.
            None (the CLI, run by whoever holds the workspace folder) gets every final grade.

    Raises:
        CurationError: A suffix other than .csv, .tsv or .jsonl.
    """
    wanted = {(lab.schema, lab.query_key, lab.doc_id) for lab in labels}
    schemas = {item[0] for item in wanted}
    only = schemas.pop() if len(schemas) == 1 else None  # one schema: read only its items
    finals: dict[Item, FinalGrade] = final_grades(ws, only, viewer=viewer)
    columns = {item: final_columns(final) for item, final in finals.items() if item in wanted}
    relations = relation_texts(ws, {(lab.schema, lab.query_key) for lab in labels})
    titles = Documents(ws).titles({lab.doc_id for lab in labels})
    out = export_labels(labels, path, finals=columns, relations=relations, titles=titles)
    logger.info("%d labels exported to %s (%d items with a final grade)", len(labels), out,
                len(columns))
    return out
