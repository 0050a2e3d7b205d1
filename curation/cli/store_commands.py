"""``kbcurate migrate``: move a workspace's database onto a PostgreSQL server."""

from __future__ import annotations

import argparse

from curation.cli.common import workspace_path
from curation.store.workspace import Workspace


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``migrate``."""
    p = sub.add_parser(
        "migrate", parents=[common], help="copy the workspace's database to PostgreSQL",
        description="Copy a SQLite workspace into an empty PostgreSQL database (one "
                    "transaction; row counts and SHA-256 checksums compared per table), then "
                    "switch the workspace to it by writing WS/store.toml. The password comes "
                    "from PGPASSWORD or ~/.pgpass, never from the URL. Stop the app and "
                    "workers first.")
    p.add_argument("--to", required=True, metavar="URL",
                   help="postgresql://USER@HOST:PORT/DATABASE (an empty database)")
    p.add_argument("--replace", action="store_true",
                   help="overwrite a database that already holds a kbcurate workspace")
    p.add_argument("--no-switch", dest="switch", action="store_false",
                   help="copy and check only; keep using workspace.sqlite")


def cmd_migrate(args: argparse.Namespace) -> int:
    from curation.store.transfer import migrate_to_postgresql

    with Workspace.open(workspace_path(args)) as ws:
        report = migrate_to_postgresql(ws, args.to, replace=args.replace, switch=args.switch)
    print(report.summary())
    return 0


HANDLERS = {"migrate": cmd_migrate}
