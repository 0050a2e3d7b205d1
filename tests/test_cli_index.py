"""``kbcurate index --kind``: the FAISS kind and its parameters reach the saved dense index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation.cli.commands import index_options
from curation.cli.main import build_parser, main


def test_kind_flags_parse_into_dense_options() -> None:
    args = build_parser().parse_args(["index", "--kind", "hnsw", "--hnsw-m", "16",
                                      "--ef-search", "64"])
    assert index_options(args) == {"index": "hnsw", "hnsw_m": 16, "ef_search": 64}
    args = build_parser().parse_args(["index", "--kind", "ivf", "--nlist", "8", "--nprobe", "4"])
    assert index_options(args) == {"index": "ivf", "nlist": 8, "nprobe": 4}
    args = build_parser().parse_args(["index", "--fp16"])
    assert index_options(args) == {"fp16": True}
    assert index_options(build_parser().parse_args(["index"])) == {}  # folder key unchanged


def test_unknown_kind_is_refused_with_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["index", "--kind", "lsh"])
    err = capsys.readouterr().err
    assert "invalid choice: 'lsh'" in err and all(k in err for k in ("flat", "ivf", "hnsw", "auto"))


@pytest.mark.parametrize(("flags", "summary"), [
    (["--kind", "ivf", "--nprobe", "2"], "FAISS ivf of 3 vectors, nlist=1, nprobe=2"),
    (["--kind", "hnsw", "--hnsw-m", "8", "--ef-search", "20"],
     "FAISS hnsw of 3 vectors, hnsw_m=8, ef_search=20"),
    (["--kind", "auto"], "FAISS flat of 3 vectors (auto: flat up to 25,000)"),
])
def test_index_records_the_kind_with_the_saved_index(tmp_workspace, fixtures_dir: Path,
                                                     tiny_model_path: Path, flags: list[str],
                                                     summary: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from curation.store.importer import import_file

    ws = tmp_workspace
    import_file(ws, "docs", "jsonl", fixtures_dir / "docs_sample.jsonl", progress=False)
    args = ["index", "-w", str(ws.root), "-q", "--model", str(tiny_model_path), *flags]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("dense index of 3 documents (dense:") and f"; {summary})" in out
    folder = Path(out.rsplit(" in ", 1)[1].strip())
    manifest = json.loads((folder / "retriever.json").read_text(encoding="utf-8"))
    assert manifest["index"]["kind"] == flags[1]
    assert json.loads((folder / "faiss" / "params.json").read_text())["kind"] == \
        summary.split()[1]
    assert main(args) == 0  # the second call loads the saved index: same kind, same folder
    assert capsys.readouterr().out == out
