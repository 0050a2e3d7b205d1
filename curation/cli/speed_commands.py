"""``kbcurate bench train-speed``: training pairs/s for fp32 / bf16 x random / length-grouped
batches."""

from __future__ import annotations

import argparse

from curation.cli.common import workspace_path
from curation.store.workspace import Workspace
from curation.training.recipes.edel import EdelOptions


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``bench train-speed`` (EDEL's defaults for batch size and token limit); ``sub`` is the
    ``bench`` group's sub-parsers."""
    d = EdelOptions()
    p = sub.add_parser("train-speed", parents=[common],
                       help="training pairs/s: fp32 vs bf16 autocast, random vs length-grouped "
                            "batches (EDEL loss, workspace abstracts)")
    p.add_argument("--base", action="append", default=[], metavar="MODEL",
                   help="model to time (repeatable; default the packaged MiniLM): HF name, "
                        "folder or registry version")
    p.add_argument("--steps", type=int, default=5, help="timed optimizer steps per setting")
    p.add_argument("--rows", type=int, default=800,
                   help="training pairs in the epoch the batches are drawn from (default 800)")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--max-seq-length", type=int, default=d.max_seq_length)
    p.add_argument("--repeats", type=int, default=1,
                   help="rounds over all settings; the best of each is kept")
    p.add_argument("--precision", default="fp32,bf16", help="comma list of fp32, bf16")
    p.add_argument("--seed", type=int, default=d.seed)


def cmd_train_speed(args: argparse.Namespace) -> int:
    import os

    from curation.training.benchmarks.train_speed import speed_pairs, speed_table
    from curation.training.rounds import base_path
    from retrievers.training.config import TrainConfig
    from retrievers.training.trainer import compare_training_speed

    if args.quiet:  # also the trainer's own tqdm bars (model card widget examples)
        os.environ.setdefault("TQDM_DISABLE", "1")
    precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
    with Workspace.open(workspace_path(args)) as ws:
        pairs = speed_pairs(ws, args.rows, seed=args.seed)
        bases = [(name, base_path(ws, name)) for name in args.base or ["all-MiniLM-L6-v2"]]
    config = TrainConfig(batch_size=args.batch_size, max_seq_length=args.max_seq_length,
                         seed=args.seed)
    for name, path in bases:
        results = compare_training_speed(
            path, pairs, config, args.steps, precisions=precisions, repeats=args.repeats,
            report=lambda r: print(f"  measured {r.precision} {_batches(r)}: "
                                   f"{r.examples_per_second:.1f} pairs/s", flush=True))
        print("\n".join(speed_table(name, path, pairs, config, args.steps, results)))
    return 0


def _batches(result: object) -> str:
    return "grouped" if getattr(result, "group_by_length", False) else "random"
