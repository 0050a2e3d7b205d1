"""``kbcurate rank``: train, list, activate and explain the learned ranker of a schema, and show
its last rounds."""

from __future__ import annotations

import argparse

from curation.cli.common import CLI_ADMIN, print_json, workspace_path
from curation.store.rankers import Rankers
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("rank", parents=[common],
                       help="the learned ranker: train (seconds), list, activate, explain")
    rsub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    t = rsub.add_parser("train", parents=[common],
                        help="train a ranker version from the KB and every label; the gate "
                             "activates it when it does not lose to the active one on dev")
    t.add_argument("--schema", required=True)
    t.add_argument("--model", default="lightgbm", choices=("lightgbm", "logistic"),
                   help="LightGBM lambdarank (default) or the logistic fallback")
    t.add_argument("--depth", type=int, default=100, help="candidates from BM25 (N)")
    t.add_argument("--seed", type=int, default=13)
    t.add_argument("--dense-version", metavar="VERSION",
                   help="add a trained dense version's candidates and cosine features (its "
                        "index is built when missing: encodes the corpus)")
    t.add_argument("--base-dense", action="store_true",
                   help="add the base model's dense candidates and cosine features (index "
                        "built when missing)")
    t.add_argument("--no-activate", action="store_true", help="save only; never activate")
    t.add_argument("--reason", default="", metavar="TEXT",
                   help="an admin's written reason to promote on fewer than 20 held-out "
                        "queries (audited)")
    t.add_argument("--json", action="store_true", help="print JSON")
    ls = rsub.add_parser("list", parents=[common], help="ranker versions")
    ls.add_argument("--schema")
    ro = rsub.add_parser("rounds", parents=[common],
                         help="the last ranker rounds: labels, held-out scores, promoted or "
                              "kept and why")
    ro.add_argument("--schema")
    ro.add_argument("--limit", type=int, default=10)
    a = rsub.add_parser("activate", parents=[common], help="rank with this version (rollback); "
                                                          "admins, with a written reason")
    a.add_argument("version", help="e.g. disease_gene-ranker@2")
    a.add_argument("--reason", required=True, help="why this version should rank (audited, as "
                                                   "the app asks)")
    e = rsub.add_parser("explain", parents=[common],
                        help="why the active ranker puts a document where it does")
    e.add_argument("--schema", required=True)
    e.add_argument("--relation", required=True, help="query key of the partial relation "
                                                     "(kbcurate relations --schema S)")
    e.add_argument("--doc", required=True, help="PMID")
    au = rsub.add_parser("auto", parents=[common],
                         help="show or change after how many new labels on a schema the "
                              "ranker retrains in the background (default 20; 0: never)")
    au.add_argument("every", nargs="?", type=int, help="new value (admin action, audited as "
                                                        "'cli'); omit to show it")


def _auto(ws: Workspace, args: argparse.Namespace) -> int:

    if args.every is not None:
        Rankers(ws).set_retrain_every(args.every, user=CLI_ADMIN)
    every = Rankers(ws).retrain_every()
    print(f"the ranker retrains after {every} new labels on a schema" if every
          else "the ranker never retrains automatically (kbcurate rank train)")
    for schema in sorted(ws.schemas()):
        waiting = Rankers(ws).labels_waiting(schema)
        if waiting:
            print(f"  {schema}: {waiting} new label(s) since the last round")
    return 0


def cmd_rank(args: argparse.Namespace) -> int:
    with Workspace.open(workspace_path(args)) as ws:
        if args.action == "train":
            return _train(ws, args)
        if args.action == "list":
            return _list(ws, args.schema)
        if args.action == "auto":
            return _auto(ws, args)
        if args.action == "rounds":
            return _rounds(ws, args.schema, args.limit)
        if args.action == "activate":
            from curation.training.ranker import promote_ranker

            v = promote_ranker(ws, args.version, user=CLI_ADMIN, reason=args.reason)
            print(f"{v.id} now ranks {v.schema}")
            return 0
        return _explain(ws, args)


def _list(ws: Workspace, schema: str | None) -> int:
    """The versions that read, then one line per damaged one and per unusable active one."""
    from curation.ranking import versions
    from curation.search.ranked import fallback_for
    from curation.training.ranker_round import learned_from

    found = versions.scan_versions(ws, schema)
    if not found.versions and not found.problems:
        print("no ranker versions yet: kbcurate rank train --schema S")
    names = {v.schema for v in found.versions} | set(ws.schemas())
    states = {s: versions.active_ranker(ws, s) for s in sorted(names)
              if schema is None or s == schema}
    for v in found.versions:
        active = states[v.schema].ident == v.id
        test = v.metrics.get("test", {}).get("ndcg@10")
        dev = v.metrics.get("dev", {}).get("ndcg@10")
        held = v.metrics.get("heldout", {}).get("ndcg@10")
        print(f"{v.id:<32}{'active' if active else '':<8}"
              f"{v.manifest.get('kind', ''):<10}held-out NDCG@10 {_f(held)}  dev {_f(dev)}  "
              f"test {_f(test)}  labels {len(v.manifest.get('labels_used', []) or [])}")
        print(f"{'':<40}learned from: {learned_from(v.manifest)}")
    for problem in found.problems:
        print(f"warning: skipped: {problem}")
    for state in states.values():
        if state.problem:
            print(f"warning: {state.notice(fallback_for(ws, state.schema).configuration)}")
    return 0


def _rounds(ws: Workspace, schema: str | None, limit: int) -> int:
    """The last rounds, newest first, one line each."""
    from curation.training.ranker_round import round_line
    from curation.training.round_history import last_rounds

    records = last_rounds(ws, schema, max(limit, 1))
    if not records:
        print("no ranker round yet: kbcurate rank train --schema S, or label "
              f"{Rankers(ws).retrain_every()} abstracts")
    for rec in records:
        print(f"{rec.schema}: {round_line(rec)}")
    return 0


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _train(ws: Workspace, args: argparse.Namespace) -> int:
    from curation.ranking.model import RankerOptions
    from curation.training.ranker import train_ranker

    if args.depth < 1:
        raise CurationError(f"--depth must be a positive number of candidates, got {args.depth}")
    result = train_ranker(ws, args.schema, user=CLI_ADMIN, options=RankerOptions(
        model=args.model, seed=args.seed), depth=args.depth, gate=not args.no_activate,
        dense_version=args.dense_version, base_dense=args.base_dense, progress=not args.quiet,
        reason=args.reason, trigger="kbcurate rank train")
    m = result.version.metrics
    if args.json:
        print_json({"version": result.version.id, "activated": result.activated,
                    "identical_to": result.identical_to,
                    "gate": result.decision.to_json(), "metrics": m,
                    "heldout": result.measurement.summary() if result.measurement else {},
                    "seconds": {"features": result.seconds_features, "fit": result.seconds_fit},
                    "labels_used": list(result.labels_used), "labels": result.labels})
        return 0
    from curation.training.ranker_round import learned_from

    saved = (f"identical to {result.identical_to}, not saved again" if result.identical_to
             else "saved")
    print(f"{result.version.id} ({saved}): {result.train_queries} train queries, "
          f"{result.train_rows} rows; features {result.seconds_features:.1f} s, fit "
          f"{result.seconds_fit:.1f} s")
    print(f"  learned from: {learned_from({'labels': result.labels})}")
    for split in ("heldout", "dev", "test"):
        if split in m:
            print(f"  {split}: NDCG@10 {m[split]['ndcg@10']:.3f} ({m[split]['queries']:.0f} "
                  "queries)")
    print(("activated: " if result.activated else "not activated: ")
          + "; ".join(result.decision.reasons))
    return 0


def _explain(ws: Workspace, args: argparse.Namespace) -> int:
    from curation.ranking.features import gather
    from curation.ranking.versions import active_ranker, load_ranker
    from curation.search.ranked import fallback_for, version_first_stages
    from curation.training.ranker import open_context
    from kb_sources.schema import get_schema

    sch = get_schema(args.schema, ws.schemas())
    state = active_ranker(ws, sch.name)
    if state.problem:
        raise CurationError(state.notice(fallback_for(ws, sch.name).configuration))
    version = state.version
    if version is None:
        raise CurationError(f"{sch.name} has no active ranker; kbcurate rank train --schema "
                            f"{sch.name}")
    partial = next((p for p in Relations(ws).partial(sch.name)
                    if p.query_key == args.relation), None)
    if partial is None:
        raise CurationError(f"No {sch.name} relation with query key {args.relation!r}; list "
                            f"them with kbcurate relations --schema {sch.name}")
    ranker = load_ranker(version, ws)
    dense, base = version_first_stages(ws, version)
    ctx = open_context(ws, sch.name, dense=dense, base=base, progress=not args.quiet,
                       held_out=False, depth=int(version.manifest.get("depth", 100)))
    text = partial.render(sch).text
    ranked = ctx.rank(ranker, text, partial.query, ctx.depth, partial.query_key)
    place = next((r for r in ranked if r.hit.doc_id == args.doc), None)
    if place is None:  # outside the candidates: explain its features all the same
        cands = gather([], extra=[args.doc])
        ctx.parts.load([args.doc])
        if args.doc not in ctx.parts:
            raise CurationError(f"No document {args.doc} in the workspace")
        row = ctx.features(partial.query, cands, partial.query_key)[0]
        print(f"{args.doc} is not among the {len(ranked)} candidates of {text!r} "
              f"({version.id}); its features say:")
    else:
        row = place.features
        print(f"{args.doc} is #{place.hit.rank} of {len(ranked)} for {text!r} ({version.id}, "
              f"score {place.hit.score:.3f}):")
    for reason in ctx.explain(ranker, row, partial.query) or []:
        print(f"  + {reason.text}  ({reason.contribution:+.3f})")
    return 0


HANDLERS = {"rank": cmd_rank}


def evaluate_best(args: argparse.Namespace) -> int:
    """``evaluate --retriever best``: measure, then record the schema's default ranking."""
    import json
    from pathlib import Path

    from curation.evaluation.best import choose_default, format_choice
    from curation.evaluation.harness import format_table

    if args.retriever != ["best"]:
        raise CurationError("--retriever best compares the configurations itself; give it "
                            "alone, without other --retriever names")
    with Workspace.open(workspace_path(args)) as ws:
        report, record = choose_default(ws, args.schema, user=CLI_ADMIN, split=args.split,
                                        progress=not args.quiet)
    if args.out:
        Path(args.out).write_text(json.dumps({**report.to_json(), "default": record.to_json()},
                                             indent=2), encoding="utf-8")
    print(format_table(report))
    print(format_choice(record))
    return 0


def simulate_ranker_command(args: argparse.Namespace) -> int:
    """``kbcurate simulate ranker`` (the parser lives in :mod:`curation.cli.simulate_commands`)."""
    import json
    import time
    from pathlib import Path

    from curation.simulation.ranker import (
        RankerSimulation,
        format_simulation,
        simulate_ranker,
    )

    config = RankerSimulation(rounds=args.rounds, labels_per_round=args.labels_per_round,
                              labels_per_query=args.labels_per_query, kb_share=args.kb_share,
                              depth=args.pool_depth, seed=args.seed,
                              tolerance_pp=args.tolerance, label_splits=args.label_splits,
                              reason=args.small_test_reason)
    with Workspace.open(workspace_path(args)) as ws:
        result = simulate_ranker(ws, args.schema, config, progress=not args.quiet)
        out = Path(args.out) if args.out else (
            ws.root / "exports" / f"simulation-ranker-{args.schema}-"
                                  f"{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "simulation.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(format_simulation(result))
    print(f"written: {out}/simulation.json")
    return 0
