"""``kbcurate models``: list, show, activate, retire, export, promote, history and import the
workspace's dense model versions."""

from __future__ import annotations

import argparse

from curation.cli.common import CLI_ADMIN, print_json, workspace_path
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``models`` sub-command."""
    p = sub.add_parser("models", parents=[common], help="the workspace's model versions")
    p.add_argument("action", choices=("list", "show", "activate", "retire", "export", "promote",
                                       "history", "import"))
    p.add_argument("version", nargs="?", help="version id (e.g. disease_gene-edel@1); import: "
                                              "a model folder or Hugging Face name")
    p.add_argument("dest", nargs="?", help="export: destination folder")
    p.add_argument("--schema", help="list/history: only this schema's versions")
    p.add_argument("--reason", default="",
                   help="activate/retire/promote: why (audited; promote requires it)")
    p.add_argument("--json", action="store_true", help="print JSON")
    g = p.add_argument_group("import (a published checkpoint, no training)")
    g.add_argument("--name", default="imported",
                   help="version id part: <schema>-<name>@n (e.g. bica_small, medcpt)")
    g.add_argument("--query-model", help="separate query encoder (MedCPT), folder or HF name")
    g.add_argument("--pooling", choices=("cls", "mean", "max", "lasttoken"),
                   help="override the pooling (default: the folder's, else the name's profile)")
    g.add_argument("--max-seq-length", type=int, default=256)
    g.add_argument("--query-prefix", help="text put before each query (default: profile)")
    g.add_argument("--doc-prefix", help="text put before each document (default: profile)")


def cmd_models(args: argparse.Namespace) -> int:
    from curation.store import models

    with Workspace.open(workspace_path(args)) as ws:
        if args.action in ("promote", "history"):
            _models_promote_history(ws, args)
            return 0
        if args.action == "import":
            _models_import(ws, args)
            return 0
        if args.action == "list":
            versions = models.list_models(ws, schema=args.schema)
            if args.json:
                print_json([v.to_json() for v in versions])
            else:
                print(models.format_models_table(versions) if versions else
                      "no model versions yet: train one with kbcurate train --schema S")
            return 0
        if not args.version:
            raise CurationError(f"kbcurate models {args.action} needs a VERSION "
                                "(see kbcurate models list)")
        if args.action == "show":
            print_json(models.get_model(ws, args.version).to_json())
        elif args.action == "activate":
            v = models.activate_model(ws, args.version, CLI_ADMIN, reason=args.reason)
            print(f"{v.id} is now the active {v.schema} model")
        elif args.action == "retire":
            v = models.retire_model(ws, args.version, CLI_ADMIN, reason=args.reason)
            print(f"{v.id} retired")
        else:
            if not args.dest:
                raise CurationError("kbcurate models export needs VERSION and DEST")
            print(models.export_model(ws, args.version, args.dest, user=CLI_ADMIN))
    return 0


def _models_import(ws: Workspace, args: argparse.Namespace) -> None:
    from curation.training.imports import import_checkpoint

    if not args.version or not args.schema:
        raise CurationError("kbcurate models import needs a SOURCE (model folder or Hugging Face "
                            "name) and --schema S, e.g. kbcurate models import ./BiCA-small "
                            "--schema disease_gene --name bica_small")
    v = import_checkpoint(ws, args.version, schema=args.schema, name=args.name,
                          query_model=args.query_model, pooling=args.pooling,
                          max_seq_length=args.max_seq_length, query_prefix=args.query_prefix,
                          doc_prefix=args.doc_prefix, actor="cli")
    print(f"imported {args.version} as {v.id} (candidate; evaluate it with kbcurate evaluate "
          f"--schema {v.schema} --retriever dense --model {v.id}, activate it with kbcurate "
          f"models activate {v.id})")


def _models_promote_history(ws: Workspace, args: argparse.Namespace) -> None:
    from curation.training.activation import promote
    from curation.training.retrain import history

    if args.action == "promote":
        if not args.version:
            raise CurationError("kbcurate models promote needs a VERSION and --reason TEXT")
        v = promote(ws, args.version, user=CLI_ADMIN, reason=args.reason)
        print(f"{v.id} is now the active {v.schema} model (promoted by hand: {args.reason})")
        return
    if not args.schema:
        raise CurationError("kbcurate models history needs --schema S")
    rows = history(ws, args.schema)
    if args.json:
        print_json(rows)
        return
    for r in rows:
        ndcg = f"{r['ndcg@10']:.4f}" if isinstance(r["ndcg@10"], float) else "-"
        promoted = f"promoted by {r['promoted_by']}: {r['reason']}" if r["promoted_by"] else ""
        print(f"{r['version']:<28}{r['status']:<11}NDCG@10 {ndcg:<8} "
              f"labels {r['labels_used']:<5}{promoted}")


#: ``kbcurate`` sub-command -> handler (merged through :mod:`curation.cli.train_commands`).
HANDLERS = {"models": cmd_models}
