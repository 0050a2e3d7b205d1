"""Data and report of the training-speed benchmark (``kbcurate train-speed``).

The pairs are EDEL-shaped (a short templated query, a ``"{title} [SEP] {abstract}"`` document,
positive or negative with margin classes 0 / 1) over a seeded sample of the workspace's own
abstracts, so the token lengths, and with them the padding that length grouping saves, are those
of the corpus a real run trains on. Timing is :func:`retrievers.training.trainer.
compare_training_speed`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from curation.search.indexing import corpus_docs
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

#: EDEL's document format (the one trained model versions record).
DOCUMENT_FORMAT = "{title} [SEP] {abstract}"


def speed_pairs(ws: Workspace, rows: int, *, seed: int = 42) -> list[Any]:
    """``rows`` training pairs over a seeded sample of the workspace's documents.

    Raises:
        CurationError: The workspace has no documents.
    """
    from retrievers.training.config import PairExample

    docs = corpus_docs(ws, DOCUMENT_FORMAT)
    if not docs:
        raise CurationError("the workspace has no documents to time training on; import some "
                            "(kbcurate import docs ...) or use the demo workspace")
    rng = random.Random(seed)
    sample = [docs[rng.randrange(len(docs))][1] for _ in range(rows)]
    pairs = []
    for i, text in enumerate(sample):
        topic = " ".join(text.split()[:4]).rstrip(".,;:")
        pairs.append(PairExample(f"Genes associated with {topic}?", text, i % 2 == 0,
                                 0.0 if i % 2 == 0 else 1.0, "speed"))
    return pairs


def padding_share(lengths: Sequence[Sequence[int]], batches: Sequence[Sequence[int]]) -> float:
    """Share of padded token slots: each text column is padded to its longest text per batch.

    Args:
        lengths: Per text column, tokens per row.
        batches: Row indices per batch.
    """
    real = padded = 0
    for column in lengths:
        for batch in batches:
            tokens = [column[i] for i in batch]
            real += sum(tokens)
            padded += max(tokens) * len(tokens)
    return 1 - real / padded if padded else 0.0


def _padding(path: str, pairs: Sequence[Any], config: Any) -> tuple[float, float]:
    """Padding share of random and of length-grouped batches of ``pairs``."""
    import torch
    from transformers import AutoTokenizer

    from retrievers.training.length_groups import LengthGroupedBatchSampler

    tokenizer = AutoTokenizer.from_pretrained(path)
    lengths = [[len(ids) for ids in tokenizer([getattr(p, column) for p in pairs],
                                              truncation=True,
                                              max_length=config.max_seq_length)["input_ids"]]
               for column in ("query", "document")]
    size = config.batch_size
    generator = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(len(pairs), generator=generator).tolist()
    shuffled = [order[i:i + size] for i in range(0, len(order), size)]
    rows = [a + b for a, b in zip(*lengths, strict=True)]
    grouped = list(LengthGroupedBatchSampler(range(len(rows)), size, False, seed=config.seed,
                                             lengths=rows))
    return padding_share(lengths, shuffled), padding_share(lengths, grouped)


def speed_table(name: str, path: str, pairs: Sequence[Any], config: Any, steps: int,
                results: Sequence[Any]) -> list[str]:
    """The report lines of one base model: pairs/s per setting, as a ratio to fp32 random
    batches, and the padding share of random vs grouped batches."""
    reference = next((r.examples_per_second for r in results
                      if r.precision == "fp32" and not r.group_by_length), None)
    random_pad, grouped_pad = _padding(path, pairs, config)
    lines = [f"training speed: {name}, batch {config.batch_size}, {config.max_seq_length} tokens, "
             f"{len(pairs)} pairs, {steps} timed steps per setting",
             f"  padding: {random_pad:.0%} of token slots with random batches, "
             f"{grouped_pad:.0%} with length-grouped batches",
             f"  {'precision':<10}{'batches':<9}{'pairs/s':>9}{'vs fp32':>9}"]
    for r in results:
        ratio = f"{r.examples_per_second / reference:.2f}x" if reference else "-"
        lines.append(f"  {r.precision:<10}{'grouped' if r.group_by_length else 'random':<9}"
                     f"{r.examples_per_second:>9.1f}{ratio:>9}")
    return lines
