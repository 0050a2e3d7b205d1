"""kbcurate bench on a small workspace with the tiny model (the figures themselves are not
asserted: speed is measured by running the command, not by tests)."""

from __future__ import annotations

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
