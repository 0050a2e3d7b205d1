"""BioHiCL's batches: every batch holds positive pairs (TRAINING.md section 3).

:class:`HierarchyBatchSampler` deals pairs of documents whose label rows are similar (``SimL >
beta``; the partner lists come from the caller, e.g. ``positive_partners`` of
``curation.training.recipes.biohicl.mesh_labels``) to the batches, so the loss of
:mod:`retrievers.training.hicl` has positives in every batch;
:func:`hierarchy_batch_sampler` wraps it as the picklable ``batch_sampler`` argument of
sentence-transformers' trainer. Moved out of :mod:`retrievers.training.hicl`, which re-exports
these names.

Like the rest of :mod:`retrievers.training`, this module imports :mod:`retrievers` and third-party
libraries only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from sentence_transformers.base.sampler import DefaultBatchSampler

from retrievers.errors import RetrieverError

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["HierarchyBatchSampler", "HierarchyBatchSamplerFactory", "hierarchy_batch_sampler"]

logger = logging.getLogger(__name__)


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
            of ``curation.training.recipes.biohicl.mesh_labels``, with the loss's beta).

    Returns:
        A picklable ``fn(dataset, batch_size, drop_last, valid_label_columns, generator, seed)``
        that builds a :class:`HierarchyBatchSampler`.
    """
    return HierarchyBatchSamplerFactory(partners)
