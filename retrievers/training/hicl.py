"""BioHiCL (Lan et al.): learn the MeSH hierarchy with a label-similarity loss, LoRA on the encoder.

Each training text (an abstract) has a row of an L2-normalised, depth-weighted multi-hot label
matrix (built by the caller, e.g. ``curation.training.recipes.biohicl.mesh_labels``). Inside a
batch, ``SimE(i, j)`` is the cosine of the embeddings and ``SimL(i, j)`` the cosine of the label
rows; a pair is a *positive* when ``SimL > beta`` and a *negative* when ``SimL = 0`` (no shared
label).

- ``L_mse`` = mean over positive pairs ``(i, j), i != j`` of ``(SimE - SimL)^2`` (the paper writes
  a sum; TRAINING.md section 3 uses the mean).
- ``L_con`` (``variant="printed"``, default) = mean over positive pairs ``(i, i+)`` of
  ``-[log SimL(i, i+) + SimE(i, i+) - logsumexp_{j: SimL(i, j) = 0} SimE(i, j)]``. As printed the
  weight sits inside the log, so it is a constant with no gradient, there is no temperature and the
  positive is missing from the denominator.
- ``variant="tempered"``: ``-SimL(i, i+) * log(e^{SimE+/tau} / (e^{SimE+/tau} + sum_neg
  e^{SimE-/tau}))``, averaged the same way.
- ``L = L_mse + lam * L_con`` (beta 0.3, lam 0.1 in the paper).

Anchors lacking a positive or a negative in the batch are skipped; documents whose label row is
all zero (no label) are neither positives nor negatives of anyone. When no pair qualifies, a term
is 0, still attached to the graph so ``backward`` works.

:class:`HierarchyBatchSampler` builds batches that each hold positive pairs (it lives in
:mod:`retrievers.training.hicl_sampler`, with :func:`hierarchy_batch_sampler`; both are
re-exported here); the LoRA adapter that is trained and folded back before saving lives in
:mod:`retrievers.training.lora`.

Checkpoints written while an adapter is attached hold the adapter only (``adapter_config.json``,
``adapter_model.safetensors``, the sentence-transformers configs): ``adapter_config.json`` names
the base model (``base_model_name_or_path``), which must still be there (folder or cached hub
name) to load a checkpoint; ``SentenceTransformer(checkpoint)`` then attaches the adapter itself
(peft installed). :func:`merge_lora` works on such a loaded model too, and the folder it saves is a
plain model.

Like the rest of :mod:`retrievers.training`, this module imports :mod:`retrievers` and third-party
libraries only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import StrEnum
from numbers import Real
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from retrievers.errors import RetrieverError, unknown_name
from retrievers.training.hicl_sampler import (
    HierarchyBatchSampler,
    HierarchyBatchSamplerFactory,
    hierarchy_batch_sampler,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["HiCLLoss", "HiCLVariant", "HierarchyBatchSampler", "HierarchyBatchSamplerFactory",
           "hicl_loss", "hierarchy_batch_sampler"]

DEFAULT_BETA = 0.3
DEFAULT_LAMBDA = 0.1
DEFAULT_TAU = 0.05


class HiCLVariant(StrEnum):
    """Form of the contrastive term (see the module docstring)."""

    PRINTED = "printed"
    TEMPERED = "tempered"

    @classmethod
    def coerce(cls, value: HiCLVariant | str) -> HiCLVariant:
        """Turn a plain string into a member.

        Raises:
            RetrieverError: Unknown name; the message lists the options.
        """
        try:
            return cls(value)
        except ValueError:
            raise unknown_name("HiCL variant", value, [m.value for m in cls]) from None


def _check_params(beta: object, lam: object, tau: object) -> tuple[float, float, float]:
    for name, value, ok, rule in (
            ("beta", beta, lambda v: 0.0 <= v < 1.0, "in [0, 1) (the paper: 0.3)"),
            ("lam", lam, lambda v: v >= 0.0, ">= 0 (the paper: 0.1)"),
            ("tau", tau, lambda v: v > 0.0, "> 0 (e.g. 0.05)")):
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) \
                or not ok(float(value)):
            raise RetrieverError(f"{name} must be a number {rule}, got {value!r}")
    return float(beta), float(lam), float(tau)  # type: ignore[arg-type]


def hicl_loss(emb: Tensor, label_rows: Tensor, beta: float = DEFAULT_BETA,
              lam: float = DEFAULT_LAMBDA, variant: HiCLVariant | str = HiCLVariant.PRINTED,
              tau: float = DEFAULT_TAU) -> tuple[Tensor, Tensor, Tensor]:
    """The BioHiCL loss of one batch.

    Computed in float32 at least (also under bf16 autocast). Label rows are re-normalised, so
    unnormalised multi-hot rows work too; an all-zero row marks a document without labels.

    Args:
        emb: Embeddings, shape (batch, dim).
        label_rows: Label rows of the same documents, shape (batch, labels).
        beta: ``SimL`` above which a pair is positive.
        lam: Weight of the contrastive term.
        variant: ``"printed"`` or ``"tempered"``.
        tau: Temperature of the tempered variant (unused by the printed one).

    Returns:
        ``(total, mse, con)`` scalars; ``total = mse + lam * con``.

    Raises:
        RetrieverError: Shapes that do not match, or a bad parameter.
    """
    kind = HiCLVariant.coerce(variant)
    beta, lam, tau = _check_params(beta, lam, tau)
    if emb.dim() != 2 or label_rows.dim() != 2 or emb.shape[0] != label_rows.shape[0]:
        raise RetrieverError(
            f"hicl_loss needs embeddings (batch, dim) and label rows (batch, labels) of the same "
            f"batch, got shapes {tuple(emb.shape)} and {tuple(label_rows.shape)}")
    with torch.autocast(device_type=emb.device.type, enabled=False):  # fp32 even under bf16
        return _hicl_terms(emb, label_rows, beta, lam, kind, tau)


def _hicl_terms(emb: Tensor, label_rows: Tensor, beta: float, lam: float, kind: HiCLVariant,
                tau: float) -> tuple[Tensor, Tensor, Tensor]:
    dtype = torch.promote_types(emb.dtype, torch.float32)
    e = F.normalize(emb.to(dtype), dim=-1)
    sim_e = e @ e.T  # (batch, batch)
    with torch.no_grad():
        y = label_rows.to(device=emb.device, dtype=dtype)
        labelled = y.abs().sum(dim=-1) > 0  # (batch,)
        y = F.normalize(y, dim=-1)
        sim_l = y @ y.T
        n = emb.shape[0]
        valid = labelled[:, None] & labelled[None, :] & ~torch.eye(n, dtype=torch.bool,
                                                                     device=emb.device)
        positive = valid & (sim_l > beta)
        negative = valid & (sim_l <= 0.0)
    zero = sim_e.sum() * 0.0  # 0 attached to the graph
    mse = ((sim_e - sim_l)[positive] ** 2).mean() if positive.any() else zero
    anchors = positive.any(dim=1) & negative.any(dim=1)
    if not anchors.any():
        return mse + lam * zero, mse, zero
    s = sim_e[anchors]  # (anchors, batch)
    pos, neg, sl = positive[anchors], negative[anchors], sim_l[anchors]
    if kind is HiCLVariant.PRINTED:
        lse_neg = torch.logsumexp(s.masked_fill(~neg, float("-inf")), dim=1, keepdim=True)
        terms = -(torch.log(sl) + s - lse_neg)  # log SimL is finite on positives (SimL > beta)
    else:
        logits = s / tau
        lse_neg = torch.logsumexp(logits.masked_fill(~neg, float("-inf")), dim=1, keepdim=True)
        log_prob = logits - torch.logaddexp(logits, lse_neg)
        terms = -sl * log_prob
    con = terms[pos].mean()
    return mse + lam * con, mse, con


class HiCLLoss(nn.Module):
    """BioHiCL's ``L_mse + lam * L_con`` for sentence-transformers' trainer.

    Inputs:
        +--------------------------+----------------------------------------------------------+
        | Texts                    | Labels                                                   |
        +==========================+==========================================================+
        | one column (abstracts)   | the row of each text in ``label_matrix`` (an int)        |
        +--------------------------+----------------------------------------------------------+

    Use :func:`hierarchy_batch_sampler` so that every batch holds positive pairs.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformer
            from sentence_transformers.sentence_transformer import (
                SentenceTransformerTrainer, SentenceTransformerTrainingArguments)

            model = SentenceTransformer("path/to/model")
            add_lora(model)
            data = Dataset.from_dict({"text": abstracts, "label": list(range(len(abstracts)))})
            args = SentenceTransformerTrainingArguments(
                output_dir="out", batch_sampler=hierarchy_batch_sampler(partners))
            trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data,
                                                 loss=HiCLLoss(model, label_matrix))
            trainer.train()
            merge_lora(model).save("model")

    Args:
        model: The bi-encoder.
        label_matrix: Label rows indexed by the ``label`` column: a dense torch or numpy float
            array or a scipy sparse matrix (kept sparse; only a batch's rows are densified).
        beta: Positive threshold on ``SimL`` (0.3).
        lam: Weight of the contrastive term (0.1).
        variant: ``"printed"`` (default) or ``"tempered"``.
        tau: Temperature of the tempered variant.

    Raises:
        RetrieverError: A bad parameter or a label matrix that is not 2-D numbers.
    """

    def __init__(self, model: SentenceTransformer, label_matrix: Any, beta: float = DEFAULT_BETA,
                 lam: float = DEFAULT_LAMBDA, variant: HiCLVariant | str = HiCLVariant.PRINTED,
                 tau: float = DEFAULT_TAU) -> None:
        super().__init__()
        self.model = model
        self.variant = HiCLVariant.coerce(variant)
        self.beta, self.lam, self.tau = _check_params(beta, lam, tau)
        self.label_matrix = _as_label_matrix(label_matrix)
        #: ``{"mse": ..., "con": ...}`` of the last batch, detached, for logging.
        self.last_components: dict[str, float] = {}

    @property
    def num_rows(self) -> int:
        """Number of label rows."""
        return int(self.label_matrix.shape[0])

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor) -> Tensor:
        """Embed the batch's texts and compute the loss.

        Args:
            sentence_features: ``[text features]`` from the data collator (one text column).
            labels: Label-matrix row of each text, shape (batch,).

        Returns:
            The scalar loss.

        Raises:
            RetrieverError: Not exactly one text column, or labels that are not row numbers.
        """
        features = list(sentence_features)
        if len(features) != 1:
            raise RetrieverError(f"HiCLLoss takes one text column (the abstract) and a label "
                                 f"column of row numbers, got {len(features)} text columns")
        embeddings = self.model(features[0])["sentence_embedding"]
        rows = self.label_rows(labels, embeddings.device)
        total, mse, con = hicl_loss(embeddings, rows, self.beta, self.lam, self.variant,
                                    self.tau)
        self.last_components = {"mse": float(mse.detach()), "con": float(con.detach())}
        return total

    def label_rows(self, labels: Tensor, device: torch.device | str) -> Tensor:
        """The dense label rows of a batch, float32 on ``device``.

        Raises:
            RetrieverError: Labels that are not integers in ``[0, num_rows)``.
        """
        index = labels.detach().reshape(-1).cpu()
        if index.is_floating_point():
            if not torch.equal(index, index.round()):
                raise RetrieverError("HiCLLoss labels must be label-matrix row numbers (ints), "
                                     "got fractional values")
        index = index.long()
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= self.num_rows):
            raise RetrieverError(
                f"HiCLLoss label rows must be in [0, {self.num_rows}), got "
                f"{int(index.min())}..{int(index.max())}; the label column holds each text's "
                "row of the label matrix")
        matrix = self.label_matrix
        if isinstance(matrix, Tensor):
            rows = matrix[index]
        else:  # scipy sparse: densify the batch's rows only
            rows = torch.from_numpy(np.asarray(matrix[index.numpy()].toarray()))
        return rows.to(device=device, dtype=torch.float32)

    def get_config_dict(self) -> dict[str, Any]:
        """Hyperparameters written to the model card."""
        return {"beta": self.beta, "lam": self.lam, "variant": self.variant.value,
                "tau": self.tau, "label_rows": self.num_rows,
                "labels": int(self.label_matrix.shape[1])}

    @property
    def citation(self) -> str:
        """Reference shown on the model card."""
        return ("@misc{lan-biohicl,\n  title = {{BioHiCL}: hierarchical contrastive learning "
                "with {MeSH} labels (L_mse + lambda L_con)},\n  author = {Lan and others},\n"
                "  note = {title abridged; see the project's TRAINING.md section 3}\n}")


def _as_label_matrix(label_matrix: Any) -> Any:
    """A 2-D float tensor (dense input) or a scipy CSR matrix (sparse input)."""
    if hasattr(label_matrix, "tocsr") and hasattr(label_matrix, "nnz"):  # scipy sparse
        matrix = label_matrix.tocsr().astype(np.float32)
    else:
        try:
            matrix = torch.as_tensor(np.asarray(label_matrix) if not isinstance(
                label_matrix, Tensor) else label_matrix).detach().float().cpu()
        except (TypeError, ValueError) as exc:
            raise RetrieverError(f"label_matrix must be a 2-D float array, tensor or scipy "
                                 f"sparse matrix, got {type(label_matrix).__name__}") from exc
    if len(matrix.shape) != 2 or matrix.shape[0] == 0:
        raise RetrieverError(f"label_matrix must be 2-D (rows x labels) with at least one row, "
                             f"got shape {tuple(matrix.shape)}")
    return matrix


# -- LoRA ---------------------------------------------------------------------------------------
