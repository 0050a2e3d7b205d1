"""``kbcurate migrate``: move a workspace's database onto a PostgreSQL server; ``kbcurate
worker``: run its background jobs (on PostgreSQL: from any machine that reaches the database)."""

from __future__ import annotations

import argparse
import logging

from curation.cli.common import workspace_path
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``migrate`` and ``worker``."""
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

    p = sub.add_parser(
        "worker", parents=[common], help="run the workspace's background jobs",
        description="Claim and run queued jobs of the workspace. On PostgreSQL (procrastinate, "
                    "the default there) start workers on any machine that reaches the database "
                    "and holds the workspace folder at the same path; each job runs once "
                    "(row locks), and a worker that stops sending heartbeats has its job "
                    "failed with the reason. On SQLite (or jobs = \"table\") it runs the jobs "
                    "queued without a worker process. Ctrl+C stops it after the running jobs.")
    p.add_argument("--concurrency", type=int, default=1, metavar="N",
                   help="jobs run at the same time (default 1)")
    p.add_argument("--burst", action="store_true",
                   help="stop when no queued job is left instead of waiting for new ones")


def cmd_migrate(args: argparse.Namespace) -> int:
    from curation.store.transfer import migrate_to_postgresql

    with Workspace.open(workspace_path(args)) as ws:
        report = migrate_to_postgresql(ws, args.to, replace=args.replace, switch=args.switch)
    print(report.summary())
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from curation.jobs.queues import job_queue

    if args.concurrency < 1:
        raise CurationError(f"--concurrency {args.concurrency}: expected 1 or more")
    with Workspace.open(workspace_path(args)) as ws:
        queue = job_queue(ws)
        for name in ("curation.jobs", "procrastinate.worker"):  # job starts and ends
            logging.getLogger(name).setLevel(logging.DEBUG if args.verbose else logging.INFO)
        print(f"worker for {ws.root} ({queue.name} job queue, concurrency "
              f"{args.concurrency}){'' if args.burst else '; Ctrl+C stops it'}", flush=True)
        queue.work(ws, concurrency=args.concurrency, wait=not args.burst)
    return 0


HANDLERS = {"migrate": cmd_migrate, "worker": cmd_worker}
