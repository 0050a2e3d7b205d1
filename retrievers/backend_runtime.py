"""Running an exported transformer body inside its SentenceTransformer.

:func:`attach_runtime` replaces the Hugging Face model inside the model's sentence-transformers
``Transformer`` module by a small adapter that feeds the token tensors to ONNX Runtime or
OpenVINO and returns ``last_hidden_state``; the tokenizer, pooling and normalisation stay.
Exports are made and verified by :mod:`retrievers.backends`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.errors import RetrieverError

#: The body's output that the model's pooling reads.
OUTPUT = "last_hidden_state"
#: The token inputs an exported body takes (those its tokenizer produces).
TOKEN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def transformer_body(st: Any) -> tuple[Any, Any, list[str]]:
    """(Transformer module, its Hugging Face model, the token inputs it takes)."""
    from sentence_transformers.base.modules.transformer import Transformer

    module = st[0]
    if not isinstance(module, Transformer):
        raise RetrieverError(
            f"backends other than torch export a Transformer module; this model starts with "
            f"{type(module).__name__}. Use --backend torch for it")
    output = module.modality_config.get("text", {}).get("method_output_name")
    if output != OUTPUT:
        raise RetrieverError(f"backends other than torch need a text model whose output is "
                             f"{OUTPUT}, got {output!r}; use --backend torch for it")
    names = [n for n in module.tokenizer.model_input_names if n in TOKEN_INPUTS]
    return module, module.model, names


def attach_runtime(st: Any, folder: Path, backend: str, precision: str, threads: int) -> Any:
    """Replace ``st``'s transformer body by the exported one; tokenizer, pooling and
    normalisation stay. Returns ``st``.

    Args:
        st: The SentenceTransformer the export was made from.
        folder: The verified export folder (``model.onnx`` or ``openvino_model.xml``).
        backend: "onnx" or "openvino".
        precision: The precision asked for (OpenVINO bf16 sets the inference hint).
        threads: CPU threads for the runtime.
    """
    module, hf_model, names = transformer_body(st)
    if backend == "onnx":
        run = _onnx_runner(folder / "model.onnx", threads)
    else:
        run = _openvino_runner(folder / "openvino_model.xml", precision, threads)
    module.model = _runtime_class()(run, hf_model.config, names)
    return st


Runner = Callable[[dict[str, np.ndarray]], np.ndarray]


def _onnx_runner(path: Path, threads: int) -> Runner:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    inputs = [i.name for i in session.get_inputs()]

    def run(feeds: dict[str, np.ndarray]) -> np.ndarray:
        return session.run(None, {name: feeds[name] for name in inputs})[0]

    return run


def _openvino_runner(path: Path, precision: str, threads: int) -> Runner:
    import openvino as ov

    core = ov.Core()
    config = {"INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32",
              "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
    compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
    request = compiled.create_infer_request()
    inputs = [i.get_any_name() for i in compiled.inputs]
    lock = threading.Lock()  # one infer request, shared by the app's sessions

    def run(feeds: dict[str, np.ndarray]) -> np.ndarray:
        with lock:
            request.infer({name: feeds[name] for name in inputs})
            return request.get_output_tensor(0).data.copy()

    return run


@cache
def _runtime_class() -> type:
    """The runtime adapter class (built on first use, so importing this module skips torch)."""
    import torch

    class RuntimeModel(torch.nn.Module):
        """Stands in for the Hugging Face model inside sentence-transformers' ``Transformer``:
        takes the token tensors, returns ``{"last_hidden_state": (batch, seq, hidden)}``."""

        def __init__(self, run: Runner, config: Any, names: list[str]) -> None:
            super().__init__()
            self.run = run
            self.config = config
            self.input_names = names
            self.device = torch.device("cpu")

        def forward(self, input_ids: Any = None, **features: Any) -> dict[str, Any]:
            features["input_ids"] = input_ids
            if "token_type_ids" in self.input_names and features.get("token_type_ids") is None:
                features["token_type_ids"] = torch.zeros_like(input_ids)
            feeds = {n: features[n].detach().cpu().numpy().astype(np.int64, copy=False)
                     for n in self.input_names}  # each (batch, seq)
            return {OUTPUT: torch.from_numpy(self.run(feeds))}  # (batch, seq, hidden)

    return RuntimeModel
