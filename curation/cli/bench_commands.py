"""``kbcurate bench match|speed|train|train-speed``: the developer benchmarks, under one command
(issue 44), so the top-level help lists the curator's commands.

* ``match``: recall/precision of entity matching against gold annotations (was ``match-bench``).
* ``speed``: encoding throughput and query latency; ``--backends`` compares encoding backends
  (was ``bench``).
* ``train``: train EDEL (and variants) per task and compare with BM25 on test (was
  ``train-bench``).
* ``train-speed``: training pairs/s per precision and batching (was ``train-speed``); parser and
  handler in :mod:`curation.cli.speed_commands`.

The old spellings are rewritten to these before parsing (:mod:`curation.cli.legacy`).
"""

from __future__ import annotations

import argparse

from curation.cli import speed_commands
from curation.cli.common import add_backend_args, workspace_path
from curation.cli.recipe_flags import add_recipe_flags
from curation.cli.train_commands import edel_options
from curation.store.workspace import Workspace

_OLD = ("old spellings still work (with a note): match-bench = bench match, bench [OPTIONS] = "
        "bench speed [OPTIONS], train-bench = bench train, train-speed = bench train-speed")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``bench`` and its four benchmarks."""
    p = sub.add_parser("bench", parents=[common], epilog=_OLD,
                       help="developer benchmarks: entity matching, encoding and query speed, "
                            "training quality and speed")
    bsub = p.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    _match_parser(bsub, common)
    _speed_parser(bsub, common)
    _train_parser(bsub, common)
    speed_commands.add_parser(bsub, common)


def _match_parser(bsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = bsub.add_parser("match", parents=[common],
                        help="recall/precision of entity matching against a PubTator file")
    p.add_argument("file", help="PubTator or BioC JSON file with gold annotations")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--types", nargs="*", help="entity types to report (default: all)")
    p.add_argument("--held-out", action="store_true",
                   help="build each entity without the mentions of the document being matched")
    p.add_argument("--symbols", action="store_true",
                   help="add the gene-symbol row: genes searched by their upper-case symbol alone")


def _speed_parser(bsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = bsub.add_parser("speed", parents=[common],
                        help="speed figures: encoding throughput ratios and query latency; "
                             "--backends compares encoding backends")
    p.add_argument("--max-seq-length", type=int, default=256,
                   help="token limit for the throughput test (default 256)")
    p.add_argument("--docs", type=int, default=None,
                   help="documents to encode (default 256; 500 with --backends; 0 skips the "
                        "throughput test)")
    p.add_argument("--queries", type=int, default=200, help="queries per retriever")
    p.add_argument("--retriever", action="append", default=[], metavar="NAME",
                   help="retrievers to time (repeatable; default bm25, dense, hybrid)")
    p.add_argument("--schema", default="PO", help="schema whose partial relations are queried")
    p.add_argument("--model", default="all-MiniLM-L6-v2", help="encoder for the throughput test")
    add_backend_args(p)
    p.add_argument("--backends", nargs="?", const="all", metavar="PAIRS",
                   help="compare encoding backends instead: docs/s vs torch/fp32, mean cosine, "
                        "dense NDCG@10; all pairs, or a comma list such as onnx/int8,"
                        "openvino/int8")
    p.add_argument("--task", default="disease_gene",
                   help="--backends: schema whose relations give the NDCG queries")
    p.add_argument("--split", default="test", choices=("train", "dev", "test", "all"),
                   help="--backends: split of the task (default test)")
    p.add_argument("--max-queries", type=int, default=100, help="--backends: most queries")
    p.add_argument("--repeats", type=int, default=1,
                   help="--backends: timed passes per pair, best kept (default 1)")
    p.add_argument("--out", help="--backends: write the JSON report here")
    p.add_argument("--set-default", action="store_true",
                   help="--backends: make the fastest pair that passes the guard (quality, "
                        ">= 1.1x torch/fp32) the workspace default, torch/fp32 when none does "
                        "(audited)")


def _train_parser(bsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from curation.training.benchmarks.train_bench import VARIANTS

    p = bsub.add_parser("train", parents=[common],
                        help="train EDEL per task and compare with BM25 and zero-shot on test")
    p.add_argument("--task", action="append", default=[], metavar="SCHEMA",
                   help="schema (repeatable; default disease_gene, chemical_gene, "
                        "variant_disease)")
    p.add_argument("--ablations", action="store_true", help="also the three ablations (task 1)")
    p.add_argument("--no-zero-shot", action="store_true", help="skip the zero-shot base model")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                   help="encoding precision for the evaluation (bfloat16: CPU autocast)")
    p.add_argument("--out", help="write the JSON summary here")
    p.add_argument("--variant", action="append", default=[], choices=list(VARIANTS),
                   help="also train and evaluate this recipe variant (repeatable)")
    p.add_argument("--no-edel", action="store_true", help="skip EDEL (variants only)")
    p.add_argument("--second-stage", action="store_true",
                   help="also train each variant on top of the task's EDEL version")
    p.add_argument("--mesh-descriptors", metavar="FILE",
                   help="biohicl-entity: descriptor id -> name file (d2019.bin or a TSV), or "
                        "'annotations' to derive the names from the mentions (an adaptation)")
    add_recipe_flags(p, only="edel", with_defaults=True)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark named by ``args.benchmark``."""
    return {"match": cmd_match_bench, "speed": cmd_speed_bench, "train": cmd_train_bench,
            "train-speed": speed_commands.cmd_train_speed}[args.benchmark](args)


def cmd_match_bench(args: argparse.Namespace) -> int:
    from curation.matching.bench import match_bench_report

    print(match_bench_report(args.file, args.types or None, as_json=args.json,
                             held_out=args.held_out, symbols=args.symbols))
    return 0


def cmd_speed_bench(args: argparse.Namespace) -> int:
    from curation.evaluation.bench import run_bench

    if args.backends:
        return _backends_bench(args)
    with Workspace.open(workspace_path(args)) as ws:
        lines = run_bench(ws, retrievers=args.retriever or ("bm25", "dense", "hybrid"),
                          docs=256 if args.docs is None else args.docs, queries=args.queries,
                          schema=args.schema, model=args.model,
                          max_seq_length=args.max_seq_length,
                          backend=args.backend, precision=args.precision)
    print("\n".join(lines))
    return 0


def _backends_bench(args: argparse.Namespace) -> int:
    """``kbcurate bench speed --backends``: the table, ``--out`` JSON, ``--set-default``."""
    import json
    from pathlib import Path

    from curation.evaluation.backend_bench import run_backend_bench
    from curation.search.indexing import set_default_backend
    from retrievers.backends import DEFAULT, parse_combination

    pairs = None if args.backends == "all" else \
        [parse_combination(x.strip()) for x in args.backends.split(",") if x.strip()]
    with Workspace.open(workspace_path(args)) as ws:
        result = run_backend_bench(ws, pairs=pairs, docs=500 if args.docs is None else args.docs,
                                   task=args.task, split=args.split,
                                   max_queries=args.max_queries, model=args.model,
                                   max_seq_length=args.max_seq_length, repeats=args.repeats)
        lines = result.lines()
        best = (result.candidate.backend, result.candidate.precision) if result.candidate \
            else DEFAULT
        if args.set_default:  # the measured best, torch/fp32 when no pair passes the guard
            set_default_backend(ws, *best, actor="cli")
            lines.append(f"workspace default backend: {'/'.join(best)} (kbcurate index builds "
                         "its index; the app offers it when ready)")
    if args.out:
        report = {**result.to_json(), "default_set": "/".join(best) if args.set_default else None}
        Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    print("\n".join(lines))
    return 0


def cmd_train_bench(args: argparse.Namespace) -> int:
    from curation.training.benchmarks.train_bench import DEFAULT_TASKS, train_bench

    with Workspace.open(workspace_path(args)) as ws:
        shared = {"max_seq_length": args.max_seq_length, "seed": args.seed,
                  "base": args.base, "precision": args.precision}
        values = {"bica": {**shared, "max_queries": args.max_queries},
                  "biohicl": {**shared, **({"mesh_descriptors": args.mesh_descriptors}
                                           if args.mesh_descriptors else {})}}
        train_bench(ws, args.task or DEFAULT_TASKS, edel_options(args), ablations=args.ablations,
                    zero_shot=not args.no_zero_shot, dtype=args.dtype, progress=not args.quiet,
                    out=args.out, emit=print, variants=args.variant, edel=not args.no_edel,
                    second_stage=args.second_stage, recipe_values=values)
    return 0


#: ``kbcurate`` sub-command -> handler (merged into :func:`curation.cli.commands.dispatch`).
HANDLERS = {"bench": cmd_bench}
