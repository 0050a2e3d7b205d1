"""Implementations of the ``kbcurate`` sub-commands (argument parsing lives in cli.py)."""

from __future__ import annotations

import argparse
import csv
import sys

import pandas as pd

from curation.cli import (
    baseline_commands,
    bench_commands,
    evaluation_commands,
    pubmed_commands,
    rank_commands,
    simulate_commands,
    store_commands,
    suggestion_commands,
    train_commands,
    vector_commands,
    watch_commands,
)
from curation.cli.common import print_json, workspace_path
from curation.cli.vector_commands import dense_options
from curation.search.relation_table import relations_frame
from curation.store.importer import import_file
from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from curation.templates import render_query
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema
from kb_sources.spreadsheet import safe_frame


def dispatch(args: argparse.Namespace) -> int:
    """Run the command named by ``args.command``."""
    handler = {
        "init": cmd_init, "import": cmd_import, "stats": cmd_stats,
        "relations": cmd_relations, "query": cmd_query, "schema": cmd_schema,
        "demo": cmd_demo, "serve": cmd_serve, "fetch": cmd_fetch, "users": cmd_users,
        "labels": cmd_labels, "settings": cmd_settings, "index": cmd_index,
        **evaluation_commands.HANDLERS,
        **train_commands.HANDLERS,
        **simulate_commands.HANDLERS,
        **bench_commands.HANDLERS,
        **vector_commands.HANDLERS,
        **rank_commands.HANDLERS,
        **pubmed_commands.HANDLERS,
        **suggestion_commands.HANDLERS,
        **store_commands.HANDLERS,
        **watch_commands.HANDLERS,
    }[args.command]
    return handler(args)


def cmd_init(args: argparse.Namespace) -> int:
    root = args.dir or workspace_path(args)
    with Workspace.init(root, store_url=getattr(args, "store", None),
                        group_access=getattr(args, "group_access", False)) as ws:
        print(f"workspace ready at {ws.root} (schema version {ws.schema_version})")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from curation.store.importer import import_citations, import_mesh_tree

    if args.what == "docs" and args.reader == baseline_commands.READER:
        return baseline_commands.cmd_import_baseline(args)
    with Workspace.open(workspace_path(args)) as ws:
        progress = not args.quiet
        if args.what == "mesh":
            n = import_mesh_tree(ws, args.file, progress=progress)
            print(f"{args.file}: {n} MeSH tree numbers added")
            return 0
        if args.what == "mesh-headings":
            from curation.store.importer import import_mesh_headings

            n = import_mesh_headings(ws, args.file, progress=progress)
            print(f"{args.file}: {n} documents given MeSH headings")
            return 0
        if args.what == "citations":
            n = import_citations(ws, args.file, progress=progress)
            print(f"{args.file}: {n} citation edges added")
            return 0
        options = {k: v for k in ("mapping", "source") if (v := getattr(args, k, None))}
        report = import_file(ws, args.what, args.reader, args.file, progress=progress, **options)
        print(report.summary())
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with Workspace.open(workspace_path(args)) as ws:
        stats = ws.stats()
    if args.json:
        print_json(stats.to_json())
        return 0
    rows = [("documents", stats.documents), ("annotations", stats.annotations),
            ("relations", stats.relations), ("relations with PMIDs", stats.relations_with_pmids),
            ("entities", stats.entities), ("synonyms", stats.synonyms),
            ("citation edges", stats.citations), ("MeSH terms", stats.mesh_terms),
            ("labels", stats.labels), ("model versions", len(stats.model_versions))]
    for name, value in rows:
        print(f"{name:<22}{value:>10,}")
    for title, data in (("documents by source", stats.documents_by_source),
                        ("relations by source", stats.relations_by_source),
                        ("relations by schema", stats.relations_by_schema),
                        ("partial relations by schema", stats.partial_relations_by_schema)):
        if data:
            print(f"\n{title}:")
            for key, value in sorted(data.items()):
                print(f"  {key:<20}{value:>10,}")
    return 0


def _parse_pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CurationError(f"{what} {item!r} is not NAME=TEXT (e.g. gene=BRAF)")
        out[name.strip()] = value.strip()
    return out


def cmd_relations(args: argparse.Namespace) -> int:
    filters = _parse_pairs(args.where, "filter")
    with Workspace.open(workspace_path(args)) as ws:
        schema = get_schema(args.schema, ws.schemas())
        rows = Relations(ws).partial(schema.name, filters, source=args.source,
                                     limit=args.limit)
    if args.format == "json":
        print_json([{"schema": p.schema, "query_key": p.query_key,
                     "query": {s: [e.text for e in ents] for s, ents in p.query.items()},
                     "query_text": p.render(schema).text, "answers": p.answer_texts(),
                     "pmids": list(p.pmids), "sources": list(p.sources),
                     "n_records": p.n_records} for p in rows])
        return 0
    frame = relations_frame(rows, schema.answer)
    if frame.empty:
        print(f"no partial relations of schema {schema.name} match")
        return 0
    if args.format == "tsv":
        safe_frame(frame).to_csv(sys.stdout, sep="\t", index=False, quoting=csv.QUOTE_MINIMAL)
    else:
        with pd.option_context("display.max_colwidth", 60, "display.width", 200):
            print(frame.to_string(index=False))
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    values = _parse_pairs(args.values, "slot value")
    template: str | int | None = args.template
    if template is not None and template.isdigit():
        template = int(template)
    with Workspace.open(workspace_path(args)) as ws:
        schema = get_schema(args.schema, ws.schemas())
    print(render_query(schema, values, template).text)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    with Workspace.open(workspace_path(args)) as ws:
        if args.action == "add":
            schema = ws.add_schema(args.file, replace=args.replace)
            print(f"schema {schema.name} {'saved' if args.replace else 'added'} to "
                  f"{ws.root / 'schemas'}")
            return 0
        for schema in ws.schemas().values():
            slots = ", ".join(f"{s.name}:{s.type}{'?' if s.query else ''}" for s in schema.slots)
            print(f"{schema.name:<16} {slots}  -> {schema.answer}   {schema.templates[0]}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from curation.cli.demo import build_demo_workspace, default_demo_path
    from curation.store.config import resolve_data_dir

    root = workspace_path(args) if (args.workspace or _env_ws()) else default_demo_path()
    # serving: the rankers and defaults are built in the background, the app answers at once
    summary = build_demo_workspace(root, resolve_data_dir(args.data_dir),
                                   progress=not args.quiet, rank=args.no_serve)
    print(summary)
    if args.no_serve:
        return 0
    from curation.jobs.kinds import SYSTEM_USER
    from curation.jobs.queue import newest_job_id, stop_jobs_after
    from curation.training.defaults import start_defaults_job

    with Workspace.open(root) as ws:
        mark = newest_job_id(ws)
        job = start_defaults_job(ws)
    if job is not None:
        print(f"training each schema's ranker and measuring its default in the background (job "
              f"{job.id}); until it ends the schemas rank by bm25 + rerank")
    if not args.no_index:
        _start_dense_index(root)
    args.workspace = str(root)
    try:
        return cmd_serve(args)
    finally:  # the app stopped (TERM, Ctrl+C): so do the jobs this demo started
        with Workspace.open(root) as ws:
            stopped = stop_jobs_after(ws, mark, user=SYSTEM_USER)
        if stopped:
            print(f"stopped {len(stopped)} background job(s) of this demo: "
                  f"{', '.join(map(str, stopped))}", file=sys.stderr)


def _start_dense_index(root: object) -> None:
    """BM25 is ready at once; the dense index builds in a background job the app shows."""
    from curation.jobs.kinds import SYSTEM_USER
    from curation.search.choices import ensure_index_job
    from curation.search.indexing import index_ready

    with Workspace.open(root) as ws:  # type: ignore[arg-type]
        if not index_ready(ws, "dense"):
            job = ensure_index_job(ws, "dense", user=SYSTEM_USER)
            print(f"building the dense index in the background (job {job.id}); the app offers "
                  "it when ready")


def _env_ws() -> str | None:
    import os

    from curation.store.config import WORKSPACE_ENV
    return os.environ.get(WORKSPACE_ENV)


def cmd_serve(args: argparse.Namespace) -> int:
    from curation.cli.serve import serve

    return serve(workspace_path(args), host=args.host, port=args.port)


def cmd_fetch(args: argparse.Namespace) -> int:
    from curation.cli.online import fetch_citations_into, fetch_civic, fetch_pubmed_into

    with Workspace.open(workspace_path(args)) as ws:
        if args.what == "civic":
            path, report = fetch_civic(ws, args.dest, do_import=args.do_import,
                                       progress=not args.quiet)
            print(f"downloaded {path}" + (f"; {report.summary()}" if report else ""))
            return 0
        pmids = _pmid_args(args)
        if args.what == "pubmed":
            report = fetch_pubmed_into(ws, pmids, email=args.email, api_key=args.api_key,
                                       progress=not args.quiet)
            print(report.summary())
        else:
            n = fetch_citations_into(ws, pmids, email=args.email, api_key=args.api_key)
            print(f"{n} citation edges added")
    return 0


def _pmid_args(args: argparse.Namespace) -> list[str]:
    pmids = list(args.pmids)
    if args.from_file:
        from kb_sources.io import iter_lines

        pmids += [line.strip() for _, line in iter_lines(args.from_file) if line.strip()]
    if not pmids:
        raise CurationError("No PMIDs given: list them or pass --from-file FILE")
    return pmids


def cmd_users(args: argparse.Namespace) -> int:
    import getpass

    from curation.access.users import USERS_FILE, UserStore

    store = UserStore(workspace_path(args) / USERS_FILE)
    if args.action == "list":
        for user in store.users():
            print(f"{user.name:<20}{user.role.value}")
        return 0
    if not args.name:
        raise CurationError(f"users {args.action} needs a user name")
    if args.action == "remove":
        store.remove(args.name)
        print(f"removed {args.name}")
        return 0
    password = (sys.stdin.readline().rstrip("\n") if args.password_stdin
                else getpass.getpass(f"password for {args.name}: "))
    user = store.add(args.name, password, args.role)
    print(f"user {user.name} ({user.role.value}) saved in {store.path}")
    return 0


def cmd_labels(args: argparse.Namespace) -> int:
    from curation.access.label_export import export_labels_with_final_grades

    with Workspace.open(workspace_path(args)) as ws:
        if args.action == "agreement":
            if len(args.args) != 2:
                raise CurationError("labels agreement needs two user names")
            result = Labels(ws).agreement(*args.args)
            print(f"{result.shared} shared items; observed agreement {result.observed:.3f}; "
                  f"Cohen's kappa {result.kappa:.3f}")
            return 0
        if len(args.args) != 1:
            raise CurationError("labels export needs one output file (.csv, .tsv or .jsonl)")
        labels = Labels(ws).find(user=args.user, schema=args.schema, grade=args.grade)
        path = export_labels_with_final_grades(ws, labels, args.args[0])
    print(f"{len(labels)} labels written to {path} (with each item's final grade)")
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    """Show or switch a workspace setting; the CLI acts as the admin 'cli' (as models promote)."""
    from curation.access.adjudication import blind_mode, set_blind_mode
    from curation.access.users import Role, User

    with Workspace.open(workspace_path(args)) as ws:
        if args.value is not None:
            set_blind_mode(ws, args.value == "on", user=User("cli", Role.ADMIN))
        print(f"{args.name}: {'on' if blind_mode(ws) else 'off'}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from curation.search.indexing import (
        get_index,
        index_folder,
        with_dense_options,
        with_workspace_defaults,
    )
    from retrievers.faiss_index import describe_saved

    options = with_dense_options(args.retriever, {**dense_options(args), **index_options(args)})
    with Workspace.open(workspace_path(args)) as ws:
        index = get_index(ws, args.retriever, options, progress=not args.quiet,
                          rebuild=args.rebuild)
        folder = index_folder(ws, args.retriever,
                              with_workspace_defaults(ws, args.retriever, options))
    faiss = "".join(f"; FAISS {text}" for text in describe_saved(folder))
    print(f"{args.retriever} index of {len(index):,} documents ({index.label}{faiss}) in {folder}")
    return 0


#: ``kbcurate index`` FAISS arguments -> dense retriever options (only those given are passed,
#: so an index built without them keeps its folder).
INDEX_OPTIONS = {"kind": "index", "nlist": "nlist", "nprobe": "nprobe", "hnsw_m": "hnsw_m",
                 "ef_search": "ef_search", "fp16": "fp16"}


def index_options(args: argparse.Namespace) -> dict[str, object]:
    """The FAISS options given on the command line (``--kind``, ``--nprobe``, ``--fp16`` ...)."""
    return {option: value for dest, option in INDEX_OPTIONS.items()
            if (value := getattr(args, dest, None)) is not None}
