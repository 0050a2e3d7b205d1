"""Encoding backends: PyTorch, ONNX Runtime and OpenVINO, at fp32, bf16 or int8.

=========  =========================  ================================  ==========================
backend    fp32                       bf16                              int8
=========  =========================  ================================  ==========================
torch      the model as loaded        CPU: bf16 autocast; CUDA weights  -
onnx       ``torch.onnx.export``      -                                 dynamic quantisation
openvino   the ONNX graph, converted  fp32 model, bf16 inference hint   static quantisation (NNCF)
=========  =========================  ================================  ==========================

ONNX int8 is ``onnxruntime.quantization.quantize_dynamic`` with the settings of optimum's presets
for the CPU it is exported on (:func:`int8_preset`): ``arm64`` / ``avx512_vnni`` (they agree for
dynamic quantisation: u8 activations, s8 symmetric weights per channel, full range), else
``avx2`` (u8 weights: no s8 saturation without VNNI). OpenVINO reads the same traced ONNX graph
(``openvino.convert_model``); its int8 is ``nncf.quantize`` with the transformer model type on up
to 300 local documents (the library helper calibrates on a hub data set, which cannot be reached
offline).

Only the transformer body is exported: the model keeps its sentence-transformers tokenizer,
pooling and normalisation, and the body's Hugging Face model inside the ``Transformer`` module is
replaced by a small runtime adapter (:mod:`retrievers.backend_runtime`). sentence-transformers' own
``backend="onnx"`` / ``"openvino"`` go through optimum, which cannot be installed beside
transformers 5 (optimum-onnx needs transformers < 4.58; optimum-intel pins an older transformers),
so the export uses the converters those helpers wrap.

An export is stored once per model (version or weights fingerprint) and stored form in its own
folder with ``export.json``: backend, precision, source, tool versions and the sha256 of every
file (:mod:`retrievers.export_store`). :func:`ensure_export` verifies it before each use; an
export that fails verification (a changed or missing file, another source) is never loaded: it is
exported again.

The packages are optional extras: ``pip install 'kbcurate[onnx]'`` (onnxruntime, onnx) and
``pip install 'kbcurate[openvino]'`` (openvino, nncf, onnx); a missing one is a
:class:`RetrieverError` naming the extra.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import platform
import re
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.backend_runtime import OUTPUT, attach_runtime, transformer_body
from retrievers.errors import RetrieverError, unknown_name
from retrievers.export_store import (
    EXPORT_MANIFEST,
    ExportManifest,
    default_export_root,
    export_folder,
    sha256_file,
    stored_precision,
    verify_export,
)
from retrievers.saved import replace_folder, write_json

logger = logging.getLogger(__name__)


class Backend(StrEnum):
    """What runs the transformer body."""

    TORCH = "torch"
    ONNX = "onnx"
    OPENVINO = "openvino"


class Precision(StrEnum):
    """Number format of the transformer body's matmuls."""

    FP32 = "fp32"
    BF16 = "bf16"
    INT8 = "int8"


#: Supported (backend, precision) pairs -> what runs; every other pair is refused.
COMBINATIONS: dict[tuple[str, str], str] = {
    ("torch", "fp32"): "PyTorch, float32",
    ("torch", "bf16"): "PyTorch, bfloat16 autocast on CPU (slow without avx512_bf16 / AMX; "
                       "bfloat16 weights on CUDA)",
    ("onnx", "fp32"): "ONNX Runtime, float32 export",
    ("onnx", "int8"): "ONNX Runtime, dynamic int8 quantisation",
    ("openvino", "fp32"): "OpenVINO, float32",
    ("openvino", "bf16"): "OpenVINO, float32 model with a bfloat16 inference hint (honoured "
                          "only on CPUs with native bf16; others run float32)",
    ("openvino", "int8"): "OpenVINO, static int8 quantisation (NNCF) on local documents",
}
DEFAULT = ("torch", "fp32")
#: Most calibration texts for OpenVINO int8 (NNCF's default subset size).
CALIBRATION_SIZE = 300


def combination_names() -> list[str]:
    """``backend/precision`` of every supported pair, for messages and ``--help``."""
    return [f"{b}/{p}" for b, p in COMBINATIONS]


def check_combination(backend: object, precision: object) -> tuple[str, str]:
    """Normalise and validate a (backend, precision) pair.

    Raises:
        RetrieverError: Unknown backend or precision, or a pair that is not supported; the
            message lists the options.
    """
    b, p = str(backend).lower(), str(precision).lower()
    if b not in {m.value for m in Backend}:
        raise unknown_name("backend", backend, [m.value for m in Backend])
    if p not in {m.value for m in Precision}:
        raise unknown_name("precision", precision, [m.value for m in Precision])
    if (b, p) not in COMBINATIONS:
        raise RetrieverError(
            f"precision {p} is not available with backend {b}. Available combinations: "
            f"{', '.join(combination_names())}")
    return b, p


def reconcile_dtype(backend: object, precision: object, dtype: str) -> tuple[str, str, str]:
    """Validate a pair together with the torch ``dtype`` setting; returns (backend, precision,
    dtype). torch bf16 and dtype "bfloat16" set each other; other backends take no dtype.

    Raises:
        RetrieverError: An unknown or unsupported pair, or a dtype that contradicts it.
    """
    backend, precision = check_combination(backend, precision)
    if backend == Backend.TORCH:
        if precision == Precision.BF16 and dtype == "auto":
            dtype = "bfloat16"
        elif dtype == "bfloat16":
            precision = Precision.BF16.value
        if precision == Precision.BF16 and dtype != "bfloat16":
            raise RetrieverError(f"precision bf16 and dtype {dtype} disagree; set one of them")
    elif dtype not in ("auto", "float32"):
        raise RetrieverError(f"dtype {dtype} applies to the torch backend; with backend {backend} "
                             f"set precision ({', '.join(combination_names())})")
    return backend, precision, dtype


def parse_combination(text: str) -> tuple[str, str]:
    """``"onnx/int8"`` (or ``"onnx-int8"``) -> ("onnx", "int8"), validated."""
    backend, sep, precision = text.replace("-", "/").partition("/")
    if not sep:
        raise RetrieverError(f"{text!r} is not BACKEND/PRECISION. Available combinations: "
                             f"{', '.join(combination_names())}")
    return check_combination(backend, precision)


def _modules(backend: str, precision: str, *, exporting: bool) -> tuple[str, ...]:
    if backend == Backend.ONNX:
        return ("onnxruntime", "onnx") if exporting else ("onnxruntime",)
    if backend == Backend.OPENVINO and exporting:  # exported through ONNX
        return ("openvino", "onnx", "nncf") if precision == Precision.INT8 else ("openvino", "onnx")
    return ("openvino",) if backend == Backend.OPENVINO else ()


def _extra_error(backend: str, precision: str, module: str) -> RetrieverError:
    return RetrieverError(
        f"backend {backend} ({precision}) needs the Python package {module!r}, which is not "
        f"installed: install the optional extra with pip install 'kbcurate[{backend}]' (or "
        "choose --backend torch)")


def missing_extra(backend: str, precision: str) -> str | None:
    """The first package of the pair's extra that is not installed (no import), else None."""
    for module in _modules(backend, precision, exporting=True):
        if importlib.util.find_spec(module) is None:
            return module
    return None


def import_extra(backend: str, precision: str, *, exporting: bool = False) -> None:
    """Import what the pair needs to run (and to export, when ``exporting``).

    Raises:
        RetrieverError: A package is missing; the message names the pip extra.
    """
    for module in _modules(backend, precision, exporting=exporting):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise _extra_error(backend, precision, module) from exc


def ensure_export(st: Any, folder: Path, backend: str, precision: str, source: str,
                  calibration: Sequence[str] | None = None) -> ExportManifest:
    """Reuse the verified export in ``folder``, or export ``st``'s transformer body there.

    Args:
        st: A SentenceTransformer whose first module is a ``Transformer`` (on CPU, float32).
        folder: The export's folder (:func:`~retrievers.export_store.export_folder`); replaced
            atomically when exported.
        backend: "onnx" or "openvino".
        precision: "fp32", "bf16" (OpenVINO: stored as fp32) or "int8".
        source: Model version or weights fingerprint; an export of another source is redone.
        calibration: Texts for OpenVINO int8 (up to :data:`CALIBRATION_SIZE` are used).

    Returns:
        The manifest of the verified (or new) export.

    Raises:
        RetrieverError: A package is missing, the model has no transformer body, or OpenVINO
            int8 must be exported but no calibration texts were given.
    """
    backend, precision = check_combination(backend, precision)
    form = stored_precision(backend, precision)
    if (backend, form) == (Backend.ONNX, Precision.INT8):  # made for this CPU's preset
        source = f"{source} [{int8_preset()}]"
    found = verify_export(folder, source)
    if found is not None:
        return found
    import_extra(backend, precision, exporting=True)
    texts = sample_calibration(calibration or [])
    if backend == Backend.OPENVINO and form == Precision.INT8 and not texts:
        raise RetrieverError(
            f"the OpenVINO int8 export of {source[:80]!r} is missing and static quantisation needs "
            "calibration texts: encode documents first (build the index) or pass "
            "Encoder(..., calibration_texts=[...])")
    logger.info("exporting the model to %s %s in %s", backend, form, folder)
    start = time.perf_counter()
    with replace_folder(folder) as tmp:
        if backend == Backend.ONNX:
            tool = _export_onnx(st, tmp, int8=form == Precision.INT8)
        else:
            tool = _export_openvino(st, tmp, texts if form == Precision.INT8 else None)
        files = {p.relative_to(tmp).as_posix(): sha256_file(p)
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest = ExportManifest(
            backend, form, source, files, tool,
            len(texts) if form == Precision.INT8 and backend == Backend.OPENVINO else 0,
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            round(time.perf_counter() - start, 2))
        write_json(tmp / EXPORT_MANIFEST, asdict(manifest))
    return manifest


def load_backend(st: Any, *, source: str, name: str, root: str | Path | None, backend: str,
                 precision: str, calibration: Sequence[str] | None, threads: int) -> Any:
    """Run ``st``'s transformer body on ``backend``: export it once (verified on every load)
    into ``root``, then attach the runtime. Returns ``st``.

    Args:
        st: The loaded SentenceTransformer (CPU, float32).
        source: What identifies its weights (a model version, or a weights fingerprint).
        name: A readable name for the export folder (model version or folder name).
        root: Folder of exports; ``None``: :func:`~retrievers.export_store.default_export_root`.
        backend: "onnx" or "openvino".
        precision: The precision asked for.
        calibration: Texts for an OpenVINO int8 export, when one must be made.
        threads: CPU threads for the runtime.

    Raises:
        RetrieverError: A package is missing (names the pip extra), or see :func:`ensure_export`.
    """
    import_extra(backend, precision)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name)[:60]
    key = f"{slug}-{hashlib.sha256(source.encode()).hexdigest()[:12]}"
    folder = export_folder(root or default_export_root(), key, backend, precision)
    ensure_export(st, folder, backend, precision, source, calibration)
    return attach_runtime(st, folder, backend, precision, threads)


def sample_calibration(texts: Sequence[str], size: int = CALIBRATION_SIZE) -> list[str]:
    """Up to ``size`` texts spread evenly over ``texts`` (deterministic)."""
    texts = [t for t in texts if t]
    if len(texts) <= size:
        return list(texts)
    step = len(texts) / size
    return [texts[int(i * step)] for i in range(size)]


# -- export ----------------------------------------------------------------------------------
def _traceable(st: Any) -> tuple[Any, list[str], tuple[Any, ...]]:
    """A module taking the token tensors positionally, its input names, and a padded example."""
    import torch

    module, hf_model, names = transformer_body(st)

    class Body(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = hf_model

        def forward(self, *inputs: Any) -> Any:
            return self.model(**dict(zip(names, inputs, strict=True)))[OUTPUT]

    # two texts of different lengths: the traced graph must keep the padding mask
    example = module.tokenizer(["kinase inhibitor response in melanoma patients", "gene"],
                               padding=True, return_tensors="pt")
    assert int(example["attention_mask"].min()) == 0
    return Body().eval(), names, tuple(example[n] for n in names)


def _trace_to_onnx(st: Any, path: Path) -> list[str]:
    """Export ``st``'s transformer body to an fp32 ONNX file (batch and sequence dynamic);
    returns its input names. Both backends start from this one traced graph."""
    import torch

    body, names, example = _traceable(st)
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, OUTPUT]}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about Python control flow
        torch.onnx.export(body, example, str(path), dynamo=False, input_names=names,
                          output_names=[OUTPUT], dynamic_axes=axes, opset_version=17,
                          do_constant_folding=True)
    return names


def int8_preset() -> str:
    """optimum's dynamic-quantisation preset for this CPU: "arm64", "avx512_vnni" or "avx2"."""
    if platform.machine().lower() in ("arm64", "aarch64"):
        return "arm64"
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        flags = ""
    return "avx512_vnni" if re.search(r"\b(avx512_vnni|avx_vnni)\b", flags) else "avx2"


def _export_onnx(st: Any, out: Path, *, int8: bool) -> dict[str, str]:
    target = out / "model.onnx"
    preset = int8_preset() if int8 else None
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "model.onnx" if int8 else target
        _trace_to_onnx(st, plain)
        if int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            weights = QuantType.QUInt8 if preset == "avx2" else QuantType.QInt8
            quantize_dynamic(plain, target, per_channel=True, reduce_range=False,
                             weight_type=weights,
                             extra_options={"WeightSymmetric": True,
                                            "ActivationSymmetric": False})
    return {**_versions("torch", "onnx", "onnxruntime"), **({"preset": preset} if int8 else {})}


def _export_openvino(st: Any, out: Path, calibration: list[str] | None) -> dict[str, str]:
    import openvino as ov

    with tempfile.TemporaryDirectory() as tmp:
        names = _trace_to_onnx(st, Path(tmp) / "model.onnx")
        model = ov.convert_model(Path(tmp) / "model.onnx")
    if calibration:
        import nncf

        module = st[0]
        items = [{n: np.asarray(enc[n], dtype=np.int64)[None, :] for n in names}  # (1, seq)
                 for enc in (module.tokenizer(t, truncation=True, max_length=st.max_seq_length)
                             for t in calibration)]
        with _quiet_if_asked():  # nncf draws rich progress bars on stdout
            model = nncf.quantize(model, nncf.Dataset(items),
                                  model_type=nncf.ModelType.TRANSFORMER, subset_size=len(items))
    ov.save_model(model, str(out / "openvino_model.xml"), compress_to_fp16=False)
    return _versions("torch", "onnx", "openvino", *(("nncf",) if calibration else ()))


@contextlib.contextmanager
def _quiet_if_asked() -> Iterator[None]:
    """Swallow third-party progress output when ``$KBCURATE_QUIET`` is set (``--quiet``)."""
    if os.environ.get("KBCURATE_QUIET") != "1":
        yield
        return
    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink), \
            contextlib.redirect_stderr(sink):
        yield


def _versions(*packages: str) -> dict[str, str]:
    return {p: importlib.metadata.version(p) for p in packages}
