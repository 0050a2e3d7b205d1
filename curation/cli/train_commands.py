"""``kbcurate train`` and ``retrain``: parsers and handlers, and the retraining flags that
``simulate dense`` / ``simulate ranker`` share (:mod:`curation.cli.simulate_commands`);
``models`` in :mod:`curation.cli.model_commands`, ``bench train`` in
:mod:`curation.cli.bench_commands`."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from typing import Any

from curation.cli import model_commands
from curation.cli.common import print_json, workspace_path
from curation.cli.recipe_flags import add_recipe_argument, add_recipe_flags, option_values
from curation.store.workspace import Workspace
from curation.training.recipes.edel import EdelOptions
from curation.training.scoring import EVALUATIONS


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The train, models and retrain sub-commands."""
    p = sub.add_parser("train", parents=[common],
                       help="train a dense retriever on a schema's KB (a new model version)")
    p.add_argument("--schema", required=True, help="schema whose KB records are the data")
    add_recipe_argument(p)
    add_recipe_flags(p)
    p.add_argument("--evaluation", default="corpus", choices=EVALUATIONS,
                   help="test metrics of the new version: the whole corpus (as kbcurate "
                        "evaluate) or a pool (test gold + BM25 top 30 + 500 random; faster)")
    p.add_argument("--activate", action="store_true",
                   help="make the new version the schema's active one (builds its index first)")

    model_commands.add_parser(sub, common)

    p = sub.add_parser("retrain", parents=[common],
                       help="one feedback round: KB + labels -> new version -> gate -> switch")
    p.add_argument("--schema", required=True)
    add_retrain_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def add_gate_args(p: argparse.ArgumentParser) -> None:
    """``--tolerance`` and ``--small-test-reason``: what the promotion gate allows."""
    from curation.training.retrain import RetrainOptions

    p.add_argument("--tolerance", type=float, default=RetrainOptions().tolerance_pp,
                   help="largest allowed drop of NDCG@10 / EntityRecall@10 in pp "
                        "(default %(default)s)")
    p.add_argument("--small-test-reason", default="", metavar="TEXT",
                   help="an admin's written reason to let the gate promote on fewer than 20 "
                        "test queries (audited)")


def add_retrain_args(p: argparse.ArgumentParser, evaluation: str = "corpus") -> None:
    """The flags of a feedback round (``retrain``, ``simulate dense``): recipe, gate, margins."""
    from curation.training.feedback import LabelMapping

    m = LabelMapping()
    add_recipe_argument(p)
    p.add_argument("--from-base", action="store_true",
                   help="start from the base model instead of the active version")
    add_gate_args(p)
    p.add_argument("--no-promote", action="store_true",
                   help="only report the gate's decision; never switch the active version")
    p.add_argument("--evaluation", default=evaluation, choices=EVALUATIONS,
                   help="score on the whole corpus (as kbcurate evaluate) or on a pool")
    p.add_argument("--partial-mu", type=float, default=m.partial_mu,
                   help="edel: margin of a partial label whose pattern is complete")
    p.add_argument("--irrelevant-mu", type=float, default=m.irrelevant_mu,
                   help="edel: margin of an irrelevant label (hard negative)")
    add_recipe_flags(p)


def retrain_options(args: argparse.Namespace) -> Any:
    from curation.training.feedback import LabelMapping
    from curation.training.recipes import recipe_options
    from curation.training.retrain import RetrainOptions

    return RetrainOptions(recipe=args.recipe,
                          training=recipe_options(args.recipe, option_values(args)),
                          warm_start=not args.from_base, tolerance_pp=args.tolerance,
                          promote=not args.no_promote,
                          mapping=LabelMapping(args.partial_mu, args.irrelevant_mu),
                          evaluation=args.evaluation,
                          small_test_reason=args.small_test_reason)


def train_values(args: argparse.Namespace) -> dict[str, Any]:
    """The training options given on the command line (recipe-neutral names)."""
    return option_values(args)


def edel_options(args: argparse.Namespace) -> EdelOptions:
    """EDEL's options from the flags given (its defaults for the others)."""
    names = {f.name for f in fields(EdelOptions)}
    return EdelOptions(**{k: v for k, v in option_values(args).items() if k in names})


def cmd_train(args: argparse.Namespace) -> int:
    from curation.training.recipes import recipe_options
    from curation.training.rounds import run_round

    options = recipe_options(args.recipe, train_values(args))
    with Workspace.open(workspace_path(args)) as ws:
        result = run_round(ws, args.schema, args.recipe, options, actor="cli",
                           evaluation=args.evaluation, progress=not args.quiet)
        version = result.version
        m = version.manifest
        data = m["examples"]
        detail = data.get("classes") or data.get("negatives_by_source") or data.get("labels")
        print(f"registered {version.id}: {data.get('examples', 0):,} training rows"
              f"{f' ({detail})' if detail else ''}, {m['epochs_run']} epoch(s), best epoch "
              f"{m['best_epoch']}, dev NDCG@10 {m['dev_scores']}, {m['seconds']:.0f} s, "
              f"{m['examples_per_second']:.1f} rows/s ({m['precision']}, {m['device']})")
        print(format_test_metrics(version, result.test_queries))
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if args.activate:
            model_commands.activate_with_progress(ws, version.id,
                                                  reason="kbcurate train --activate",
                                                  quiet=args.quiet)
    return 0


def format_test_metrics(version: Any, test_queries: int) -> str:
    """One line: the version's test metrics and how many queries they come from."""
    m = version.metrics
    kind = "test" if "test_ndcg@10" in m else "testpool"
    if f"{kind}_ndcg@10" not in m:
        return f"{version.id}: no test metrics ({test_queries} test queries)"
    where = "corpus" if kind == "test" else "pool"
    return (f"{version.id} on {test_queries} test queries ({where}): NDCG@10 "
            f"{m[f'{kind}_ndcg@10']:.4f}, EntityRecall@10 "
            f"{m.get(f'{kind}_entity_recall@10', float('nan')):.4f}")


def cmd_retrain(args: argparse.Namespace) -> int:
    from curation.training.retrain import retrain

    with Workspace.open(workspace_path(args)) as ws:
        result = retrain(ws, args.schema, retrain_options(args), actor="cli",
                         progress=not args.quiet)
    if args.json:
        print_json({"version": result.version.id, "previous": result.previous,
                    "promoted": result.promoted, "labels_used": result.labels_used,
                    "gate": result.decision.to_json() if result.decision else None,
                    "warnings": list(result.warnings)})
        return 0
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"trained {result.version.id} on {result.labels_used} label(s) "
          f"(parent: {result.previous or 'base model'})")
    for reason in (result.decision.reasons if result.decision else ()):
        print(f"  {reason}")
    print(f"{result.version.id} is now the active {result.version.schema} model"
          if result.promoted else f"{result.version.id} stays a candidate; promote it anyway "
          "with: kbcurate models promote VERSION --reason TEXT")
    return 0


#: ``kbcurate`` sub-command -> handler (merged into :func:`curation.cli.commands.dispatch`).
HANDLERS = {"train": cmd_train, **model_commands.HANDLERS, "retrain": cmd_retrain}
