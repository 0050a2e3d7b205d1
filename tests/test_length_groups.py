"""Length-grouped training batches: every row once per epoch, similar lengths, seeded order."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from curation.training.benchmarks.train_speed import padding_share
from retrievers.errors import RetrieverError
from retrievers.training.length_groups import (
    LengthGroupedBatchSampler,
    length_grouped_batch_sampler,
    row_lengths,
)

LENGTHS = np.random.default_rng(0).integers(5, 300, size=1003).tolist()


def sampler(seed: int = 7, drop_last: bool = False, size: int = 10,
            lengths: list[int] = LENGTHS) -> LengthGroupedBatchSampler:
    return LengthGroupedBatchSampler(range(len(lengths)), size, drop_last, seed=seed,
                                     lengths=lengths)


def test_every_row_exactly_once_per_epoch_in_similar_length_batches() -> None:
    s = sampler()
    batches = list(s)
    assert len(batches) == len(s) == 101 and sorted(i for b in batches for i in b) == \
        list(range(1003))
    assert sorted(len(b) for b in batches)[0] == 3  # the one short batch
    random = np.random.default_rng(1).permutation(1003).tolist()
    shuffled = [random[i:i + 10] for i in range(0, 1003, 10)]
    assert padding_share([LENGTHS], batches) < 0.1 < 0.4 < padding_share([LENGTHS], shuffled)


def test_order_depends_only_on_seed_and_epoch() -> None:
    first, again, other_seed = sampler(), sampler(), sampler(seed=8)
    assert list(first) == list(again)
    assert list(first) != list(other_seed)
    again.set_epoch(1)
    epoch_two = list(again)
    assert epoch_two != list(first)
    assert sorted(map(sorted, epoch_two)) != sorted(map(sorted, first))  # new batches, not
    # only a new batch order
    first.set_epoch(1)
    assert list(first) == epoch_two


def test_drop_last_drops_the_short_batch() -> None:
    s = sampler(drop_last=True)
    batches = list(s)
    assert len(batches) == len(s) == 100 and {len(b) for b in batches} == {10}


def test_lengths_must_match_the_rows() -> None:
    with pytest.raises(RetrieverError, match="got 3 lengths for 1003 rows"):
        LengthGroupedBatchSampler(range(1003), 10, False, lengths=[1, 2, 3])


def test_factory_pickles_without_its_lengths() -> None:
    factory = length_grouped_batch_sampler(LENGTHS)
    built = factory(range(1003), batch_size=10, drop_last=False, valid_label_columns=["label"],
                    generator=None, seed=7)
    assert list(built) == list(sampler())
    restored = pickle.loads(pickle.dumps(factory))
    assert repr(restored) == "LengthGroupedBatchSamplerFactory(rows=1003)"
    with pytest.raises(RetrieverError, match="unpickled without its lengths"):
        restored(range(1003), batch_size=10, drop_last=False)


def test_row_lengths_count_tokens_of_the_text_columns(tiny_model_path: Path) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer

    data = Dataset.from_dict({"query": ["BRAF V600E", "EGFR"],
                              "document": ["melanoma responds to vemurafenib " * 20, "lung"],
                              "label": [[1.0, 0.0], [0.0, 1.0]]})
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_path))
    lengths = row_lengths(data, tokenizer, max_length=16)
    assert lengths[0] == len(tokenizer("BRAF V600E")["input_ids"]) + 16  # the document is cut
    assert lengths[1] < lengths[0]
    assert row_lengths(data, None, max_length=16) == [3 + 16, 2 + 2]  # characters / 4 + 1
    with pytest.raises(RetrieverError, match="length grouping needs text columns"):
        row_lengths(Dataset.from_dict({"label": [1.0]}), None, 8)


def test_train_speed_command_prints_each_setting(tmp_workspace, fixtures_dir: Path,
                                                 tiny_model_path: Path, capsys) -> None:
    from curation.cli.main import main
    from curation.store.importer import import_file

    import_file(tmp_workspace, "docs", "jsonl", fixtures_dir / "docs_sample.jsonl",
                progress=False)
    assert main(["train-speed", "-w", str(tmp_workspace.root), "-q", "--base",
                 str(tiny_model_path), "--rows", "16", "--steps", "1", "--batch-size", "4",
                 "--max-seq-length", "32", "--precision", "fp32"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines[:2]] == [["measured", "fp32", "random:"],
                                                         ["measured", "fp32", "grouped:"]]
    assert lines[2].startswith("training speed: ") and "batch 4, 32 tokens, 16 pairs" in lines[2]
    assert lines[3].startswith("  padding: ") and "with length-grouped batches" in lines[3]
    assert [line.split()[:2] for line in lines[5:]] == [["fp32", "random"], ["fp32", "grouped"]]
    assert lines[5].endswith("1.00x")


def test_train_flag_reaches_the_edel_config_and_other_recipes_refuse_it() -> None:
    from curation.cli.main import build_parser
    from curation.cli.train_commands import edel_options, train_values
    from curation.training.recipes import recipe_options
    from kb_sources.errors import CurationError

    values = train_values(build_parser().parse_args(["train", "--schema", "PO",
                                                     "--group-by-length"]))
    assert values == {"group_by_length": True}
    assert recipe_options("edel", values).train_config().group_by_length is True
    assert recipe_options("edel", {}).train_config().group_by_length is False  # the default
    with pytest.raises(CurationError, match="Unknown bica training option.s. group_by_length"):
        recipe_options("bica", values)
    retrain = build_parser().parse_args(["retrain", "--schema", "PO", "--group-by-length"])
    assert edel_options(retrain).group_by_length is True
