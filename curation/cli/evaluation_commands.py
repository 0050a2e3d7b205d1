"""``kbcurate evaluate``: the handler (its parser lives in :mod:`curation.cli.main`; the
benchmarks that were beside it are in :mod:`curation.cli.bench_commands`)."""

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


HANDLERS = {"evaluate": cmd_evaluate}
