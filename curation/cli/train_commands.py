"""``kbcurate train``, ``retrain``, ``simulate`` and ``train-bench``: parsers and handlers
(``models`` in :mod:`curation.cli.model_commands`, ``train-speed`` in
:mod:`curation.cli.speed_commands`)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

from curation.cli import model_commands, rank_commands, speed_commands
from curation.cli.common import CLI_ADMIN, given_or, print_json, workspace_path
from curation.store.workspace import Workspace
from curation.training.edel import EdelOptions
from curation.training.examples import Ablation
from curation.training.recipes import RECIPE_HELP, RECIPES


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The train, models and train-bench sub-commands."""
    p = sub.add_parser("train", parents=[common],
                       help="train a dense retriever on a schema's KB (a new model version)")
    p.add_argument("--schema", required=True, help="schema whose KB records are the data")
    p.add_argument("--recipe", default="edel", choices=RECIPES,
                   help="; ".join(RECIPE_HELP.values()))
    _recipe_options(p)
    p.add_argument("--activate", action="store_true",
                   help="make the new version the schema's active one")
    p.add_argument("--evaluate", action="store_true",
                   help="evaluate the new version on the test split (encodes the whole corpus)")

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
    _training_options(p)
    speed_commands.add_parser(sub, common)


def _bench_variants() -> tuple[str, ...]:
    from curation.training.bench import VARIANTS

    return tuple(VARIANTS)


def _loop_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``kbcurate retrain`` and ``kbcurate simulate`` (the feedback loop)."""
    from curation.training.simulate import QueryStrategy, SimulationConfig

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
                                 "(default: WS/exports/simulation-SCHEMA-TIME)")
    _retrain_options(p, evaluation="pool")


def _retrain_options(p: argparse.ArgumentParser, evaluation: str = "corpus") -> None:
    from curation.training.feedback import LabelMapping
    from curation.training.retrain import EVALUATIONS, RetrainOptions

    d, m = RetrainOptions(), LabelMapping()
    p.add_argument("--from-base", action="store_true",
                   help="start from the base model instead of the active version")
    p.add_argument("--tolerance", type=float, default=d.tolerance_pp,
                   help="largest allowed drop of NDCG@10 / EntityRecall@10 in pp")
    p.add_argument("--no-promote", action="store_true",
                   help="only report the gate's decision; never switch the active version")
    p.add_argument("--evaluation", default=evaluation, choices=EVALUATIONS,
                   help="score on the whole corpus (as kbcurate evaluate) or on a pool")
    p.add_argument("--partial-mu", type=float, default=m.partial_mu)
    p.add_argument("--irrelevant-mu", type=float, default=m.irrelevant_mu)
    _training_options(p)


def retrain_options(args: argparse.Namespace) -> Any:
    from curation.training.feedback import LabelMapping
    from curation.training.retrain import RetrainOptions

    return RetrainOptions(edel=edel_options(args), warm_start=not args.from_base,
                          tolerance_pp=args.tolerance, promote=not args.no_promote,
                          mapping=LabelMapping(args.partial_mu, args.irrelevant_mu),
                          evaluation=args.evaluation)


def _training_options(p: argparse.ArgumentParser) -> None:
    d = EdelOptions()
    p.add_argument("--base", default=d.base,
                   help="base model: HF name or local folder (default: packaged MiniLM)")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--learning-rate", type=float, default=d.learning_rate)
    p.add_argument("--warmup-ratio", type=float, default=d.warmup_ratio)
    p.add_argument("--max-seq-length", type=int, default=d.max_seq_length)
    p.add_argument("--precision", default=d.precision, choices=("auto", "fp32", "bf16"),
                   help="auto: bf16 on a CUDA GPU, fp32 on CPU; bf16 on CPU uses autocast")
    p.add_argument("--margin-function", default=d.margin_function, choices=("angle", "distance"))
    p.add_argument("--negatives-per-class", type=int, default=d.negatives_per_class,
                   help="cap per negative class per query, times its positives (EDEL code: 20)")
    p.add_argument("--bm25-depth", type=int, default=d.bm25_depth)
    p.add_argument("--ablation", default=d.ablation, choices=[a.value for a in Ablation])
    p.add_argument("--dev-depth", type=int, default=d.dev_depth,
                   help="BM25 hits per dev query in the dev pool that picks the epoch")
    p.add_argument("--max-queries", type=int, default=None, help="train on at most N queries")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--group-by-length", action=argparse.BooleanOptionalAction,
                   default=d.group_by_length,
                   help="EDEL: batches of similar-length pairs; saves padding (6%% of token "
                        "slots at 128-256 tokens on the pool, 31%% at 512)")


def _recipe_options(p: argparse.ArgumentParser) -> None:
    """``kbcurate train``'s options for every recipe; only those given are passed on, so each
    recipe keeps its own defaults, and an option the recipe lacks is a clear error."""
    g = p.add_argument_group("all recipes")
    add = {"default": argparse.SUPPRESS}
    g.add_argument("--base", help="base model: HF name, local folder or a registry version "
                                  "(default: packaged MiniLM)", **add)
    for name, kind in (("epochs", int), ("batch-size", int), ("learning-rate", float),
                       ("warmup-ratio", float), ("max-seq-length", int), ("seed", int),
                       ("dev-depth", int), ("dev-random", int)):
        g.add_argument(f"--{name}", type=kind, **add)
    g.add_argument("--precision", choices=("auto", "fp32", "bf16"), **add,
                   help="auto: bf16 on a CUDA GPU, fp32 on CPU; bf16 on CPU uses autocast")
    g.add_argument("--max-queries", type=int, help="edel/bica: train on at most N queries",
                   **add)
    g = p.add_argument_group("edel")
    g.add_argument("--margin-function", choices=("angle", "distance"), **add)
    g.add_argument("--negatives-per-class", type=int, **add,
                   help="cap per negative class per query, times its positives (EDEL code: 20)")
    g.add_argument("--bm25-depth", type=int, **add)
    g.add_argument("--ablation", choices=[a.value for a in Ablation], **add)
    g.add_argument("--group-by-length", action=argparse.BooleanOptionalAction, **add,
                   help="batches of similar-length pairs; saves padding (6%% of token slots at "
                        "128-256 tokens on the pool, 31%% at 512; default off)")
    g = p.add_argument_group("bica")
    g.add_argument("--graph", choices=("citations", "knn", "both"), **add,
                   help="walk the citation graph (paper), a base-encoder kNN graph of the corpus "
                        "(adaptation), or both (default citations)")
    for name, kind in (("knn-k", int), ("n-paths", int), ("path-length", int), ("top-k", int),
                       ("bm25-fallback", int), ("scale", float)):
        g.add_argument(f"--{name}", type=kind, **add)
    g.add_argument("--query-source", choices=("template", "title", "both"), **add)
    g.add_argument("--no-random-negative", dest="include_random", action="store_false", **add)
    g = p.add_argument_group("biohicl")
    for name, kind in (("beta", float), ("lam", float), ("tau", float), ("lora-rank", int),
                       ("lora-alpha", int), ("lora-dropout", float)):
        g.add_argument(f"--{name}", type=kind, **add)
    g.add_argument("--variant", choices=("printed", "tempered"), **add)
    g.add_argument("--lora-targets", help="comma-separated modules (default query,value)", **add)
    g.add_argument("--full-finetune", action="store_true", **add,
                   help="train all weights instead of LoRA")
    g.add_argument("--entity-mesh", action="store_true", **add,
                   help="also label documents by the MeSH ids of their entity annotations")
    g.add_argument("--mesh-descriptors", metavar="FILE", **add,
                   help="descriptor id -> name: NLM d2019.bin, a TSV with descriptor_ui and "
                        "descriptor columns, or 'annotations' (names derived from the "
                        "mentions, an adaptation; needed by --entity-mesh)")


#: ``kbcurate train`` arguments that are not training options.
_TRAIN_ARGS = {"schema", "recipe", "activate", "evaluate", "workspace", "quiet", "verbose",
               "command", "func", "data"}


def train_values(args: argparse.Namespace) -> dict[str, Any]:
    """The training options given on the command line (recipe-neutral names)."""
    return {k: v for k, v in vars(args).items() if k not in _TRAIN_ARGS}


def edel_options(args: argparse.Namespace) -> EdelOptions:
    names = {f.name for f in fields(EdelOptions)}
    return EdelOptions(**{k: v for k, v in vars(args).items() if k in names})


def cmd_train(args: argparse.Namespace) -> int:
    from curation.store.models import activate_model
    from curation.training.edel import evaluate_version
    from curation.training.recipes import recipe_options, train_recipe

    options = recipe_options(args.recipe, train_values(args))
    with Workspace.open(workspace_path(args)) as ws:
        version = train_recipe(ws, args.schema, args.recipe, options, actor="cli",
                               progress=not args.quiet)
        m = version.manifest
        data = m["examples"]
        detail = data.get("classes") or data.get("negatives_by_source") or data.get("labels")
        print(f"registered {version.id}: {data.get('examples', 0):,} training rows"
              f"{f' ({detail})' if detail else ''}, {m['epochs_run']} epoch(s), best epoch "
              f"{m['best_epoch']}, dev NDCG@10 {m['dev_scores']}, {m['seconds']:.0f} s, "
              f"{m['examples_per_second']:.1f} rows/s ({m['precision']}, {m['device']})")
        if args.evaluate:
            from curation.evaluation.harness import format_table

            print(format_table(evaluate_version(ws, version, progress=not args.quiet)))
        if args.activate:
            activate_model(ws, version.id, CLI_ADMIN, reason="kbcurate train --activate")
            print(f"{version.id} is now the active {version.schema} model")
    return 0


def cmd_train_bench(args: argparse.Namespace) -> int:
    from curation.training.bench import DEFAULT_TASKS, train_bench

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
                    "gate": result.decision.to_json()})
        return 0
    print(f"trained {result.version.id} on {result.labels_used} label(s) "
          f"(parent: {result.previous or 'base model'})")
    for reason in result.decision.reasons:
        print(f"  {reason}")
    print(f"{result.version.id} is now the active {result.version.schema} model"
          if result.promoted else f"{result.version.id} stays a candidate; promote it anyway "
          "with: kbcurate models promote VERSION --reason TEXT")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from curation.training.simulate import SimulationConfig, simulate
    from curation.training.simulate_report import format_rounds

    if args.learner == "ranker":
        return rank_commands.simulate_ranker_command(args)
    d = SimulationConfig()
    config = SimulationConfig(rounds=given_or(args.rounds, d.rounds),
                              labels_per_round=given_or(args.labels_per_round, d.labels_per_round),
                              labels_per_query=given_or(args.labels_per_query, d.labels_per_query),
                              strategy=args.strategy,
                              pool_depth=args.pool_depth, seed=args.seed, start=args.start,
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
