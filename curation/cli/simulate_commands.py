"""``kbcurate simulate dense|ranker|screening``: the three replays of a simulated curator, each
with only its own flags (issue 44).

* ``dense``: retraining rounds of a dense recipe in a copy of the workspace (minutes to hours).
* ``ranker``: rounds of the learned ranker, in memory (a round in seconds); its handler is
  :func:`curation.cli.rank_commands.simulate_ranker_command`.
* ``screening``: static, in-query learned and random orders of every held-out query, and the
  stopping rules; its handler is :func:`curation.cli.screening_commands.simulate_screening_command`.

The old spellings (``simulate --screening``, ``simulate --learner ranker``) are rewritten to
these before parsing (:mod:`curation.cli.legacy`).
"""

from __future__ import annotations

import argparse
from typing import Protocol

from curation.cli import rank_commands, screening_commands
from curation.cli.common import workspace_path
from curation.cli.train_commands import add_gate_args, add_retrain_args, retrain_options
from curation.store.workspace import Workspace

_OLD = ("old spellings still work (with a note): simulate --screening = simulate screening, "
        "simulate --learner ranker = simulate ranker, simulate [--learner dense] = simulate "
        "dense")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``simulate`` and its three replays."""
    p = sub.add_parser("simulate", parents=[common], epilog=_OLD,
                       help="replay a simulated curator: dense or ranker retraining rounds, or "
                            "screening orders")
    rsub = p.add_subparsers(dest="replay", required=True, metavar="REPLAY")
    _dense_parser(rsub, common)
    _ranker_parser(rsub, common)
    _screening_parser(rsub, common)


class _Rounds(Protocol):
    """What the dense and the ranker replay configs have in common."""

    rounds: int
    labels_per_round: int
    labels_per_query: int


def _rounds_args(p: argparse.ArgumentParser, config: _Rounds, depth: int) -> None:
    """The flags of the retraining replays (dense, ranker), with that replay's defaults."""
    p.add_argument("--schema", required=True, help="schema whose KB relations are replayed")
    p.add_argument("--rounds", type=int, default=config.rounds,
                   help="retraining rounds (default %(default)s)")
    p.add_argument("--labels-per-round", type=int, default=config.labels_per_round,
                   help="labels between two rounds (default %(default)s)")
    p.add_argument("--labels-per-query", type=int, default=config.labels_per_query,
                   help="documents screened per query before the next query "
                        "(default %(default)s)")
    p.add_argument("--pool-depth", type=int, default=depth,
                   help="BM25 candidates per query the simulated curator screens "
                        "(default %(default)s)")


def _dense_parser(rsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from curation.simulation.dense import QueryStrategy, SimulationConfig

    d = SimulationConfig()
    p = rsub.add_parser("dense", parents=[common],
                        help="retraining rounds of a dense recipe in a copy of the workspace "
                             "(minutes to hours)")
    _rounds_args(p, d, d.pool_depth)
    p.add_argument("--query-strategy", dest="strategy", default=d.strategy,
                   choices=[s.value for s in QueryStrategy])
    p.add_argument("--start", help="version to start from (the KB-only model; default: train "
                                   "one in the copy)")
    p.add_argument("--no-zero-shot", action="store_true", help="skip scoring the base model")
    p.add_argument("--out", help="folder for simulation.json/.html/.txt "
                                 "(default: WS/exports/simulation-SCHEMA-TIME)")
    add_retrain_args(p, evaluation="pool")


def _ranker_parser(rsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from curation.simulation.ranker import RankerSimulation

    d = RankerSimulation()
    p = rsub.add_parser("ranker", parents=[common],
                        help="rounds of the learned ranker, in memory (a round in seconds)")
    _rounds_args(p, d, d.depth)
    p.add_argument("--kb-share", type=float, default=d.kb_share,
                   help="share of the train queries the KB covers; the curator screens the "
                        "others first (default %(default)s)")
    p.add_argument("--label-splits", default=d.label_splits, choices=("all", "train"),
                   help="the simulated curator labels queries of every split (all: each label "
                        "trains, as in the workspace) or of the train split only")
    p.add_argument("--seed", type=int, default=d.seed,
                   help="seed of the query order and of the ranker (default %(default)s)")
    add_gate_args(p)
    p.add_argument("--out", help="folder for simulation.json "
                                 "(default: WS/exports/simulation-ranker-SCHEMA-TIME)")


def _screening_parser(rsub: argparse._SubParsersAction,
                      common: argparse.ArgumentParser) -> None:
    from curation.simulation.screening import SimulationOptions

    p = rsub.add_parser("screening", parents=[common],
                        help="replay the screening of every held-out query with >= 2 relevant "
                             "candidates: static, in-query learned and random orders, and every "
                             "stop rule side by side")
    p.add_argument("--schema", default="",
                   help="schema, or several comma-separated (their queries pooled); may be "
                        "left out with --hoc")
    screening_commands.add_simulate_args(p)
    p.add_argument("--seed", type=int, default=SimulationOptions().seed,
                   help="seed of the random order (default %(default)s)")
    p.add_argument("--out", help="the JSON file (an .html with the recall curves beside it; "
                                 "default: WS/exports/screening-SCHEMAS-SPLIT.json)")


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run the replay named by ``args.replay``."""
    return {"dense": simulate_dense_command,
            "ranker": rank_commands.simulate_ranker_command,
            "screening": screening_commands.simulate_screening_command}[args.replay](args)


def simulate_dense_command(args: argparse.Namespace) -> int:
    """``kbcurate simulate dense``: the rounds in a copy, then the report files."""
    import time
    from pathlib import Path

    from curation.simulation.dense import SimulationConfig, simulate
    from curation.simulation.dense_report import format_rounds

    config = SimulationConfig(rounds=args.rounds, labels_per_round=args.labels_per_round,
                              labels_per_query=args.labels_per_query, strategy=args.strategy,
                              pool_depth=args.pool_depth,
                              seed=getattr(args, "seed", SimulationConfig().seed),
                              start=args.start, zero_shot=not args.no_zero_shot)
    with Workspace.open(workspace_path(args)) as ws:
        out = Path(args.out) if args.out else (
            ws.root / "exports" / f"simulation-{args.schema}-{time.strftime('%Y%m%d-%H%M%S')}")
        summary = simulate(ws, args.schema, config, retrain_options(args),
                           progress=not args.quiet, out_dir=out)
    print(format_rounds(summary))
    print(f"written: {out}/simulation.json, simulation.html, simulation.txt")
    return 0


#: ``kbcurate`` sub-command -> handler (merged into :func:`curation.cli.commands.dispatch`).
HANDLERS = {"simulate": cmd_simulate}
