"""Issue 35: ``kbcurate evaluate --split test`` on a workspace with 2 test queries printed
NDCG@10 1.000 and no warning; training rounds warned below 20 test queries, evaluate must too."""

from __future__ import annotations

import json

from loop_fixtures import make_loop_workspace

from curation.cli.main import main
from curation.evaluation.harness import (
    MIN_SCORED_QUERIES,
    EvaluationReport,
    small_sample_warnings,
)


def test_small_sample_warnings():
    assert small_sample_warnings("test", 25, {"bm25": 25}) == []
    (one,) = small_sample_warnings("test", 2, {"bm25": 2, "ranked": 2})
    assert one.startswith("Scored on only 2 test queries (< 20)") and "up to 0.50" in one
    (fewest,) = small_sample_warnings("dev", 30, {"bm25": 30, "dense": 7})
    assert fewest.startswith("Scored on only 7 dev queries")
    (none,) = small_sample_warnings("test", 0, {})
    assert none.startswith("No test query could be scored")
    assert MIN_SCORED_QUERIES == 20


def test_cli_evaluate_warns_below_20_queries_and_writes_the_warning(tmp_workspace, tmp_path,
                                                                    capsys):
    ws = make_loop_workspace(tmp_workspace)
    out = tmp_path / "report.json"
    code = main(["evaluate", "--schema", "disease_gene", "--retriever", "bm25", "--split",
                 "test", "--quiet", "-w", str(ws.root), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    report = json.loads(out.read_text())
    n = report["retrievers"]["bm25"]["queries"]
    assert 0 < n < 20
    assert report["warnings"] == [
        f"Scored on only {n} test queries (< 20): the means are too noisy to choose between "
        f"rankings (one query moves NDCG@10 by up to {1 / n:.2f}); import more of the cited "
        "abstracts, or evaluate on a larger split (--split all)"]
    assert f"warning: Scored on only {n} test queries (< 20)" in captured.err
    assert "warning" not in captured.out  # the table on stdout is unchanged (golden files)


def test_a_report_with_enough_queries_has_no_warning():
    per = {"bm25": {"ndcg@10": 0.5, "queries": 40}}
    report = EvaluationReport("PO", "test", 13, 40, per, {"bm25": {}})
    assert report.warnings == [] and report.to_json()["warnings"] == []
