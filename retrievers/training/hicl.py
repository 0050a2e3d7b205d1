"""BioHiCL (Lan et al.): learn the MeSH hierarchy with a label-similarity loss, LoRA on the encoder.

Each training text (an abstract) has a row of an L2-normalised, depth-weighted multi-hot label
matrix (built by the caller, e.g. ``curation.training.mesh_labels``). Inside a batch,
``SimE(i, j)`` is the cosine of the embeddings and ``SimL(i, j)`` the cosine of the label rows;
a pair is a *positive* when ``SimL > beta`` and a *negative* when ``SimL = 0`` (no shared label).

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

:class:`HierarchyBatchSampler` builds batches that each hold positive pairs; the LoRA adapter
that is trained and folded back before saving lives in :mod:`retrievers.training.lora`.

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

import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from enum import StrEnum
from numbers import Real
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers.base.sampler import DefaultBatchSampler
from torch import Tensor, nn

from retrievers.errors import RetrieverError, unknown_name

if TYPE_CHECKING:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer

__all__ = ["HiCLLoss", "HiCLVariant", "HierarchyBatchSampler", "HierarchyBatchSamplerFactory",
           "hicl_loss", "hierarchy_batch_sampler"]

logger = logging.getLogger(__name__)

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


# -- batches ------------------------------------------------------------------------------------

class HierarchyBatchSampler(DefaultBatchSampler):
    """Batches in which every batch holds positive pairs, each document at most once.

    Per epoch (seeded by ``(seed, epoch)``, so deterministic and different each epoch):

    1. Anchors that have partners are shuffled; each anchor not yet placed is paired with a random
       partner not yet placed. Pairs are disjoint.
    2. Batch sizes: ``drop_last``: ``len(dataset) // batch_size`` full batches; otherwise
       ``ceil(len(dataset) / batch_size)`` batches with sizes as even as possible (at most
       ``batch_size``), so no tiny last batch lacks room for a pair.
    3. Pairs are dealt to the batches in turn, as many as fit; the rest of each batch is filled
       with the remaining documents (unpaired ones, then pairs that did not fit, split up);
       each batch is shuffled.
    4. Only with fewer pairs than batches (tiny or sparse data): a batch left without a pair gets
       a pair placed elsewhere instead of two of its documents, which then sit out this epoch
       (logged).

    Every document appears once per epoch except in step 4; with ``drop_last`` the remainder sits
    out. ``__len__`` is the number of batches of step 2.

    Args:
        dataset: The training dataset; its label column (the first of ``valid_label_columns``
            present) holds each text's label row.
        batch_size: Maximum batch size (at least 2).
        drop_last: Only full batches.
        valid_label_columns: Label column candidates (the data collator's).
        generator: Unused (the order comes from ``seed`` and the epoch); accepted for the trainer.
        seed: Seed.
        partners: Per label row, the rows of its positive partners (``SimL > beta``).

    Raises:
        RetrieverError: No label column, a label row used twice or outside ``partners``, fewer
            than two texts, or no positive pair among the dataset's documents.
    """

    def __init__(self, dataset: Dataset, batch_size: int, drop_last: bool,
                 valid_label_columns: list[str] | None = None,
                 generator: torch.Generator | None = None, seed: int = 0, *,
                 partners: Sequence[np.ndarray | Sequence[int]]) -> None:
        super().__init__(dataset, batch_size=batch_size, drop_last=drop_last,
                         valid_label_columns=valid_label_columns, generator=generator, seed=seed)
        if batch_size < 2:
            raise RetrieverError(f"HierarchyBatchSampler needs batch_size >= 2 to put pairs in a "
                                 f"batch, got {batch_size}")
        rows = _label_column(dataset, valid_label_columns)
        n = len(rows)
        if n < 2:
            raise RetrieverError(f"HierarchyBatchSampler needs at least 2 texts, got {n}")
        index_of = np.full(len(partners), -1, dtype=np.int64)  # label row -> dataset index
        for i, row in enumerate(rows):
            if not 0 <= row < len(partners):
                raise RetrieverError(f"dataset row {i} has label row {row}, outside the "
                                     f"{len(partners)} partner lists")
            if index_of[row] >= 0:
                raise RetrieverError(f"label row {row} appears twice in the dataset (rows "
                                     f"{index_of[row]} and {i}); each document must be one text")
            index_of[row] = i
        self.n = n
        #: Per dataset index, the dataset indices of its positive partners.
        self.partners: list[np.ndarray] = []
        for i, row in enumerate(rows):
            mapped = index_of[np.asarray(partners[row], dtype=np.int64)]
            self.partners.append(mapped[(mapped >= 0) & (mapped != i)])
        if not any(len(p) for p in self.partners):
            raise RetrieverError(
                "no positive pair among the dataset's documents (no two share labels above "
                "beta): lower beta, add documents, or check the partner lists")
        if drop_last:
            full = n // batch_size
            self.sizes = [batch_size] * full
        else:
            count = -(-n // batch_size)
            base, extra = divmod(n, count)
            self.sizes = [base + 1] * extra + [base] * (count - extra)
        if not self.sizes:
            logger.warning("HierarchyBatchSampler: %d texts < batch_size %d with drop_last: no "
                           "batch", n, batch_size)

    def __len__(self) -> int:
        return len(self.sizes)

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng((int(self.seed or 0), int(self.epoch)))
        pairs, singles = self._pairs(rng)
        yield from self._batches(rng, pairs, singles)

    def _pairs(self, rng: np.random.Generator) -> tuple[list[tuple[int, int]], list[int]]:
        """Disjoint random (anchor, partner) pairs and the documents left over, shuffled."""
        placed = np.zeros(self.n, dtype=bool)
        pairs: list[tuple[int, int]] = []
        for anchor in rng.permutation(self.n).tolist():
            partners = self.partners[anchor]
            if placed[anchor] or not len(partners):
                continue
            pick = int(partners[rng.integers(len(partners))])
            if placed[pick]:
                free = partners[~placed[partners]]
                if not len(free):
                    continue
                pick = int(free[rng.integers(len(free))])
            placed[anchor] = placed[pick] = True
            pairs.append((anchor, pick))
        singles = [i for i in rng.permutation(self.n).tolist() if not placed[i]]
        return pairs, singles

    def _batches(self, rng: np.random.Generator, pairs: list[tuple[int, int]],
                 singles: list[int]) -> Iterator[list[int]]:
        count = len(self.sizes)
        if not count:
            return
        dealt: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        room = [size // 2 for size in self.sizes]
        open_batches = [b for b in range(count) if room[b]]
        leftover: list[int] = []
        turn = 0
        for pair in pairs:  # deal in turn to the batches that still have room for a pair
            if not open_batches:
                leftover.extend(pair)
                continue
            turn %= len(open_batches)
            b = open_batches[turn]
            dealt[b].append(pair)
            room[b] -= 1
            if room[b]:
                turn += 1
            else:
                open_batches.pop(turn)
        fill = iter(singles + leftover)
        batches = []
        for b, size in enumerate(self.sizes):
            batch = [i for pair in dealt[b] for i in pair]
            batch.extend(next(fill) for _ in range(size - len(batch)))
            batches.append(batch)
        placed_pairs = [pair for group in dealt for pair in group]
        for b, batch in enumerate(batches):
            if dealt[b] or len(batch) < 2:
                continue
            members = set(batch)
            candidates = [p for p in placed_pairs if p[0] not in members and p[1] not in members]
            if not candidates:
                continue
            pair = candidates[int(rng.integers(len(candidates)))]
            batch[-2:] = list(pair)
            dealt[b].append(pair)
            logger.debug("batch %d had no positive pair: borrowed pair %s", b, pair)
        for batch in batches:
            yield [batch[i] for i in rng.permutation(len(batch)).tolist()]


def _label_column(dataset: Dataset, valid_label_columns: list[str] | None) -> list[int]:
    """The label-row column of the dataset as ints."""
    names = list(getattr(dataset, "column_names", []) or [])
    for column in valid_label_columns or []:
        if column in names:
            values = dataset[column]
            try:
                rows = [int(v) for v in values]
            except (TypeError, ValueError) as exc:
                raise RetrieverError(f"label column {column!r} must hold label-row numbers "
                                     "(ints)") from exc
            if any(float(r) != float(v) for r, v in zip(rows, values, strict=True)):
                raise RetrieverError(f"label column {column!r} must hold label-row numbers "
                                     "(ints), got fractional values")
            return rows
    raise RetrieverError(f"HierarchyBatchSampler needs a label column of label-row numbers "
                         f"(one of {valid_label_columns}); the dataset has {names}")


class HierarchyBatchSamplerFactory:
    """A picklable ``batch_sampler`` factory holding the positive-partner lists.

    The trainer pickles its arguments into every checkpoint (``training_args.bin``); a closure
    cannot be pickled, and the partner lists (up to documents x partners ints) do not belong
    there: pickling keeps the number of rows only, and an unpickled factory refuses to build a
    sampler (pass the partners again, as resuming does anyway).

    Args:
        partners: Per label row, its positive partners.
    """

    def __init__(self, partners: Sequence[np.ndarray | Sequence[int]]) -> None:
        self.partners: list[np.ndarray | Sequence[int]] | None = list(partners)
        self.rows = len(self.partners)

    def __call__(self, dataset: Dataset, batch_size: int, drop_last: bool,
                 valid_label_columns: list[str] | None = None,
                 generator: torch.Generator | None = None, seed: int = 0
                 ) -> HierarchyBatchSampler:
        """Build the sampler (the signature sentence-transformers' trainer calls).

        Raises:
            RetrieverError: An unpickled factory (no partner lists), or see
                :class:`HierarchyBatchSampler`.
        """
        if self.partners is None:
            raise RetrieverError("this HierarchyBatchSampler factory was unpickled without its "
                                 "partner lists; build a new one with "
                                 "hierarchy_batch_sampler(partners)")
        return HierarchyBatchSampler(dataset, batch_size, drop_last, valid_label_columns,
                                     generator, seed, partners=self.partners)

    def __getstate__(self) -> dict[str, Any]:
        return {"partners": None, "rows": self.rows}

    def __repr__(self) -> str:
        return f"HierarchyBatchSamplerFactory(rows={self.rows})"


def hierarchy_batch_sampler(partners: Sequence[np.ndarray | Sequence[int]]
                            ) -> HierarchyBatchSamplerFactory:
    """The ``batch_sampler`` argument for ``SentenceTransformerTrainingArguments``.

    Args:
        partners: Per label row, its positive partners (e.g. ``positive_partners(labels, beta)``
            of ``curation.training.mesh_labels``, with the loss's beta).

    Returns:
        A picklable ``fn(dataset, batch_size, drop_last, valid_label_columns, generator, seed)``
        that builds a :class:`HierarchyBatchSampler`.
    """
    return HierarchyBatchSamplerFactory(partners)


# -- LoRA ---------------------------------------------------------------------------------------
