"""LoRA adapters through peft for sentence-transformers models: add one for training, merge it
into the base weights so a saved model needs no peft (BioHiCL's training, ``kbcurate models
import`` of adapter checkpoints).

Uses sentence-transformers' ``model.add_adapter(LoraConfig(...))`` (transformers' PEFT
integration, no ``PeftModel`` wrapper): the model stays a ``SentenceTransformer`` and the trainer
writes adapter-only checkpoints, whose ``adapter_config.json`` names the base model's path.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any

from retrievers.errors import RetrieverError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

DEFAULT_LORA_TARGETS = ("query", "value")
_LORA_PREFIX = "lora_"


def adapter_names(model: SentenceTransformer) -> list[str]:
    """Names of the PEFT adapters attached to the model's transformer (empty: none)."""
    body = model.transformers_model
    if body is None or not getattr(body, "_hf_peft_config_loaded", False):
        return []
    return list(getattr(body, "peft_config", {}) or {})


def add_lora(model: SentenceTransformer, rank: int = 8, alpha: float = 16, dropout: float = 0.1,
             targets: Sequence[str] = DEFAULT_LORA_TARGETS) -> int:
    """Attach a fresh LoRA adapter (in place) and freeze every other weight.

    Uses sentence-transformers' ``model.add_adapter(LoraConfig(...))`` (transformers' PEFT
    integration, no ``PeftModel`` wrapper), so the model stays a ``SentenceTransformer`` and the
    trainer saves adapter-only checkpoints (see the module docstring). Parameters outside the
    adapter, modules after the transformer included, are frozen.

    Args:
        model: The bi-encoder; its first module must be a transformers model.
        rank: LoRA rank ``r``.
        alpha: LoRA ``alpha`` (scale ``alpha / r``).
        dropout: Dropout on the adapter's input (training only).
        targets: Names of the linear layers to adapt (BERT: ``query``, ``key``, ``value``,
            ``dense``).

    Returns:
        The number of trainable parameters.

    Raises:
        RetrieverError: A bad parameter, a model that already has an adapter or none that PEFT
            supports, or targets that match no layer.
    """
    from peft import LoraConfig

    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise RetrieverError(f"LoRA rank must be a positive integer (e.g. 8), got {rank!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, Real) or not alpha > 0:
        raise RetrieverError(f"LoRA alpha must be a positive number (e.g. 16), got {alpha!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, Real) or not 0 <= dropout < 1:
        raise RetrieverError(f"LoRA dropout must be a number in [0, 1), got {dropout!r}")
    targets = [targets] if isinstance(targets, str) else list(targets)
    if not targets or not all(isinstance(t, str) and t for t in targets):
        raise RetrieverError(f"LoRA targets must be layer names such as ('query', 'value'), got "
                             f"{targets!r}")
    if adapter_names(model):
        raise RetrieverError(f"the model already has adapter(s) {adapter_names(model)}; merge "
                             "them with merge_lora(model) first or start from the base model")
    config = LoraConfig(r=rank, lora_alpha=float(alpha), lora_dropout=float(dropout),
                        target_modules=targets, bias="none")
    try:
        model.add_adapter(config)
    except ValueError as exc:
        raise RetrieverError(f"cannot add a LoRA adapter on {targets}: {exc}") from exc
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(_LORA_PREFIX in name)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    logger.info("LoRA r=%d alpha=%g dropout=%g on %s: %d of %d parameters trainable (%.3f %%)",
                rank, alpha, dropout, ", ".join(targets), trainable, total,
                100.0 * trainable / total)
    return trainable


def merge_lora(model: SentenceTransformer) -> SentenceTransformer:
    """Fold the LoRA adapter into the base weights (in place) and drop every trace of PEFT.

    Afterwards ``model.save(folder)`` writes a plain model (``model.safetensors``, no
    ``adapter_config.json``) that loads without peft, and all parameters are trainable again, as
    in a freshly loaded model. A model without an adapter is returned unchanged, so this is safe
    as a ``finalize_model`` step. Works on a model from :func:`add_lora` and on one loaded from an
    adapter checkpoint.

    Args:
        model: The bi-encoder with one LoRA adapter.

    Returns:
        The same model object.

    Raises:
        RetrieverError: Several adapters (merging would silently drop the inactive ones), or the
            merge produced NaN/inf weights.
    """
    from peft.tuners.tuners_utils import BaseTunerLayer

    body = model.transformers_model
    names = adapter_names(model)
    layers: list[str] = []
    for name, module in [] if body is None else body.named_modules():
        if isinstance(module, BaseTunerLayer) and not any(name.startswith(f"{outer}.")
                                                          for outer in layers):
            layers.append(name)  # outermost tuner layers only
    if not names and not layers:
        return model
    if len(names) > 1:
        raise RetrieverError(f"the model has {len(names)} adapters ({', '.join(names)}); "
                             "merge_lora folds exactly one; delete the others with "
                             "model.delete_adapter")
    for name in layers:  # their lora_A/lora_B children go with them
        parent_name, _, child = name.rpartition(".")
        parent = body.get_submodule(parent_name) if parent_name else body
        layer = getattr(parent, child)
        try:
            layer.merge(safe_merge=True)
        except ValueError as exc:
            raise RetrieverError(f"merging the adapter into {name} failed: {exc}") from exc
        setattr(parent, child, layer.get_base_layer())
    if hasattr(body, "peft_config"):
        del body.peft_config
    body._hf_peft_config_loaded = False
    # Loading an adapter checkpoint records PEFT key renamings ("base_model.model." prefix, lora
    # names) that save_pretrained would otherwise reverse onto the merged weights.
    conversions = getattr(body, "_weight_conversions", None)
    if conversions:
        body._weight_conversions = [c for c in conversions if not _is_peft_conversion(c)]
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    logger.info("merged LoRA adapter %s into %d layers", names[0] if names else "(unnamed)",
                len(layers))
    return model


def _is_peft_conversion(conversion: Any) -> bool:
    patterns = [*getattr(conversion, "source_patterns", []),
                *getattr(conversion, "target_patterns", [])]
    return any("base_model.model" in str(p) or _LORA_PREFIX in str(p) for p in patterns)
