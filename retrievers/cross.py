"""Cross-encoder scoring: (query, document) pairs -> one relevance logit each.

A cross-encoder reads the query and the document together (one transformer pass per pair), so it
re-ranks a first stage's top K rather than searching a corpus. :class:`CrossScorer` loads a standard
Hugging Face sequence-classification folder with ``num_labels=1`` (``config.json``,
``model.safetensors`` or sharded safetensors, tokenizer files), as
``sentence_transformers.CrossEncoder(...).save_pretrained(folder, safe_serialization=True)`` or
``transformers`` ``save_pretrained`` writes it; published ones such as
``cross-encoder/ms-marco-MiniLM-L6-v2`` or ``ncbi/MedCPT-Cross-Encoder`` load by folder, or by hub
name when online (or cached). Weights load from safetensors only: a folder holding only
``pytorch_model.bin`` (a pickle) is refused, with how to convert it.

Precision ``"auto"``: bf16 on a CUDA GPU that supports it; on a CPU, bf16 autocast when the CPU
does bf16 natively (AVX512-BF16 or AMX), else fp32 (emulated bf16 is slower than fp32). Measured
here (2 cores, AVX512-BF16): MiniLM-L6 + head, 256 tokens, bf16 scored 35-38 pairs/s against
fp32's 20-23 (benchmarks/cross_encoder.py has the per-relation figures).

Like the rest of :mod:`retrievers`, this module knows texts only: nothing about KBs or entities.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.errors import RetrieverError, unknown_name

__all__ = ["CROSS_PRECISIONS", "CrossScorer", "cpu_has_native_bf16", "cross_weights_fingerprint",
           "is_cross_encoder_folder", "resolve_cross_precision"]

logger = logging.getLogger(__name__)

CROSS_PRECISIONS = ("auto", "fp32", "bf16")
_SAFETENSORS = ("model.safetensors", "model.safetensors.index.json")
_PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.bin", "model.pt")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX), as oneDNN reports it."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_cross_precision(precision: str, device: str) -> str:
    """Decide the precision to score with.

    Args:
        precision: ``"auto"``, ``"fp32"`` or ``"bf16"``.
        device: ``"cpu"`` or ``"cuda"`` (``"cuda:N"``).

    Returns:
        ``"bf16"`` or ``"fp32"``.

    Raises:
        RetrieverError: An unknown precision, or bf16 asked for on a GPU without it.
    """
    import torch

    if precision not in CROSS_PRECISIONS:
        raise unknown_name("precision", precision, CROSS_PRECISIONS)
    cuda = device.startswith("cuda")
    if precision == "fp32":
        return "fp32"
    if cuda and not torch.cuda.is_bf16_supported():
        if precision == "bf16":
            raise RetrieverError(
                f"precision 'bf16' asked for, but GPU {torch.cuda.get_device_name()} lacks bf16; "
                "use precision 'fp32' or 'auto'")
        return "fp32"
    if not cuda and not cpu_has_native_bf16():
        if precision == "bf16":
            logger.warning("this CPU has no native bf16 (AVX512-BF16 or AMX): bf16 autocast is "
                           "emulated and usually slower than fp32")
            return "bf16"
        return "fp32"
    return "bf16"


def is_cross_encoder_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds a sequence-classification config with one label (a cross-encoder).

    A sentence-transformers bi-encoder folder (its ``config.json`` is a bare encoder) is never
    one; a sentence-transformers ``CrossEncoder`` folder (``modules.json`` beside a
    sequence-classification ``config.json``) is.
    """
    path = Path(folder)
    config_file = path / "config.json"
    if not config_file.is_file():
        return False
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    architectures = config.get("architectures") or []
    one_label = config.get("num_labels", len(config.get("id2label") or {}) or None) == 1
    return one_label and any(str(a).endswith("ForSequenceClassification") for a in architectures)


def _weight_files(path: Path) -> list[Path]:
    """The safetensors weight files of a local folder (one file, or the shards of an index)."""
    single = path / "model.safetensors"
    if single.is_file():
        return [single]
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"]
                                .values()))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, AttributeError) as exc:
            raise RetrieverError(f"{index} is not a safetensors index ({exc}); re-save the "
                                 "model with save_pretrained(folder, safe_serialization=True)"
                                 ) from exc
        return [path / s for s in shards]
    return []


def cross_weights_fingerprint(folder: str | Path) -> str:
    """sha256 over a local folder's safetensors weight files, first 16 hex digits.

    Raises:
        RetrieverError: The folder holds no safetensors weights.
    """
    path = Path(folder)
    files = _weight_files(path)
    if not files:
        raise _no_safetensors(path)
    digest = hashlib.sha256()
    for file in files:
        with file.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def _no_safetensors(path: Path) -> RetrieverError:
    pickles = [p for p in _PICKLES if (path / p).is_file()]
    found = (f"it holds only {', '.join(pickles)} (pickled weights, never loaded here)"
             if pickles else f"it holds {sorted(p.name for p in path.iterdir())[:8]}"
             if path.is_dir() else "it does not exist")
    return RetrieverError(
        f"cross-encoder folder {path} has no safetensors weights ({' or '.join(_SAFETENSORS)}): "
        f"{found}. Convert it once where you trust the file: load it with transformers "
        "(AutoModelForSequenceClassification.from_pretrained(folder)) and call "
        "save_pretrained(folder, safe_serialization=True)")


class CrossScorer:
    """A loaded cross-encoder: :meth:`score` gives one raw logit per (query, document).

    Build with :meth:`load`. Documents are scored in length-sorted batches (less padding); logits
    come back in input order as float32. Scoring is deterministic (eval mode, no dropout).

    Attributes:
        folder: The folder (or hub name) it was loaded from.
        fingerprint: Stable id of the loaded weights (sha256 of the safetensors, 16 hex digits;
            for a hub name, the hub commit when known).
        device: ``"cpu"`` or ``"cuda"``.
        precision: ``"bf16"`` or ``"fp32"``, as used.
        max_length: Tokens kept per (query, document) pair.
    """

    def __init__(self, model: Any, tokenizer: Any, *, folder: str, fingerprint: str, device: str,
                 precision: str, max_length: int) -> None:
        self._model = model
        self._tokenizer = tokenizer
        self.folder = folder
        self.fingerprint = fingerprint
        self.device = device
        self.precision = precision
        self.max_length = max_length

    @classmethod
    def load(cls, folder: str | Path, *, device: str | None = None, precision: str = "auto",
             max_length: int = 256) -> CrossScorer:
        """Load a cross-encoder folder (or hub name) for scoring.

        Args:
            folder: A sequence-classification folder with ``num_labels=1`` and safetensors
                weights, or a hub name (needs the network or the hub cache).
            device: ``"cpu"``, ``"cuda"``; ``None`` for CUDA when torch sees a GPU, else CPU.
            precision: ``"auto"``, ``"fp32"`` or ``"bf16"`` (module docstring).
            max_length: Tokens kept per pair (query first, the document cut to fit).

        Returns:
            The scorer.

        Raises:
            RetrieverError: Missing folder, no safetensors weights, not a one-label
                sequence-classification model, a bad ``max_length`` or device.
        """
        import torch

        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 8:
            raise RetrieverError(f"max_length must be an integer >= 8 tokens, got {max_length!r}")
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise RetrieverError(f"device {device!r} asked for, but torch sees no CUDA GPU; "
                                 "use 'cpu' or leave device unset")
        if not (device == "cpu" or device.startswith("cuda")):
            raise RetrieverError(f"device must be 'cpu' or 'cuda', got {device!r}")
        used = resolve_cross_precision(precision, device)
        path = Path(folder).expanduser()
        local = path.is_dir()
        if local:
            fingerprint = cross_weights_fingerprint(path)
        elif path.exists() or str(folder).startswith((".", "/", "~")):
            raise RetrieverError(f"cross-encoder folder {path} does not exist (or is not a "
                                 "folder); give a folder written by save_pretrained or a hub "
                                 "name such as cross-encoder/ms-marco-MiniLM-L6-v2")
        model, tokenizer = _load_hf(str(path) if local else str(folder))
        if not local:
            fingerprint = str(getattr(model.config, "_commit_hash", None) or folder)[:16]
        if int(getattr(model.config, "num_labels", 0)) != 1:
            raise RetrieverError(
                f"{folder} is a sequence-classification model with {model.config.num_labels} "
                "labels; a cross-encoder here gives one relevance logit (num_labels=1)")
        model.to(device)
        if used == "bf16" and device.startswith("cuda"):
            model.to(torch.bfloat16)
        model.eval()
        logger.info("cross-encoder %s loaded on %s (%s, %d tokens, weights %s)", folder, device,
                    used, max_length, fingerprint)
        return cls(model, tokenizer, folder=str(folder), fingerprint=fingerprint, device=device,
                   precision=used, max_length=max_length)

    def save(self, folder: str | Path) -> Path:
        """Write the model (fp32 safetensors) and tokenizer to ``folder``; returns it."""
        import torch

        out = Path(folder)
        model = self._model.to(torch.float32) if self.precision == "bf16" and \
            self.device.startswith("cuda") else self._model
        model.save_pretrained(out, safe_serialization=True)
        self._tokenizer.save_pretrained(out)
        return out

    def _autocast(self) -> Any:
        import torch

        if self.precision == "bf16" and self.device == "cpu":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def score(self, query: str, documents: Sequence[str], *, batch_size: int = 16) -> np.ndarray:
        """Score each document against ``query``.

        Args:
            query: The query text.
            documents: Document texts (title + abstract), any number.
            batch_size: Pairs per forward pass.

        Returns:
            float32 array ``(len(documents),)`` of raw logits, in input order (higher: more
            relevant).

        Raises:
            RetrieverError: An empty query, a non-text document, a bad ``batch_size``.
        """
        if not isinstance(query, str) or not query.strip():
            raise RetrieverError(f"the query must be non-empty text, got {query!r}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise RetrieverError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        docs = list(documents)
        for i, doc in enumerate(docs):
            if not isinstance(doc, str):
                raise RetrieverError(f"document {i} must be text (title + abstract), got "
                                     f"{type(doc).__name__}")
        return self.score_pairs([(query, d) for d in docs], batch_size=batch_size)

    def score_pairs(self, pairs: Sequence[tuple[str, str]], *, batch_size: int = 16
                    ) -> np.ndarray:
        """Score (query, document) pairs of any queries; float32 logits in input order."""
        import torch

        out = np.zeros(len(pairs), dtype=np.float32)
        if not pairs:
            return out
        order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][1]))  # longest first
        with torch.inference_mode(), self._autocast():
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                batch = self._tokenizer([pairs[i][0] for i in chunk],
                                        [pairs[i][1] or " " for i in chunk], padding=True,
                                        truncation="longest_first", max_length=self.max_length,
                                        return_tensors="pt").to(self.device)
                logits = self._model(**batch).logits  # (batch, 1)
                out[chunk] = logits[:, 0].float().cpu().numpy()
        return out


def _load_hf(name: str) -> tuple[Any, Any]:
    """Model and tokenizer, safetensors only; errors name what to fix."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        model = AutoModelForSequenceClassification.from_pretrained(name, use_safetensors=True)
    except OSError as exc:
        if Path(name).is_dir():
            raise _no_safetensors(Path(name)) from exc
        raise RetrieverError(
            f"cannot load cross-encoder {name!r} with safetensors weights ({exc}). Offline, give "
            "a local folder; a hub model that ships only pytorch_model.bin must be converted "
            "once (save_pretrained(folder, safe_serialization=True))") from exc
    except ValueError as exc:
        raise RetrieverError(f"{name} is not a sequence-classification model ({exc}); give a "
                             "cross-encoder folder (config.json with num_labels=1)") from exc
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise RetrieverError(f"{name} has no usable tokenizer files ({exc}); save the "
                             "tokenizer into the folder with tokenizer.save_pretrained") from exc
    return model, tokenizer
