"""Labels: record, relabel with audit, undo, filters, export, Cohen's kappa."""

from __future__ import annotations

import csv
import json
import math

import pytest

from curation.store.labels import (
    Grade,
    agreement,
    export_labels,
    labelled_grades,
    list_labels,
    record_label,
    undo_last_label,
)
from kb_sources.errors import CurationError

Q = {"schema": "PO", "query_key": "gene=gene:673|variant=variant:v600e",
     "query_text": "Treatment for gene BRAF and variant V600E?"}


def label(ws, user, doc, grade, **kw):
    return record_label(ws, user=user, doc_id=doc, grade=grade, **{**Q, **kw})


def test_label_row_has_user_and_model_version(tmp_workspace):
    lab = label(tmp_workspace, "ann", "21639808", "complete", model_version="minilm@1",
                train_size=0, note="vemurafenib response")
    rows = tmp_workspace.conn.execute("SELECT user, doc_id, grade, model_version, train_size, "
                                      "note FROM labels").fetchall()
    assert [tuple(r) for r in rows] == [("ann", "21639808", "complete", "minilm@1", 0,
                                         "vemurafenib response")]
    assert lab.grade is Grade.COMPLETE and lab.id == 1


def test_relabel_supersedes_and_is_audited(tmp_workspace):
    first = label(tmp_workspace, "ann", "1", "partial")
    second = label(tmp_workspace, "ann", "1", "complete", note="names the drug")
    assert [lab.grade for lab in list_labels(tmp_workspace)] == [Grade.COMPLETE]
    all_rows = list_labels(tmp_workspace, include_superseded=True)
    assert [(lab.id, lab.superseded_by) for lab in all_rows] == [(second.id, None),
                                                                 (first.id, second.id)]
    (entry,) = tmp_workspace.audit_log("label")[:1]
    assert entry["action"] == "relabel" and json.loads(entry["before"])["grade"] == "partial"


def test_undo_removes_last_and_restores_previous(tmp_workspace):
    label(tmp_workspace, "ann", "1", "partial")
    label(tmp_workspace, "ann", "1", "irrelevant")
    label(tmp_workspace, "other", "2", "complete")
    undone = undo_last_label(tmp_workspace, "ann")
    assert undone.grade is Grade.IRRELEVANT
    assert labelled_grades(tmp_workspace, "PO", Q["query_key"], "ann") == {"1": Grade.PARTIAL}
    assert undo_last_label(tmp_workspace, "ann").grade is Grade.PARTIAL
    assert undo_last_label(tmp_workspace, "ann") is None
    assert [lab.user for lab in list_labels(tmp_workspace)] == ["other"]
    undos = [e for e in tmp_workspace.audit_log("label") if e["action"] == "undo"]
    assert len(undos) == 2 and json.loads(undos[0]["before"])["grade"] == "partial"


def test_bad_grade_and_missing_user(tmp_workspace):
    with pytest.raises(CurationError, match="Unknown grade 'maybe'. Available options: complete"):
        label(tmp_workspace, "ann", "1", "maybe")
    with pytest.raises(CurationError, match="sign in"):
        label(tmp_workspace, " ", "1", "skip")
    assert list_labels(tmp_workspace) == []


def test_filters(tmp_workspace):
    label(tmp_workspace, "a", "1", "complete", model_version="m1")
    label(tmp_workspace, "b", "2", "irrelevant", model_version="m2")
    assert [lab.doc_id for lab in list_labels(tmp_workspace, user="a")] == ["1"]
    assert [lab.doc_id for lab in list_labels(tmp_workspace, grade="IRRELEVANT")] == ["2"]
    assert [lab.doc_id for lab in list_labels(tmp_workspace, model_version="m1")] == ["1"]
    assert list_labels(tmp_workspace, since="2999-01-01") == []


def test_export_csv_and_jsonl(tmp_workspace, tmp_path):
    label(tmp_workspace, "a", "1", "complete", note='has "quotes", commas')
    labels = list_labels(tmp_workspace)
    with open(export_labels(labels, tmp_path / "l.csv"), encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["note"] == 'has "quotes", commas' and row["grade"] == "complete"
    lines = (export_labels(labels, tmp_path / "l.jsonl")).read_text().splitlines()
    assert json.loads(lines[0])["doc_id"] == "1"
    with pytest.raises(CurationError, match="use a .csv, .tsv or .jsonl"):
        export_labels(labels, tmp_path / "l.xlsx")


def test_cohen_kappa_on_shared_items(tmp_workspace):
    # a and b agree on 3 of 4 shared items; item 5 only a labelled; skips are ignored
    for doc, ga, gb in [("1", "complete", "complete"), ("2", "irrelevant", "irrelevant"),
                        ("3", "partial", "irrelevant"), ("4", "complete", "complete")]:
        label(tmp_workspace, "a", doc, ga)
        label(tmp_workspace, "b", doc, gb)
    label(tmp_workspace, "a", "5", "complete")
    label(tmp_workspace, "a", "6", "skip")
    label(tmp_workspace, "b", "6", "skip")
    result = agreement(tmp_workspace, "a", "b")
    assert result.shared == 4 and result.observed == 0.75
    # p_o = .75; p_e = (2/4*2/4) + (1/4*2/4) + (1/4*0) = .375 -> kappa = .375/.625 = .6
    assert result.kappa == pytest.approx(0.6)
    assert math.isnan(agreement(tmp_workspace, "a", "nobody").kappa)
