"""``kbcurate watch``: watch relations for new abstracts (``add``, ``list``, ``remove``,
``run``).

``add`` watches one relation (``SLOT=TEXT ...``, with ``--query`` an edited Entrez query) or the
relations a filter lists (``--where NAME=TEXT``, ``--source KB``, as ``kbcurate relations``);
``--owner`` names the curator or admin who owns it (default: the command line, ``cli``).
``run`` runs the due watches (``--all``: every watch; ``ID ...``: those) in this process, one
after the other, with a progress bar (``--quiet``: none), and exits with 1 when a watch failed
(each failure on one line of stderr; the next run catches up): the command a cron line calls.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tqdm.auto import tqdm

from curation.access.users import User
from curation.cli.common import CLI_ADMIN, print_json, workspace_path
from curation.store.watches import Watch, WatchRun
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``watch`` command and its actions."""
    p = sub.add_parser("watch", parents=[common], help="watch relations for new PubMed abstracts",
                       description="A watch re-runs a relation's PubMed query for what appeared "
                                   "since its last run (Entrez date), then fetches, imports and "
                                   "ranks it; call `kbcurate watch run` from cron")
    wsub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = wsub.add_parser("add", parents=[common], help="watch a relation or a filter of relations")
    a.add_argument("--schema", default="PO", help="relation schema (default PO)")
    a.add_argument("slots", nargs="*", metavar="SLOT=TEXT",
                   help="the relation's query entities, e.g. gene=BRAF variant=V600E")
    a.add_argument("--where", action="append", default=[], metavar="NAME=TEXT",
                   help="watch the relations this filter lists (a slot or attribute, as "
                        "`kbcurate relations --where`); repeatable")
    a.add_argument("--source", help="with --where: only relations from this KB")
    a.add_argument("--query", help="an edited Entrez query (one relation only)")
    a.add_argument("--owner", help="the curator or admin who owns it (default: cli)")
    a.add_argument("--since", metavar="YYYY-MM-DD",
                   help="the first run asks PubMed from this day (default: 30 days ago)")
    a.add_argument("--every", type=int, default=1, metavar="DAYS",
                   help="due this many days after its last run (default 1)")
    a.add_argument("--max", type=int, default=200, dest="max_hits",
                   help="PubMed ids taken per relation and run (default 200)")
    a.add_argument("--json", action="store_true", help="print JSON for scripts")
    ls = wsub.add_parser("list", parents=[common], help="the watches and their last runs")
    ls.add_argument("--schema", help="only this schema's watches")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    rm = wsub.add_parser("remove", parents=[common], help="stop watches")
    rm.add_argument("ids", nargs="+", metavar="ID")
    r = wsub.add_parser("run", parents=[common],
                        help="run the due watches now (for cron); exit 1 when one failed")
    r.add_argument("ids", nargs="*", metavar="ID", help="run these watches, due or not")
    r.add_argument("--all", action="store_true", help="run every watch, due or not")
    r.add_argument("--email", help="contact email NCBI requires (default: $NCBI_EMAIL, else "
                                   "the workspace setting)")
    r.add_argument("--api-key", help="NCBI API key (default: $NCBI_API_KEY, else the "
                                     "workspace setting)")
    r.add_argument("--json", action="store_true", help="print JSON for scripts")


def _pairs(values: list[str], example: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, eq, text = value.partition("=")
        if not eq or not name.strip() or not text.strip():
            raise CurationError(f"{value!r} is not NAME=TEXT; e.g. {example}")
        out[name.strip()] = text.strip()
    return out


def _ids(values: list[str]) -> list[int]:
    """Watch ids from the command line.

    Raises:
        CurationError: One is not a number.
    """
    bad = [v for v in values if not v.isdigit()]
    if bad:
        raise CurationError(f"Watch ids are numbers (kbcurate watch list), not "
                            f"{', '.join(map(repr, bad))}")
    return [int(v) for v in values]


def _owner(ws: Workspace, name: str | None) -> User:
    from curation.access.signin import users_store

    if not name or name == CLI_ADMIN.name:
        return CLI_ADMIN
    user = users_store(ws.root).user_named(name)
    if user is None:
        raise CurationError(f"No user {name!r} in the workspace's users file; add one with "
                            f"`kbcurate users add {name} --role curator`")
    return user


def cmd_watch(args: argparse.Namespace) -> int:
    return {"add": _add, "list": _list, "remove": _remove, "run": _run}[args.action](args)


def _add(args: argparse.Namespace) -> int:
    from curation.cli.pubmed_commands import parse_slots
    from curation.pubmed.watch import add_watch, watch_json

    if bool(args.slots) == bool(args.where):
        raise CurationError("Give a relation (SLOT=TEXT ...) or a filter (--where NAME=TEXT), "
                            "not both and not neither")
    if args.where and args.query:
        raise CurationError("--query edits one relation's query; a filter watch builds each "
                            "relation's query itself")
    with Workspace.open(workspace_path(args)) as ws:
        schema = get_schema(args.schema, ws.schemas())
        watch = add_watch(
            ws, _owner(ws, args.owner), schema.name,
            slots=parse_slots(schema, args.slots) if args.slots else None,
            filters=_pairs(args.where, "gene=BRAF") if args.where else None,
            source=args.source, query=args.query, max_hits=args.max_hits,
            every_days=args.every, since=args.since)
    if args.json:
        print_json(watch_json(watch))
    else:
        print(f"watch {watch.id}: {watch.label} (owner {watch.owner}); the first run asks "
              f"PubMed from {watch.mindate}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from curation.pubmed.watch import watch_json
    from curation.store.watches import Watches

    with Workspace.open(workspace_path(args)) as ws:
        schema = get_schema(args.schema, ws.schemas()).name if args.schema else None
        watches = Watches(ws).watches(schema)
        last = Watches(ws).last_runs(w.id for w in watches)
    if args.json:
        print_json([{**watch_json(w), "last_run": _run_json(last.get(w.id))} for w in watches])
        return 0
    if not watches:
        print("no watch (kbcurate watch add)")
    for w in watches:
        run = last.get(w.id)
        state = "never ran" if run is None else (
            f"last run {run.finished_at[:16]}: " + (f"FAILED: {run.error}" if run.error else
                                                    f"{run.new_pmids} new"))
        print(f"{w.id:>4}  {w.schema:<8} {w.label}  (owner {w.owner}; every {w.every_days} "
              f"d; next from {w.mindate}; {state})")
    return 0


def _run_json(run: WatchRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"id": run.id, "finished_at": run.finished_at, "status": run.status,
            "since": run.mindate, "until": run.maxdate, "found": run.found,
            "fetched": run.fetched, "imported": run.imported, "new": run.new_pmids,
            "best_score": run.best_score, "error": run.error}


def _remove(args: argparse.Namespace) -> int:
    from curation.pubmed.watch import get_watch, remove_watch

    with Workspace.open(workspace_path(args)) as ws:
        ids = [get_watch(ws, i).id for i in _ids(args.ids)]  # all exist, or none is removed
        for watch_id in dict.fromkeys(ids):
            watch = remove_watch(ws, CLI_ADMIN, watch_id)
            print(f"removed watch {watch.id}: {watch.label}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from curation.pubmed.ncbi import ncbi_settings
    from curation.pubmed.watch_run import chosen_watches, run_watches

    if args.all and args.ids:
        raise CurationError("Give watch ids or --all, not both")
    with Workspace.open(workspace_path(args)) as ws:
        watches = chosen_watches(ws, _ids(args.ids), every=args.all)
        settings = ncbi_settings(ws, email=args.email, api_key=args.api_key)
        bar = tqdm(total=len(watches), unit=" watches", desc="watches", disable=args.quiet,
                   file=sys.stderr)

        def show(watch: Watch, fraction: float, message: str) -> None:
            bar.set_description(f"watch {watch.id}")
            bar.set_postfix_str(message[:120], refresh=True)

        try:
            outcomes = run_watches(ws, watches, settings=settings, actor=CLI_ADMIN.name,
                                   progress=show, done=lambda outcome: bar.update(1))
        finally:
            bar.close()
    failed = [o for o in outcomes if not o.ok]
    if args.json:
        print_json([o.to_json() for o in outcomes])
    elif not args.quiet:
        print(f"{len(outcomes)} watch{'es' if len(outcomes) != 1 else ''} run"
              + ("" if outcomes else " (none due)"))
        for o in outcomes:
            if o.ok:
                print(o.message())
    for o in failed:
        print(f"error: {o.message()}", file=sys.stderr)
    return 1 if failed else 0


HANDLERS = {"watch": cmd_watch}
