"""``kbcurate train``, ``retrain``, ``simulate`` and ``train-bench``: parsers and handlers
(``models`` in :mod:`curation.cli.model_commands`, ``train-speed`` in
:mod:`curation.cli.speed_commands`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from typing import Any

from curation.cli import model_commands, rank_commands, screening_commands, speed_commands
from curation.cli.common import given_or, print_json, workspace_path
from curation.cli.recipe_flags import add_recipe_argument, add_recipe_flags, option_values
from curation.store.workspace import Workspace
from curation.training.recipes.edel import EdelOptions
from curation.training.scoring import EVALUATIONS


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The train, models and train-bench sub-commands."""
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

    _loop_parsers(sub, common)

    p = sub.add_parser("train-bench", parents=[common],
                       help="train EDEL per task and compare with BM25 and zero-shot on test")
    p.add_argument("--task", action="append", default=[], metavar="SCHEMA",
                   help="schema (repeatable; default disease_gene, chemical_gene, "
                        "variant_disease)")
    p.add_argument("--ablations", action="store_true", help="also the three ablations (task 1)")
    p.add_argument("--no-zero-shot", action="store_true", help="skip the zero-shot base model")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                   help="encoding precision for the evaluation (bfloat16: CPU autocast)")
    p.add_argument("--out", help="write the JSON summary here")
    p.add_argument("--variant", action="append", default=[], choices=list(_bench_variants()),
                   help="also train and evaluate this recipe variant (repeatable)")
    p.add_argument("--no-edel", action="store_true", help="skip EDEL (variants only)")
    p.add_argument("--second-stage", action="store_true",
                   help="also train each variant on top of the task's EDEL version")
    p.add_argument("--mesh-descriptors", metavar="FILE",
                   help="biohicl-entity: descriptor id -> name file (d2019.bin or a TSV), or "
                        "'annotations' to derive the names from the mentions (an adaptation)")
    add_recipe_flags(p, only="edel", with_defaults=True)
    speed_commands.add_parser(sub, common)


def _bench_variants() -> tuple[str, ...]:
    from curation.training.benchmarks.train_bench import VARIANTS

    return tuple(VARIANTS)


def _loop_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``kbcurate retrain`` and ``kbcurate simulate`` (the feedback loop)."""
    from curation.simulation.dense import QueryStrategy, SimulationConfig

    p = sub.add_parser("retrain", parents=[common],
                       help="one feedback round: KB + labels -> new version -> gate -> switch")
    p.add_argument("--schema", required=True)
    _retrain_options(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    d = SimulationConfig()
    p = sub.add_parser("simulate", parents=[common],
                       help="simulated curator + retraining rounds (dense: in a copy of the "
                            "workspace; ranker: in memory)")
    p.add_argument("--schema", required=True)
    rank_commands.add_learner_args(p)
    p.add_argument("--rounds", type=int, help=f"default {d.rounds}; ranker 5")
    p.add_argument("--labels-per-round", type=int, help=f"default {d.labels_per_round}; ranker 10")
    p.add_argument("--labels-per-query", type=int, help=f"default {d.labels_per_query}; ranker 5")
    p.add_argument("--query-strategy", dest="strategy", default=d.strategy,
                   choices=[s.value for s in QueryStrategy])
    p.add_argument("--pool-depth", type=int, default=d.pool_depth,
                   help="BM25 candidates per query the simulated curator screens")
    p.add_argument("--start", help="version to start from (the KB-only model; default: train "
                                   "one in the copy)")
    p.add_argument("--no-zero-shot", action="store_true", help="skip scoring the base model")
    p.add_argument("--out", help="folder for simulation.json/.html/.txt "
                                 "(default: WS/exports/simulation-SCHEMA-TIME); "
                                 "--screening: the JSON file")
    screening_commands.add_simulate_args(p)
    _retrain_options(p, evaluation="pool")


def _retrain_options(p: argparse.ArgumentParser, evaluation: str = "corpus") -> None:
    from curation.training.feedback import LabelMapping
    from curation.training.retrain import RetrainOptions

    d, m = RetrainOptions(), LabelMapping()
    add_recipe_argument(p)
    p.add_argument("--from-base", action="store_true",
                   help="start from the base model instead of the active version")
    p.add_argument("--tolerance", type=float, default=d.tolerance_pp,
                   help="largest allowed drop of NDCG@10 / EntityRecall@10 in pp")
    p.add_argument("--no-promote", action="store_true",
                   help="only report the gate's decision; never switch the active version")
    p.add_argument("--small-test-reason", default="", metavar="TEXT",
                   help="an admin's written reason to let the gate promote on fewer than 20 "
                        "test queries (audited)")
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


def cmd_simulate(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from curation.simulation.dense import SimulationConfig, simulate
    from curation.simulation.dense_report import format_rounds

    if args.screening:
        return screening_commands.simulate_screening_command(args)
    if args.learner == "ranker":
        return rank_commands.simulate_ranker_command(args)
    d = SimulationConfig()
    config = SimulationConfig(rounds=given_or(args.rounds, d.rounds),
                              labels_per_round=given_or(args.labels_per_round, d.labels_per_round),
                              labels_per_query=given_or(args.labels_per_query, d.labels_per_query),
                              strategy=args.strategy,
                              pool_depth=args.pool_depth, seed=getattr(args, "seed", d.seed),
                              start=args.start,
                              zero_shot=not args.no_zero_shot)
    with Workspace.open(workspace_path(args)) as ws:
        out = Path(args.out) if args.out else (
            ws.root / "exports" / f"simulation-{args.schema}-{time.strftime('%Y%m%d-%H%M%S')}")
        summary = simulate(ws, args.schema, config, retrain_options(args),
                           progress=not args.quiet, out_dir=out)
    print(format_rounds(summary))
    print(f"written: {out}/simulation.json, simulation.html, simulation.txt")
    return 0


#: ``kbcurate`` sub-command -> handler (merged into :func:`curation.cli.commands.dispatch`).
HANDLERS = {"train": cmd_train, **model_commands.HANDLERS, "train-bench": cmd_train_bench,
            "retrain": cmd_retrain, "simulate": cmd_simulate,
            "train-speed": speed_commands.cmd_train_speed}
