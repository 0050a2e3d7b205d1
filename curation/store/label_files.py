"""Labels written to a file: CSV, TSV or JSONL, with the item's final-grade columns.

The labels come from :meth:`curation.store.labels.Labels.find`; the final grades from
:func:`curation.access.label_export.export_labels_with_final_grades`, which calls
:func:`export_labels` here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from curation.store.label_types import Label
from kb_sources.errors import CurationError
from kb_sources.spreadsheet import SafeDictWriter

#: One column per field of a label, in this order.
EXPORT_FIELDS: Sequence[str] = ("id", "created_at", "user", "schema", "query_key", "relation",
                                "query_text", "doc_id", "title", "grade", "note",
                                "model_version", "train_size", "order_labels")
#: The columns that describe the item in words (not fields of the label itself).
DESCRIBED_FIELDS: Sequence[str] = ("relation", "title")
#: The item's final grade beside each label (empty where the item has none).
FINAL_FIELDS: Sequence[str] = ("final_grade", "final_source", "adjudicated_by", "adjudicated_at",
                               "adjudication_reason")
#: What each exported column holds (the ``kbcurate labels export`` help prints it).
EXPORT_COLUMNS_HELP = (
    "Exported columns (CSV/TSV header, JSONL keys), one row per label: id, created_at (UTC), "
    "user, schema, query_key, relation (the relation's slots and entities in words: "
    "'gene: BRAF · variant: V600E'), query_text (the question it was searched with), doc_id, "
    "title (the abstract's title), grade (complete / partial / irrelevant / "
    "skip), note, model_version and train_size (what ranked the abstract when it was "
    "labelled), order_labels (empty: shown as ranked; N: shown in the order learned within "
    "the query from N labels of the relation); then the item's (schema, query_key, doc_id) "
    "final grade, the same on every label of the item: final_grade (a curator's adjudicated "
    "grade, else the grade every current non-skip label gives), final_source (adjudicated "
    "or unanimous), adjudicated_by, adjudicated_at (UTC) and adjudication_reason (empty "
    "unless adjudicated). The final "
    "columns are empty (JSONL: null) for an open disagreement or an item with only skips.")


def export_labels(labels: Sequence[Label], path: str | Path, *,
                  finals: Mapping[tuple[str, str, str], Mapping[str, Any]] | None = None,
                  relations: Mapping[tuple[str, str], str] | None = None,
                  titles: Mapping[str, str] | None = None) -> Path:
    """Write labels as CSV, TSV or JSONL (by the file suffix), with the final-grade columns.

    Args:
        labels: The labels, one row each (the columns: :data:`EXPORT_COLUMNS_HELP`).
        path: The file to write.
        finals: (schema, query_key, doc_id) -> the item's :data:`FINAL_FIELDS` values
            (:func:`curation.access.label_export.export_labels_with_final_grades` fills it);
            items not in it, or every item when None, get empty final columns.
        relations: (schema, query_key) -> the relation in words (the ``relation`` column;
            empty where missing).
        titles: doc_id -> the document's title (the ``title`` column; empty where missing).

    Raises:
        CurationError: A suffix other than .csv, .tsv or .jsonl.
    """
    path = Path(path)
    finals, relations, titles = finals or {}, relations or {}, titles or {}
    fields = [*EXPORT_FIELDS, *FINAL_FIELDS]
    rows = []
    for lab in labels:
        data, final = lab.to_json(), finals.get((lab.schema, lab.query_key, lab.doc_id), {})
        data |= {"relation": relations.get((lab.schema, lab.query_key), ""),
                 "title": titles.get(lab.doc_id, "")}
        rows.append({**{k: data[k] for k in EXPORT_FIELDS},
                     **{k: final.get(k) for k in FINAL_FIELDS}})
    if path.suffix.lower() == ".jsonl":
        with open(path, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif path.suffix.lower() in (".csv", ".tsv"):
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = SafeDictWriter(fh, fieldnames=fields, delimiter=delimiter)
            writer.writeheader()
            writer.writerows(rows)
    else:
        raise CurationError(f"Cannot export labels to {path.name}: use a .csv, .tsv or .jsonl "
                            "file name")
    return path
