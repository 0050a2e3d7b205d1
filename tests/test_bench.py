"""kbcurate bench on a small workspace with the tiny model (the figures themselves are not
asserted: speed is measured by running the command, not by tests)."""

from __future__ import annotations

import json

import pytest

from curation.evaluation import backend_bench
from curation.evaluation.backend_bench import BackendBench, BackendRow, run_backend_bench
from curation.evaluation.bench import bench_encoding, run_bench
from curation.store.importer import import_file


def test_bench_prints_ratios_and_latency(tmp_workspace, fixtures_dir, tiny_model_path):
    import_file(tmp_workspace, "kb", "civic", fixtures_dir / "civic_v1_sample.tsv",
                progress=False)
    import_file(tmp_workspace, "kb", "pubtator", fixtures_dir / "pubtator_sample.txt",
                progress=False)
    result = bench_encoding(["BRAF V600E melanoma vemurafenib"] * 8 + ["short"] * 8,
                            model=str(tiny_model_path), batch_size=4)
    assert result.documents == 16 and result.ours_s > 0 and result.raw_one_call_s > 0
    assert result.ratio_vs_raw == result.raw_one_call_s / result.ours_s
    lines = run_bench(tmp_workspace, retrievers=["bm25"], docs=0, queries=3, schema="PO")
    assert lines[0].startswith("query latency, template -> search -> top-10 highlighted (PO")
    assert lines[1].strip().startswith("bm25") and "(3 queries)" in lines[1]


# -- bench --backends --------------------------------------------------------------------------
@pytest.fixture
def eval_ws(tmp_workspace, fixtures_dir):
    import_file(tmp_workspace, "kb", "pubtator", fixtures_dir / "pubtator_sample.txt",
                progress=False)
    import_file(tmp_workspace, "docs", "jsonl", fixtures_dir / "docs_sample.jsonl",
                progress=False)
    return tmp_workspace


def test_backend_bench_measures_each_pair_against_torch_fp32(eval_ws, tiny_model_path,
                                                             monkeypatch):
    monkeypatch.setattr(backend_bench, "missing_extra",
                        lambda backend, precision: "nncf" if precision == "int8" and
                        backend == "openvino" else None)
    result = run_backend_bench(eval_ws, pairs=[("onnx", "fp32"), ("openvino", "int8")],
                               docs=6, task="disease_gene", split="all",
                               model=str(tiny_model_path), batch_size=4)
    assert [r.pair for r in result.rows] == ["torch/fp32", "onnx/fp32", "openvino/int8"]
    base, onnx, missing = result.rows
    assert (result.documents, result.queries) == (6, 1)
    assert base.speedup == 1.0 and base.mean_cosine == pytest.approx(1.0, abs=1e-5)
    assert base.verdict == "baseline" and 0.0 <= base.ndcg10 <= 1.0
    assert onnx.mean_cosine >= 0.9999 and onnx.ndcg_delta_pp == pytest.approx(0.0, abs=1e-6)
    assert 0 < onnx.query_p50_ms <= onnx.query_p95_ms and base.query_p50_ms > 0
    assert onnx.docs_per_s > 0 and onnx.speedup == pytest.approx(
        onnx.docs_per_s / base.docs_per_s)
    assert missing.error == "nncf is not installed: pip install 'kbcurate[openvino]'"
    assert missing.verdict == "not run"
    lines = result.lines()
    assert lines[0].startswith("encoding backends: ") and "6 documents" in lines[0]
    assert any(line.strip().startswith("onnx/fp32") for line in lines)
    assert any("not run: nncf is not installed" in line for line in lines)
    report = result.to_json()
    assert report["guard"] == {"min_mean_cosine": 0.99, "max_ndcg10_loss_pp": 1.0,
                               "min_speedup": 1.1}
    assert [r["verdict"] for r in report["rows"]][0] == "baseline"


def _row(pair, docs_per_s, cosine=1.0, ndcg=0.5, base_ndcg=0.5):
    backend, precision = pair.split("/")
    return BackendRow(backend, precision, docs_per_s, docs_per_s / 20.0, cosine, cosine, ndcg,
                      100 * (ndcg - base_ndcg), 1.0)


def test_quality_guard_picks_the_fastest_passing_pair():
    rows = (_row("torch/fp32", 20.0), _row("onnx/int8", 40.0, cosine=0.988),
            _row("openvino/bf16", 50.0, ndcg=0.495), _row("openvino/int8", 70.0, ndcg=0.48),
            _row("onnx/fp32", 21.0))
    result = BackendBench("m", "disease_gene", "test", 500, 100, 2, 1, rows)
    assert [r.verdict for r in rows] == ["baseline", "cosine < 0.99", "passes",
                                         "NDCG@10 loss > 1 pp", "< 1.1x"]
    assert result.candidate.pair == "openvino/bf16"
    assert result.lines()[-2] == "  candidate default: openvino/bf16 (2.50x)"
    nothing = BackendBench("m", "t", "test", 500, 100, 2, 1, rows[:2])
    assert nothing.candidate is None and "none" in nothing.lines()[-2]


def test_cli_bench_backends_writes_json_and_sets_the_default(eval_ws, monkeypatch, tmp_path,
                                                             capsys):
    from curation.cli.main import main
    from curation.search.indexing import default_backend

    seen = {}
    rows = (_row("torch/fp32", 20.0), _row("openvino/int8", 70.0))

    def fake(ws, **kwargs):
        seen.update(kwargs)
        return BackendBench(kwargs["model"], kwargs["task"], kwargs["split"], kwargs["docs"],
                            3, 2, kwargs["repeats"], rows)

    monkeypatch.setattr(backend_bench, "run_backend_bench", fake)
    out = tmp_path / "bench.json"
    ws = str(eval_ws.root)
    assert main(["bench", "speed", "-w", ws, "--backends", "onnx/int8,openvino-int8", "--docs",
                 "300", "--max-queries", "50", "--task", "disease_gene", "--out", str(out),
                 "--set-default"]) == 0
    assert seen["pairs"] == [("onnx", "int8"), ("openvino", "int8")]
    assert (seen["docs"], seen["max_queries"], seen["split"]) == (300, 50, "test")
    printed = capsys.readouterr().out
    assert "workspace default backend: openvino/int8" in printed
    report = json.loads(out.read_text())
    assert report["candidate"] == "openvino/int8" and report["default_set"] == "openvino/int8"
    assert default_backend(eval_ws) == ("openvino", "int8")

    rows = (_row("torch/fp32", 20.0), _row("onnx/int8", 40.0, cosine=0.98))
    assert main(["bench", "-w", ws, "speed", "--backends", "onnx/int8", "--set-default"]) == 0
    assert "workspace default backend: torch/fp32" in capsys.readouterr().out
    assert default_backend(eval_ws) == ("torch", "fp32")  # measured: nothing passes the guard

    assert main(["bench", "-w", ws, "--backends"]) == 0  # the old spelling: all pairs, default N
    assert seen["pairs"] is None and seen["docs"] == 500
    assert capsys.readouterr().err.strip() == (
        "note: `kbcurate bench` without a benchmark is now `kbcurate bench speed`; the old "
        "spelling still works")
    assert main(["bench", "-w", ws, "--backends", "onnx/bf16"]) == 2
    assert "precision bf16 is not available with backend onnx" in capsys.readouterr().err
