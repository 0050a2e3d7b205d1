"""``kbcurate suggestions``: source suggestions from the command line.

``drafts`` writes a CIViC evidence-item draft for each accepted source suggestion
(:mod:`curation.search.civic_draft`), as CSV (formula cells neutralised) or JSON, to a file or
``-`` (standard output). Nothing is sent to CIViC: the curator fills CIViC's form from the file.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from curation.cli.common import workspace_path
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``suggestions`` command and its actions."""
    p = sub.add_parser("suggestions", parents=[common], help="source suggestions: CIViC drafts",
                       description="Confirmed source suggestions of the workspace (the Review "
                                   "page's Suggestions tab)")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    d = psub.add_parser("drafts", parents=[common],
                        help="CIViC evidence-item drafts of the accepted suggestions",
                        description="One draft per accepted source suggestion: CIViC's fields "
                                    "pre-filled from the relation and the abstract's evidence "
                                    "sentences, the rest left for the curator (column to_fill). "
                                    "Never submitted to CIViC.")
    d.add_argument("out", metavar="OUT", help="file to write, or - for standard output")
    d.add_argument("--format", choices=("csv", "json"), default=None, dest="fmt",
                   help="csv or json (default: the file's suffix, else csv)")
    d.add_argument("--schema", help="only suggestions of this schema")


def cmd_suggestions(args: argparse.Namespace) -> int:
    return {"drafts": _drafts}[args.action](args)


def _format(args: argparse.Namespace) -> str:
    if args.fmt:
        return args.fmt
    suffix = Path(args.out).suffix.lower().lstrip(".")
    return suffix if suffix in ("csv", "json") else "csv"


def _drafts(args: argparse.Namespace) -> int:
    from curation.search.civic_draft import FORMATS, civic_drafts
    from curation.search.suggestions import list_suggestions
    from curation.store.safe_files import write_atomic
    from kb_sources.schema import get_schema

    fmt = _format(args)
    with Workspace.open(workspace_path(args)) as ws:
        schema = get_schema(args.schema, ws.schemas()).name if args.schema else None
        accepted = list_suggestions(ws, schema=schema, status="accepted")
        drafts = civic_drafts(ws, accepted)
    text = FORMATS[fmt][0](drafts)
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.out)
    if out.is_dir():
        raise CurationError(f"{out} is a folder; name the file to write, e.g. "
                            f"{out / ('civic_drafts.' + fmt)}")
    if not out.parent.is_dir():
        raise CurationError(f"The folder {out.parent} does not exist; create it or write "
                            "elsewhere")
    write_atomic(out, text, perm=0o644)
    empty = sum(1 for d in drafts if d.to_fill)
    print(f"wrote {len(drafts)} CIViC draft(s) to {out} ({fmt}); {empty} with fields to fill "
          "(column to_fill). Nothing was submitted to CIViC.", file=sys.stderr)
    return 0


HANDLERS = {"suggestions": cmd_suggestions}
