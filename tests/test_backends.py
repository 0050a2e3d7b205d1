"""Encoding backends on the tiny BERT: export, load, vectors close to torch, the export stored
once and verified, cache keys per backend, the index's recorded backend, missing extras, CLI.

The ONNX and OpenVINO packages come with the test extra (CI installs them), so nothing here
skips; the "missing extra" path is tested by hiding the package.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from kb_sources.errors import CurationError
from retrievers import backends
from retrievers.backends import COMBINATIONS
from retrievers.dense import DenseRetriever
from retrievers.encoder import Encoder, EncoderConfig
from retrievers.errors import RetrieverError
from retrievers.export_store import EXPORT_MANIFEST, sha256_file, verify_export
from retrievers.registry import load_retriever

TEXTS = [
    "BRAF V600E mutation predicts response to vemurafenib and dabrafenib in melanoma.",
    "EGFR L858R in lung cancer responds to erlotinib and osimertinib.",
    "AKT1 is phosphorylated at Ser473 by mTORC2.",
    "KRAS G12C inhibitors sotorasib and adagrasib.",
    "short",
    "Patients with metastatic disease were randomised to placebo or treatment.",
]


def _config(model: Path, root: Path, backend: str, precision: str) -> EncoderConfig:
    return EncoderConfig(model=str(model), device="cpu", backend=backend, precision=precision,
                         export_dir=str(root))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)  # both L2-normalised: (n,)


@pytest.fixture(scope="module")
def torch_vectors(tiny_model_path: Path) -> np.ndarray:
    return Encoder(EncoderConfig(model=str(tiny_model_path), device="cpu")).encode_documents(TEXTS)


@pytest.fixture(scope="module")
def export_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("exports")


# -- configuration ---------------------------------------------------------------------------
def test_unsupported_pairs_and_names_list_the_options() -> None:
    with pytest.raises(RetrieverError, match=r"precision bf16 is not available with backend "
                                             r"onnx\. Available combinations: torch/fp32, "):
        EncoderConfig(backend="onnx", precision="bf16")
    with pytest.raises(RetrieverError, match=r"precision int8 is not available with backend "
                                             r"torch"):
        EncoderConfig(precision="int8")
    with pytest.raises(RetrieverError, match=r"Unknown backend 'tensorrt'\. Available options: "
                                             r"onnx, openvino, torch"):
        EncoderConfig(backend="tensorrt")
    with pytest.raises(RetrieverError, match=r"Unknown precision 'fp16'"):
        EncoderConfig(backend="openvino", precision="fp16")
    with pytest.raises(RetrieverError, match="dtype bfloat16 applies to the torch backend"):
        EncoderConfig(backend="onnx", dtype="bfloat16")
    with pytest.raises(RetrieverError, match="precision bf16 and dtype float16 disagree"):
        EncoderConfig(precision="bf16", dtype="float16")


def test_torch_bf16_and_dtype_bfloat16_are_one_setting() -> None:
    by_precision = EncoderConfig(precision="BF16")
    by_dtype = EncoderConfig(dtype="bfloat16")
    assert (by_precision.precision, by_precision.dtype) == ("bf16", "bfloat16")
    assert (by_dtype.backend, by_dtype.precision) == ("torch", "bf16")
    assert Encoder(by_precision).model_id == Encoder(by_dtype).model_id


def test_model_id_differs_per_backend_and_precision(tiny_model_path: Path) -> None:
    ids = {pair: Encoder(_config(tiny_model_path, Path("/x"), *pair)).model_id
           for pair in COMBINATIONS}
    assert len(set(ids.values())) == len(COMBINATIONS) == 7
    plain = Encoder(EncoderConfig(model=str(tiny_model_path))).model_id
    assert ids[("torch", "fp32")] == plain  # the default keeps its cache key
    assert "-onnx-int8-" in ids[("onnx", "int8")]
    assert "-openvino-bf16-" in ids[("openvino", "bf16")]
    # where exports are kept does not change the vectors' key
    other = Encoder(_config(tiny_model_path, Path("/y"), "onnx", "int8")).model_id
    assert other == ids[("onnx", "int8")]


# -- ONNX ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("precision", "min_cosine"), [("fp32", 0.9999), ("int8", 0.98)])
def test_onnx_vectors_are_close_to_torch(tiny_model_path: Path, export_root: Path,
                                         torch_vectors: np.ndarray, precision: str,
                                         min_cosine: float) -> None:
    encoder = Encoder(_config(tiny_model_path, export_root, "onnx", precision))
    vectors = encoder.encode_documents(TEXTS)
    assert vectors.shape == torch_vectors.shape and vectors.dtype == np.float32
    cosines = _cosines(vectors, torch_vectors)
    assert cosines.min() >= min_cosine, cosines
    # queries go through the same exported body
    query = encoder.encode_queries([TEXTS[0]])
    assert float(query[0] @ vectors[0]) == pytest.approx(1.0, abs=1e-5)
    assert type(encoder.doc_model[0].model).__name__ == "RuntimeModel"


def test_export_is_stored_once_verified_and_redone_when_tampered(
        tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tiny_model_path, tmp_path, "onnx", "fp32")
    first = Encoder(config).encode_documents(TEXTS)
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert folder.name.endswith("-onnx-fp32")
    manifest = json.loads((folder / EXPORT_MANIFEST).read_text())
    assert manifest["backend"] == "onnx" and manifest["precision"] == "fp32"
    assert manifest["files"] == {"model.onnx": sha256_file(folder / "model.onnx")}
    assert {"torch", "onnx", "onnxruntime"} <= manifest["tool"].keys()

    calls = []
    real_export = backends._export_onnx
    monkeypatch.setattr(backends, "_export_onnx",
                        lambda *a, **k: calls.append(1) or real_export(*a, **k))
    again = Encoder(config).encode_documents(TEXTS)  # verified and reused
    assert calls == [] and np.allclose(again, first)

    with (folder / "model.onnx").open("ab") as f:  # tampered: never loaded, exported again
        f.write(b"\0")
    assert verify_export(folder, manifest["source"]) is None
    redone = Encoder(config).encode_documents(TEXTS)
    assert calls == [1] and np.allclose(redone, first, atol=1e-5)
    assert verify_export(folder, manifest["source"]) is not None


def test_onnx_int8_export_follows_the_cpu_preset(tiny_model_path: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tiny_model_path, tmp_path, "onnx", "int8")
    presets = []
    for preset in ("avx512_vnni", "avx512_vnni", "avx2"):
        monkeypatch.setattr(backends, "int8_preset", lambda p=preset: p)
        Encoder(config).encode_documents(TEXTS[:2])
        [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
        manifest = json.loads((folder / EXPORT_MANIFEST).read_text())
        presets.append((manifest["tool"]["preset"], manifest["created"], manifest["seconds"]))
    assert [p[0] for p in presets] == ["avx512_vnni", "avx512_vnni", "avx2"]
    assert presets[1] == presets[0]  # same CPU preset: reused, not exported again


def test_missing_extra_names_the_pip_extra(tiny_model_path: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    encoder = Encoder(_config(tiny_model_path, tmp_path, "onnx", "int8"))
    with pytest.raises(RetrieverError, match=r"backend onnx \(int8\) needs the Python package "
                                             r"'onnxruntime'.*pip install 'kbcurate\[onnx\]'"):
        encoder.encode_queries(["BRAF"])
    monkeypatch.setitem(sys.modules, "openvino", None)
    encoder = Encoder(_config(tiny_model_path, tmp_path, "openvino", "fp32"))
    with pytest.raises(RetrieverError, match=r"pip install 'kbcurate\[openvino\]'"):
        encoder.encode_documents(["BRAF"])
    monkeypatch.setattr(backends.importlib.util, "find_spec",
                        lambda name: None if name == "nncf" else object())
    assert backends.missing_extra("openvino", "int8") == "nncf"
    assert backends.missing_extra("torch", "bf16") is None


def test_in_memory_model_and_gpu_device_need_torch(tiny_model_path: Path) -> None:
    with pytest.raises(RetrieverError, match="in-memory model encodes with the torch backend"):
        Encoder(EncoderConfig(model_version="v1", backend="onnx"), model=object())
    encoder = Encoder(EncoderConfig(model=str(tiny_model_path), backend="onnx", device="cuda"))
    with pytest.raises(RetrieverError, match="backend onnx runs on the CPU"):
        encoder.encode_queries(["BRAF"])


# -- OpenVINO --------------------------------------------------------------------------------
def test_openvino_fp32_bf16_int8(tiny_model_path: Path, export_root: Path,
                                 torch_vectors: np.ndarray) -> None:
    fp32 = Encoder(_config(tiny_model_path, export_root, "openvino", "fp32"))
    assert _cosines(fp32.encode_documents(TEXTS), torch_vectors).min() >= 0.9999
    bf16 = Encoder(_config(tiny_model_path, export_root, "openvino", "bf16"))
    assert _cosines(bf16.encode_documents(TEXTS), torch_vectors).min() >= 0.99
    # bf16 is a run-time hint on the fp32 model: one export serves both
    assert not [p for p in export_root.iterdir() if p.name.endswith("-openvino-bf16")]

    config = _config(tiny_model_path, export_root, "openvino", "int8")
    with pytest.raises(RetrieverError, match="static quantisation needs calibration texts"):
        Encoder(config).encode_queries(["BRAF"])  # no export yet, nothing to calibrate on
    int8 = Encoder(config)
    vectors = int8.encode_documents(TEXTS)  # calibrates on the documents it encodes first
    assert _cosines(vectors, torch_vectors).min() >= 0.98
    [folder] = [p for p in export_root.iterdir() if p.name.endswith("-openvino-int8")]
    manifest = json.loads((folder / EXPORT_MANIFEST).read_text())
    assert manifest["calibration_texts"] == len(TEXTS)
    assert set(manifest["files"]) == {"openvino_model.xml", "openvino_model.bin"}
    queries = Encoder(config).encode_queries([TEXTS[0]])  # the export exists: no calibration
    assert float(queries[0] @ vectors[0]) == pytest.approx(1.0, abs=1e-5)


# -- saved indexes ---------------------------------------------------------------------------
def test_index_records_its_backend_and_refuses_another_query_encoder(
        tiny_model_path: Path, export_root: Path, tmp_path: Path) -> None:
    retriever = DenseRetriever(_config(tiny_model_path, export_root, "onnx", "int8"))
    retriever.index([(f"d{i}", t) for i, t in enumerate(TEXTS)], progress=False)
    hits = retriever.search("BRAF melanoma vemurafenib", 3)
    folder = retriever.save(tmp_path / "dense")
    manifest = json.loads((folder / "retriever.json").read_text())
    assert (manifest["backend"], manifest["precision"]) == ("onnx", "int8")
    assert "-onnx-int8-" in manifest["model_id"]

    loaded = load_retriever(folder)  # queries are encoded with the recorded backend
    assert (loaded.encoder.config.backend, loaded.encoder.config.precision) == ("onnx", "int8")
    assert [h.doc_id for h in loaded.search("BRAF melanoma vemurafenib", 3)] == \
        [h.doc_id for h in hits]

    torch_encoder = Encoder(EncoderConfig(model=str(tiny_model_path), device="cpu"))
    with pytest.raises(RetrieverError, match=r"indexed with backend onnx / precision int8, but "
                                             r"the query encoder uses backend torch / precision "
                                             r"fp32.*--backend torch --precision fp32.*"
                                             r"--backend onnx --precision int8"):
        DenseRetriever.load_with_encoder(folder, torch_encoder)
    same = Encoder(_config(tiny_model_path, export_root, "onnx", "int8"))
    assert DenseRetriever.load_with_encoder(folder, same).encoder is same


def test_index_saved_before_backends_were_recorded_still_loads(tiny_model_path: Path,
                                                               tmp_path: Path) -> None:
    retriever = DenseRetriever(EncoderConfig(model=str(tiny_model_path), device="cpu"))
    retriever.index([("d0", TEXTS[0]), ("d1", TEXTS[1])], progress=False)
    folder = retriever.save(tmp_path / "old")
    manifest = json.loads((folder / "retriever.json").read_text())
    for key in ("backend", "precision"):
        del manifest[key]
        del manifest["encoder"][key]
    del manifest["encoder"]["export_dir"]
    (folder / "retriever.json").write_text(json.dumps(manifest))
    loaded = load_retriever(folder)
    assert loaded.encoder.config.backend == "torch"
    assert len(loaded.search("BRAF", 2)) == 2


# -- workspace default and index jobs ----------------------------------------------------------
def test_workspace_default_backend_reaches_dense_options(tmp_workspace, caplog) -> None:
    from curation.search.indexing import (
        BACKEND_KEY,
        default_backend,
        index_folder,
        set_default_backend,
        with_workspace_defaults,
    )

    ws = tmp_workspace
    plain = with_workspace_defaults(ws, "dense", {})
    assert default_backend(ws) == ("torch", "fp32") and "backend" not in plain
    set_default_backend(ws, "OpenVINO", "int8", actor="cli")
    assert default_backend(ws) == ("openvino", "int8")
    [row] = ws.audit_log("setting")
    assert row.actor == "cli" and "openvino/int8" in row.after

    dense = with_workspace_defaults(ws, "dense", {})
    assert (dense["backend"], dense["precision"]) == ("openvino", "int8")
    assert dense["export_dir"] == str(ws.root / "cache" / "exports")
    hybrid = with_workspace_defaults(ws, "hybrid", {})["dense"]
    assert hybrid["backend"] == "openvino"
    # an explicit pair wins; plain torch keeps the index folder it always had
    explicit = with_workspace_defaults(ws, "dense", {"backend": "torch"})
    assert "backend" not in explicit and "export_dir" not in explicit
    assert index_folder(ws, "dense", explicit) == index_folder(ws, "dense", plain)
    assert index_folder(ws, "dense", dense) != index_folder(ws, "dense", plain)
    assert with_workspace_defaults(ws, "dense", {"dtype": "bfloat16"}).get("backend") is None

    with pytest.raises(CurationError, match="default backend: precision bf16 is not available"):
        set_default_backend(ws, "onnx", "bf16", actor="cli")
    ws.conn.execute("UPDATE meta SET value = 'tpu/int4' WHERE key = ?", (BACKEND_KEY,))
    assert default_backend(ws) == ("torch", "fp32")
    assert "ignoring the workspace setting encoder_backend='tpu/int4'" in caplog.text


def test_index_job_checks_backend_and_export_dir(tmp_workspace, tmp_path) -> None:
    from curation.search.indexing import check_index_params

    ws = tmp_workspace
    check_index_params(ws, {"retriever": "dense",
                            "options": {"backend": "onnx", "precision": "int8",
                                        "export_dir": str(ws.root / "cache" / "exports")}})
    check_index_params(ws, {"retriever": "hybrid", "options": {"dense": {"precision": "bf16"}}})
    with pytest.raises(CurationError, match=r"Index job option options\.dense: precision int8 "
                                            r"is not available with backend torch"):
        check_index_params(ws, {"retriever": "hybrid",
                                "options": {"dense": {"precision": "int8"}}})
    with pytest.raises(CurationError, match="Unknown backend 'cuda'"):
        check_index_params(ws, {"retriever": "dense", "options": {"backend": "cuda"}})
    with pytest.raises(CurationError, match="export_dir"):
        check_index_params(ws, {"retriever": "dense",
                                "options": {"backend": "onnx", "export_dir": str(tmp_path)}})


# -- command line ------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["index"], ["evaluate", "--schema", "PO"], ["bench"]])
def test_cli_backend_flags_parse_into_dense_options(command: list[str]) -> None:
    from curation.cli.commands import dense_options
    from curation.cli.main import build_parser

    args = build_parser().parse_args([*command, "--backend", "openvino", "--precision", "bf16"])
    assert dense_options(args) == {"backend": "openvino", "precision": "bf16",
                                   **({"model": args.model} if args.model else {})}
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--precision", "fp16"])


def test_cli_index_builds_with_the_backend_and_evaluate_uses_it(
        tmp_workspace, fixtures_dir, tiny_model_path, capsys) -> None:
    from curation.cli.main import main
    from curation.store.importer import import_file

    ws = tmp_workspace
    import_file(ws, "kb", "pubtator", fixtures_dir / "pubtator_sample.txt", progress=False)
    import_file(ws, "docs", "jsonl", fixtures_dir / "docs_sample.jsonl", progress=False)
    args = ["-w", str(ws.root), "-q", "--model", str(tiny_model_path), "--backend", "onnx",
            "--precision", "int8"]
    assert main(["index", *args]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dense index of 6 documents (dense:st-onnx-int8-")
    [export] = (ws.root / "cache" / "exports").iterdir()
    assert export.name.endswith("-onnx-int8") and (export / EXPORT_MANIFEST).is_file()
    [cache] = (ws.root / "cache" / "embeddings").glob("*-onnx-int8-*.sqlite")
    assert cache.stat().st_size > 0
    assert main(["evaluate", *args, "--schema", "disease_gene", "--split", "all",
                 "--retriever", "dense"]) == 0
    assert "dense" in capsys.readouterr().out


def test_quiet_swallows_third_party_progress_only_when_asked(monkeypatch, capsys):
    from retrievers.backends import _quiet_if_asked

    monkeypatch.setenv("KBCURATE_QUIET", "1")
    with _quiet_if_asked():
        print("Statistics collection 100%")
    monkeypatch.delenv("KBCURATE_QUIET")
    with _quiet_if_asked():
        print("shown")
    assert capsys.readouterr().out == "shown\n"
