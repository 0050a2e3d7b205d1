"""``kbcurate evaluate``, ``match-bench`` and ``bench``: the handlers (their parsers live in
:mod:`curation.cli.main`)."""

from __future__ import annotations

import argparse
import sys

from curation.cli.common import workspace_path
from curation.cli.vector_commands import dense_options
from curation.store.workspace import Workspace


def cmd_evaluate(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from curation.evaluation.harness import format_table
    from curation.evaluation.runner import evaluate_workspace
    from curation.search.indexing import with_dense_options

    dense = dense_options(args)
    options = {name: with_dense_options(name, dense) for name in ("dense", "hybrid")} \
        if dense else {}
    if "best" in args.retriever:
        from curation.cli.rank_commands import evaluate_best

        return evaluate_best(args)
    with Workspace.open(workspace_path(args)) as ws:
        report = evaluate_workspace(ws, args.schema, args.retriever or ["bm25"],
                                    split=args.split, options=options, progress=not args.quiet)
    if args.out:
        Path(args.out).write_text(json.dumps(report.to_json(), indent=2), encoding="utf-8")
    print(format_table(report))
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_match_bench(args: argparse.Namespace) -> int:
    from curation.matching.bench import match_bench_report

    print(match_bench_report(args.file, args.types or None, as_json=args.json,
                             held_out=args.held_out, symbols=args.symbols))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from curation.evaluation.bench import run_bench

    if args.backends:
        return _bench_backends(args)
    with Workspace.open(workspace_path(args)) as ws:
        lines = run_bench(ws, retrievers=args.retriever or ("bm25", "dense", "hybrid"),
                          docs=256 if args.docs is None else args.docs, queries=args.queries,
                          schema=args.schema, model=args.model,
                          max_seq_length=args.max_seq_length,
                          backend=args.backend, precision=args.precision)
    print("\n".join(lines))
    return 0


def _bench_backends(args: argparse.Namespace) -> int:
    """``kbcurate bench --backends``: the table, ``--out`` JSON, ``--set-default``."""
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


HANDLERS = {"evaluate": cmd_evaluate, "match-bench": cmd_match_bench, "bench": cmd_bench}
