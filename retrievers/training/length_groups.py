"""Length-grouped training batches: rows of similar token length share a batch, so less padding.

sentence-transformers sorts texts by length when it *encodes*, but its trainer draws training
batches at random; a batch is padded to its longest text, so one long abstract makes every row
of the batch cost as much. Hugging Face's ``group_by_length`` (``train_sampling_strategy``) does
not reach ``SentenceTransformerTrainer``, which builds its own batch sampler; this module plugs
the same grouping (``transformers.trainer_pt_utils.get_length_grouped_indices``: a seeded random
permutation cut into mega-batches of 50 batches, each sorted by length) into the trainer's
``batch_sampler`` hook, then shuffles the order of the batches.

Every row is drawn exactly once per epoch; the order depends only on ``seed`` and the epoch, so a
resumed run sees the same batches. Use it for pointwise losses (EDEL's multi-margin loss): losses
with in-batch negatives would see batches of similar-length texts as negatives, and recipes with
their own sampler (BiCA, BioHiCL) keep theirs (:func:`retrievers.training.engine.train_model`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sentence_transformers.base.sampler import DefaultBatchSampler

from retrievers.errors import RetrieverError

if TYPE_CHECKING:
    import torch
    from datasets import Dataset

logger = logging.getLogger(__name__)

__all__ = ["LengthGroupedBatchSampler", "length_grouped_batch_sampler", "row_lengths"]


def row_lengths(dataset: Dataset, tokenizer: Any, max_length: int) -> list[int]:
    """Tokens per row: the sum over the text columns of each text's token count, cut at
    ``max_length`` as the model cuts it (the ``label`` column and other non-text columns are
    left out). Without a tokenizer, characters / 4 stand in for tokens."""
    columns = [c for c in dataset.column_names
               if getattr(dataset.features[c], "dtype", None) in ("string", "large_string")]
    if not columns:
        raise RetrieverError(f"length grouping needs text columns; the dataset has "
                             f"{dataset.column_names}")
    totals = [0] * len(dataset)
    for column in columns:
        texts = list(dataset[column])
        if tokenizer is None:
            counts = [min(len(t) // 4 + 1, max_length) for t in texts]
        else:
            ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
            counts = [len(i) for i in ids]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
    return totals


class LengthGroupedBatchSampler(DefaultBatchSampler):
    """Batches of rows of similar length, in a seeded random order (module docstring).

    Args:
        dataset: The training rows.
        batch_size: Rows per batch.
        drop_last: Drop the last, smaller batch.
        valid_label_columns: Unused (the trainer's signature).
        generator: Unused: the order comes from ``seed`` and the epoch.
        seed: Seed of the order.
        lengths: Tokens per row (:func:`row_lengths`), one per dataset row.

    Raises:
        RetrieverError: ``lengths`` does not have one entry per row.
    """

    def __init__(self, dataset: Dataset, batch_size: int, drop_last: bool,
                 valid_label_columns: list[str] | None = None,
                 generator: torch.Generator | None = None, seed: int = 0, *,
                 lengths: Sequence[int]) -> None:
        super().__init__(dataset, batch_size=batch_size, drop_last=drop_last,
                         valid_label_columns=valid_label_columns, generator=generator,
                         seed=seed)
        if len(lengths) != len(dataset):
            raise RetrieverError(f"length grouping got {len(lengths)} lengths for "
                                 f"{len(dataset)} rows; compute them with row_lengths(dataset)")
        self.lengths = list(lengths)

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        import torch
        from transformers.trainer_pt_utils import get_length_grouped_indices

        generator = torch.Generator()
        generator.manual_seed(int(self.seed or 0) * 1_000_003 + int(self.epoch))
        order = get_length_grouped_indices(self.lengths, self.batch_size, generator=generator)
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        for b in torch.randperm(len(batches), generator=generator).tolist():
            yield batches[b]


class LengthGroupedBatchSamplerFactory:
    """A picklable ``batch_sampler`` factory holding the row lengths.

    The trainer pickles its arguments into every checkpoint (``training_args.bin``): pickling keeps
    the number of rows only, and an unpickled factory refuses to build a sampler (resuming builds
    a new one, as :func:`retrievers.training.engine.train_model` does on every call).
    """

    def __init__(self, lengths: Sequence[int]) -> None:
        self.lengths: list[int] | None = list(lengths)
        self.rows = len(self.lengths)

    def __call__(self, dataset: Dataset, batch_size: int, drop_last: bool,
                 valid_label_columns: list[str] | None = None,
                 generator: torch.Generator | None = None, seed: int = 0
                 ) -> LengthGroupedBatchSampler:
        """Build the sampler (the signature sentence-transformers' trainer calls)."""
        if self.lengths is None:
            raise RetrieverError("this length-grouped sampler factory was unpickled without its "
                                 "lengths; build a new one with length_grouped_batch_sampler()")
        return LengthGroupedBatchSampler(dataset, batch_size, drop_last, valid_label_columns,
                                         generator, seed, lengths=self.lengths)

    def __getstate__(self) -> dict[str, Any]:
        return {"lengths": None, "rows": self.rows}

    def __repr__(self) -> str:
        return f"LengthGroupedBatchSamplerFactory(rows={self.rows})"


def length_grouped_batch_sampler(lengths: Sequence[int]) -> LengthGroupedBatchSamplerFactory:
    """The ``batch_sampler`` argument for ``SentenceTransformerTrainingArguments``.

    Args:
        lengths: Tokens per dataset row (:func:`row_lengths`).
    """
    return LengthGroupedBatchSamplerFactory(lengths)
