"""``kbcurate models``: list, show, activate, retire, export, promote, history and import the
workspace's dense model versions."""

from __future__ import annotations

import argparse
from typing import Any

from curation.access.users import User
from curation.cli.common import CLI_ADMIN, print_json, workspace_path
from curation.store.models import Models, ModelVersion
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
    p.add_argument("--background", action="store_true",
                   help="activate/promote: build the version's indexes in a background job "
                        "(its progress shows in the app's sidebar) and print the job id; "
                        "needs --reason")
    g = p.add_argument_group("import (a published checkpoint, no training)")
    g.add_argument("--name", default="imported",
                   help="version id part: <schema>-<name>@n (e.g. bica_small, medcpt)")
    g.add_argument("--query-model", help="separate query encoder (MedCPT), folder or HF name")
    g.add_argument("--pooling", choices=("cls", "mean", "max", "lasttoken"),
                   help="override the pooling (default: the folder's, else the name's profile)")
    g.add_argument("--max-seq-length", type=int, default=256)
    g.add_argument("--kind", default="auto", choices=("auto", "dense", "cross"),
                   help="dense: a bi-encoder; cross: a cross-encoder (re-ranks BM25's top K, its "
                        "own active slot); auto: cross when the folder's config.json is a "
                        "one-label sequence classifier")
    g.add_argument("--query-prefix", help="text put before each query (default: profile)")
    g.add_argument("--doc-prefix", help="text put before each document (default: profile)")
    g.add_argument("--evaluation", default="corpus", choices=("corpus", "pool", "none"),
                   help="test metrics of the imported version, as a trained one gets: the "
                        "whole corpus (default; encodes it), the cheaper test pool, or none")


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
            versions = Models(ws).versions(schema=args.schema)
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
            print_json(Models(ws).get(args.version).to_json())
        elif args.action == "activate":
            if args.background:
                _background(ws, args)
            else:
                activate_with_progress(ws, args.version, reason=args.reason, quiet=args.quiet)
        elif args.action == "retire":
            v = Models(ws).retire(args.version, CLI_ADMIN, reason=args.reason)
            print(f"{v.id} retired")
        else:
            if not args.dest:
                raise CurationError("kbcurate models export needs VERSION and DEST")
            print(Models(ws).export(args.version, args.dest, user=CLI_ADMIN))
    return 0


def _models_import(ws: Workspace, args: argparse.Namespace) -> None:
    from curation.training.imports import (
        import_checkpoint,
        import_cross_encoder,
        is_cross_source,
    )

    if not args.version or not args.schema:
        raise CurationError("kbcurate models import needs a SOURCE (model folder or Hugging Face "
                            "name) and --schema S, e.g. kbcurate models import ./BiCA-small "
                            "--schema disease_gene --name bica_small")
    if args.kind == "cross" or (args.kind == "auto" and is_cross_source(args.version)):
        v = import_cross_encoder(ws, args.version, schema=args.schema,
                                 name="cross_imported" if args.name == "imported" else args.name,
                                 max_seq_length=args.max_seq_length, actor="cli",
                                 evaluation=None if args.evaluation == "none" else "corpus",
                                 progress=not args.quiet)
        _say_imported(args.version, v)
        return
    v = import_checkpoint(ws, args.version, schema=args.schema, name=args.name,
                          query_model=args.query_model, pooling=args.pooling,
                          max_seq_length=args.max_seq_length, query_prefix=args.query_prefix,
                          doc_prefix=args.doc_prefix, actor="cli",
                          evaluation=None if args.evaluation == "none" else args.evaluation,
                          progress=not args.quiet)
    _say_imported(args.version, v)


def _say_imported(source: str, v: ModelVersion) -> None:
    ndcg = v.metrics.get("test_ndcg@10", v.metrics.get("testpool_ndcg@10"))
    scored = (f"test NDCG@10 {ndcg:.3f}" if isinstance(ndcg, int | float)
              else "no test metrics")
    print(f"imported {source} as {v.id} (candidate, {scored}; activate it with kbcurate "
          f"models activate {v.id} --reason TEXT)")
    for warning in v.metrics.get("warnings") or []:
        print(f"warning: {warning}")


def _models_promote_history(ws: Workspace, args: argparse.Namespace) -> None:
    from curation.training.activation import check_promotion
    from curation.training.retrain import history

    if args.action == "promote":
        if not args.version:
            raise CurationError("kbcurate models promote needs a VERSION and --reason TEXT")
        check_promotion(CLI_ADMIN, args.reason)
        if args.background:
            _background(ws, args)
            return
        v = activate_with_progress(ws, args.version, reason=args.reason.strip(),
                                   quiet=args.quiet, say_active=False)
        print(f"{v.id} is now the active {v.schema} model (promoted by hand: {args.reason})")
        return
    if not args.schema:
        raise CurationError("kbcurate models history needs --schema S")
    rows = history(ws, args.schema)
    if args.json:
        print_json([r.to_json() for r in rows])
        return
    for r in rows:
        ndcg = f"{r.ndcg_at_10:.4f}" if isinstance(r.ndcg_at_10, float) else "-"
        promoted = f"promoted by {r.promoted_by}: {r.reason}" if r.promoted_by else ""
        print(f"{r.version:<28}{r.status:<11}NDCG@10 {ndcg:<8} "
              f"labels {r.labels_used:<5}{promoted}")


class StageBars:
    """``on_progress`` of :func:`~curation.training.activation.build_version_indexes` on the
    terminal: one tqdm bar per stage (the dense index, then the hybrid one); none when quiet."""

    def __init__(self, version: str, quiet: bool = False) -> None:
        self.version = version
        self.quiet = quiet
        self.stage = ""
        self.bar: Any = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.quiet:
            return
        if stage != self.stage:
            from tqdm.auto import tqdm

            self.close()
            what = "hybrid index" if stage == "hybrid" else "index"
            self.bar = tqdm(total=total, desc=f"building the {what} of {self.version}",
                            unit="doc", mininterval=0.5)
            self.stage = stage
        self.bar.n = done  # the hybrid's two components each count from 0
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def activate_with_progress(ws: Workspace, ident: str, *, reason: str, quiet: bool = False,
                           user: User = CLI_ADMIN, say_active: bool = True) -> ModelVersion:
    """Build the version's dense and hybrid indexes with progress bars, print what the build
    took (documents/s), then activate it (``kbcurate models activate``, ``train --activate``).
    """
    from curation.training.activation import build_and_activate

    bars = StageBars(ident, quiet)
    try:
        version, build = build_and_activate(ws, ident, user=user, reason=reason,
                                            on_progress=bars)
    finally:
        bars.close()
    print(build.summary())
    if say_active:
        print(f"{version.id} is now the active {version.schema} model")
    return version


def _background(ws: Workspace, args: argparse.Namespace) -> None:
    from curation.training.activation import start_activation

    job = start_activation(ws, CLI_ADMIN, args.version, args.reason)
    version = job.params.get("version")
    if version != args.version:
        print(f"activation job {job.id} of {version} ({job.params.get('schema')}) is already "
              f"{job.status.value}; start {args.version} after it ends")
        return
    print(f"activation job {job.id} {job.status.value}: it builds the indexes of {version}, "
          "then makes it the active model (progress in the app's sidebar)")


#: ``kbcurate`` sub-command -> handler (merged through :mod:`curation.cli.train_commands`).
HANDLERS = {"models": cmd_models}
