"""The settings of a text encoder: :class:`EncoderConfig` and the choices its fields name.

:class:`Pooling` and :class:`Dtype` list the accepted names; ``backend`` / ``precision`` pairs are
checked (and reconciled with ``dtype``) by :func:`retrievers.backends.reconcile_dtype`. Fields left
``None`` are filled from :data:`~retrievers.profiles.MODEL_PROFILES` by
:meth:`EncoderConfig.resolved`. :class:`retrievers.encoder.Encoder` loads and runs the model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any

from retrievers import backends
from retrievers.errors import RetrieverError, unknown_name
from retrievers.profiles import model_profile

DEFAULT_MODEL = "all-MiniLM-L6-v2"


class Pooling(StrEnum):
    """How token vectors become one text vector."""

    CLS = "cls"
    MEAN = "mean"
    MAX = "max"
    LASTTOKEN = "lasttoken"


class Dtype(StrEnum):
    """Model precision. AUTO: float16 on CUDA, float32 on CPU; BFLOAT16 on CPU: bf16 autocast."""

    AUTO = "auto"
    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"


@dataclass(frozen=True)
class EncoderConfig:
    """Settings of a text encoder (``None`` fields: :data:`~retrievers.profiles.MODEL_PROFILES`).

    Attributes:
        model: HF name or local folder of the (document) model; "all-MiniLM-L6-v2" is packaged.
        query_model: Separate query model (MedCPT); ``None``: profile, else ``model``.
        pooling: :class:`Pooling` name that overrides the folder's own pooling.
        query_prefix: Text put before each query (BGE instruction, E5 "query: ").
        doc_prefix: Text put before each document (E5 "passage: ").
        max_seq_length: Token limit for documents.
        query_max_seq_length: Token limit for queries; ``None``: profile, else max_seq_length.
        batch_size: Texts per forward pass.
        device: "auto" (CUDA when available, else CPU), "cpu", "cuda", "cuda:1", ...
        normalize: L2-normalise vectors (inner product = cosine).
        dtype: :class:`Dtype` name.
        model_version: Cache key of the weights (e.g. "edel-3"); ``None``: model name + size
            and time of its weight files.
        num_threads: CPU threads for torch; ``None``: torch's default, lowered to the cores this
            process may use (containers). Note: torch threads are a process-wide setting.
        backend: "torch", "onnx" (ONNX Runtime) or "openvino"; the latter two run on CPU from an
            export made once per model (:mod:`retrievers.backends`).
        precision: "fp32", "bf16" or "int8" (:data:`~retrievers.backends.COMBINATIONS` lists
            the pairs); torch bf16 is ``dtype="bfloat16"`` (either sets both).
        export_dir: Folder of exported models, one sub-folder per model + backend + precision;
            ``None``: ``$XDG_CACHE_HOME/kbcurate/exports``. Not part of the vector cache key.
    """

    model: str = DEFAULT_MODEL
    query_model: str | None = None
    pooling: str | None = None
    query_prefix: str | None = None
    doc_prefix: str | None = None
    max_seq_length: int = 256
    query_max_seq_length: int | None = None
    batch_size: int = 32
    device: str = "auto"
    normalize: bool = True
    dtype: str = "auto"
    model_version: str | None = None
    num_threads: int | None = None
    backend: str = backends.Backend.TORCH.value
    precision: str = backends.Precision.FP32.value
    export_dir: str | None = None

    def __post_init__(self) -> None:
        for name in ("model", "query_model", "export_dir"):  # accept Path objects
            if isinstance(getattr(self, name), os.PathLike):
                object.__setattr__(self, name, os.fspath(getattr(self, name)))
        if self.pooling is not None:
            object.__setattr__(self, "pooling", _choice(Pooling, self.pooling, "pooling"))
        pair = backends.reconcile_dtype(self.backend, self.precision,
                                        _choice(Dtype, self.dtype, "dtype"))
        for name, value in zip(("backend", "precision", "dtype"), pair, strict=True):
            object.__setattr__(self, name, value)
        for name in ("max_seq_length", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise RetrieverError(f"{name} must be a positive integer, got {value!r}; "
                                     f"set for example {name}=256")

    def resolved(self) -> EncoderConfig:
        """Fill the ``None`` prefix / query fields from the model's profile."""
        profile = model_profile(self.model)
        return replace(
            self,
            query_model=self.query_model or profile.query_model,
            query_prefix=profile.query_prefix if self.query_prefix is None else self.query_prefix,
            doc_prefix=profile.doc_prefix if self.doc_prefix is None else self.doc_prefix,
            query_max_seq_length=self.query_max_seq_length or profile.query_max_seq_length
            or self.max_seq_length,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderConfig:
        """Rebuild from ``asdict(config)``; unknown keys are an error naming the valid ones."""
        valid = {f.name for f in fields(cls)}
        for key in data:
            if key not in valid:
                raise unknown_name("encoder option", key, valid)
        return cls(**data)


def _choice(enum: type[StrEnum], value: object, what: str) -> str:
    try:
        return enum(str(value).lower()).value
    except ValueError:
        raise unknown_name(what, value, [e.value for e in enum]) from None
