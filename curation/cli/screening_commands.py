"""``kbcurate simulate screening``: the screening replay's flags and handler (the
``simulate`` parser lives in :mod:`curation.cli.simulate_commands`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from curation.cli.common import workspace_path
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError


def add_simulate_args(p: argparse.ArgumentParser) -> None:
    """The flags of ``kbcurate simulate screening`` that say what is replayed."""
    from curation.screening.stop_rules import STOP_RULES

    p.add_argument("--split", default="heldout", choices=("dev", "test", "heldout"),
                   help="the queries replayed (heldout = dev and test)")
    p.add_argument("--recall-target", type=float, default=0.95,
                   help="recall target of the stopping rules (default 0.95)")
    p.add_argument("--no-stop", action="store_true",
                   help="skip replaying the stopping rules (faster)")
    p.add_argument("--stop-rules", default=None,
                   help=f"stop rules replayed side by side, comma-separated (default: all: "
                        f"{', '.join(STOP_RULES)})")
    p.add_argument("--hoc", action="store_true",
                   help="also replay the ten Hallmarks of Cancer lists (DATA/hoc: 1,852 "
                        "abstracts, one list per hallmark in BM25 order)")
    p.add_argument("--bc6pm", action="store_true",
                   help="also replay BC6PM's triage test set as one list (DATA/bc6pm: 1,427 "
                        "abstracts, 704 relevant, in BM25 order of the track's topic)")
    p.add_argument("--min-relevant", type=int, default=None, metavar="N",
                   help="replay only the schemas' queries with at least N relevant candidates "
                        "(default 2; 5 keeps the long lists)")
    p.add_argument("--data-dir", help="data folder for --hoc and --bc6pm (default: "
                                      "$KBCURATE_DATA or ../shared/data)")


def simulate_screening_command(args: argparse.Namespace) -> int:
    """Run the replay; ``--schema`` may name several schemas, comma-separated (pooled), and
    ``--hoc`` adds the Hallmarks of Cancer lists."""
    from curation.simulation.plots import write_recall_html
    from curation.simulation.screening import SimulationOptions
    from curation.simulation.screening_run import (
        bc6pm_task,
        format_screening,
        hoc_task,
        simulate_screening,
    )
    from curation.store.config import resolve_data_dir

    schemas = [s.strip() for s in (args.schema or "").split(",") if s.strip()]
    if not schemas and not args.hoc and not args.bc6pm:
        raise CurationError("--schema names no schema; give one or several, comma-separated "
                            "(or --hoc for the Hallmarks of Cancer lists, --bc6pm for BC6PM's "
                            "triage list)")
    if not 0.0 < args.recall_target < 1.0:
        raise CurationError(f"--recall-target must be in (0, 1), got {args.recall_target}")
    rules = [r.strip() for r in args.stop_rules.split(",") if r.strip()] if (
        args.stop_rules is not None) else None
    min_relevant = SimulationOptions().min_relevant if args.min_relevant is None \
        else args.min_relevant
    if min_relevant < 1:
        raise CurationError(f"--min-relevant must be >= 1, got {min_relevant}")
    options = SimulationOptions(seed=args.seed, min_relevant=min_relevant)
    extra = []
    if args.hoc or args.bc6pm:
        data_dir = resolve_data_dir(args.data_dir)
        extra = ([hoc_task(data_dir)] if args.hoc else []) \
            + ([bc6pm_task(data_dir)] if args.bc6pm else [])
    names = schemas + (["hoc"] if args.hoc else []) + (["bc6pm"] if args.bc6pm else []) \
        + ([f"min{min_relevant}"] if args.min_relevant is not None else [])
    with Workspace.open(workspace_path(args)) as ws:
        result = simulate_screening(ws, schemas, args.split, options=options,
                                    stops=not args.no_stop, rules=rules,
                                    target=args.recall_target, extra=extra,
                                    progress=not args.quiet)
        out = Path(args.out) if args.out else (
            ws.root / "exports" / f"screening-{'-'.join(names)}-{args.split}.json")
    if out.suffix != ".json":
        out = out.with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1), encoding="utf-8")
    tmp.replace(out)
    html = write_recall_html(result, out.with_suffix(".html"))
    print(format_screening(result))
    print(f"written: {out}, {html}")
    return 0
