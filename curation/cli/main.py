"""The ``kbcurate`` command line.

Every command takes ``--workspace DIR`` (default: ``$KBCURATE_WORKSPACE``). Errors the user can fix
(:class:`~kb_sources.errors.CurationError`) are printed as one message with exit code 2, and so is
any SQLite error or file error that reaches this level (a full disk, a read-only mount, a locked
workspace): never a traceback (``--verbose`` logs it).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from curation.cli import store_commands
from curation.cli.common import CommandParser, add_backend_args, workspace_path
from curation.cli.legacy import TopParser
from curation.store.config import DATA_ENV, WORKSPACE_ENV
from curation.store.errors import DATABASE_ERRORS, describe_database_error, describe_os_error
from kb_sources.errors import CurationError
from kb_sources.registry import readers
from retrievers.errors import RetrieverError

logger = logging.getLogger("kbcurate")


def _reader_help(kind: str) -> str:
    return "\n".join(f"  {s.name:<12} {s.description}" for s in readers(kind))  # type: ignore[arg-type]


#: Values of the options every command takes (:func:`_common_options`) when none is given.
COMMON_DEFAULTS = {"workspace": None, "quiet": False, "verbose": False}


def _common_options() -> argparse.ArgumentParser:
    """Parent parser of every (sub)command: ``--workspace``, ``--quiet``, ``--verbose``.

    They are accepted at each level of a nested command (``schema -w WS add FILE`` as well as
    ``schema add FILE -w WS``). Their defaults are ``SUPPRESS``: argparse copies every value a
    subparser sets onto the namespace, so a default of None in ``add`` would overwrite the ``-w``
    given to ``schema``. The real defaults (:data:`COMMON_DEFAULTS`) are set once, on the top
    parser; where the option is given twice the later one wins.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workspace", "-w", default=argparse.SUPPRESS,
                        help=f"workspace folder (default: ${WORKSPACE_ENV})")
    common.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                        help="no progress bars")
    common.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS,
                        help="debug logging")
    return common


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (reader names and descriptions come from the registry).

    It takes the old spellings of renamed commands too (``match-bench``, ``simulate
    --screening``, ...), with a note on stderr (:mod:`curation.cli.legacy`).
    """
    common = _common_options()
    fmt = argparse.RawDescriptionHelpFormatter
    parser = TopParser(
        prog="kbcurate", formatter_class=fmt,
        description="Knowledge-base curation assistant: find PubMed abstracts that complete "
                    "partial KB relations.",
        epilog=f"KB readers:\n{_reader_help('kb')}\n\ndocument readers:\n{_reader_help('docs')}")
    parser.set_defaults(**COMMON_DEFAULTS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=CommandParser)

    _init_parser(sub, common)
    store_commands.add_parsers(sub, common)

    _import_parser(sub, common)
    _fetch_parser(sub, common)
    _users_parser(sub, common)
    _labels_parser(sub, common)
    _settings_parser(sub, common)

    p = sub.add_parser("stats", parents=[common], help="counts of what the workspace holds")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")

    p = sub.add_parser("relations", parents=[common], help="list partial relations")
    p.add_argument("--schema", default="PO", help="schema name (default PO)")
    p.add_argument("--where", action="append", default=[], metavar="NAME=TEXT",
                   help="filter on a slot or attribute, e.g. gene=BRAF or evidence_level=A")
    p.add_argument("--source", help="only records from this KB")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--format", choices=("table", "json", "tsv"), default="table")

    _index_parser(sub, common)
    _evaluate_parser(sub, common)

    p = sub.add_parser("query", parents=[common], help="render a templated query")
    p.add_argument("--schema", default="PO")
    p.add_argument("--template", help="template index or text")
    p.add_argument("values", nargs="+", metavar="SLOT=TEXT")

    _schema_parser(sub, common)

    _app_parsers(sub, common)

    _wing_parsers(sub, common)
    return parser


def _init_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("init", parents=[common], help="create a workspace")
    p.add_argument("dir", nargs="?", help="folder to create (default: --workspace)")
    p.add_argument("--store", metavar="URL",
                   help="keep the database on PostgreSQL (postgresql://USER@HOST:PORT/DATABASE, "
                        "an empty database; password from PGPASSWORD or ~/.pgpass) instead of "
                        "WS/workspace.sqlite")
    p.add_argument("--group-access", action="store_true",
                   help="share the workspace with your group (folder 0770 + set-group-id, "
                        "database 0660); by default only you can read it (0700 / 0600)")


def _wing_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The commands whose parsers live in their own modules, in help order (``bench``, the
    developer benchmarks, last)."""
    from curation.cli import (
        bench_commands,
        pubmed_commands,
        rank_commands,
        simulate_commands,
        suggestion_commands,
        train_commands,
        vector_commands,
        watch_commands,  # issue 37 item 2
    )

    train_commands.add_parsers(sub, common)
    simulate_commands.add_parser(sub, common)
    vector_commands.add_parsers(sub, common)
    rank_commands.add_parsers(sub, common)
    pubmed_commands.add_parsers(sub, common)
    suggestion_commands.add_parsers(sub, common)
    watch_commands.add_parsers(sub, common)
    bench_commands.add_parser(sub, common)


def _import_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("import", parents=[common], help="import KB records or documents",
                       formatter_class=fmt)
    isub = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    pk = isub.add_parser("kb", parents=[common], formatter_class=fmt,
                         help="KB records (relations)", epilog=f"readers:\n{_reader_help('kb')}")
    pk.add_argument("reader", help="one of: " + ", ".join(s.name for s in readers("kb")))
    pk.add_argument("file")
    pk.add_argument("--mapping", help="column-mapping TOML (reader 'tsv')")
    pk.add_argument("--source", help="source name to record (readers 'pubtator', 'tsv')")
    from curation.cli import baseline_commands as base

    pd = isub.add_parser("docs", parents=[common], formatter_class=fmt, help="documents",
                         epilog=f"readers:\n{_reader_help('docs')}\n  {base.READER:<12} "
                                f"{base.HELP}")
    pd.add_argument("reader", help="one of: " + ", ".join(
        [*(s.name for s in readers("docs")), base.READER]))
    pd.add_argument("file", help="the file (a folder for pubmed-baseline)")
    pd.add_argument("--source", help="source name to record")
    for name, text in (("mesh", "MeSH tree file (mtrees Term;TreeNumber)"),
                       ("mesh-headings", "MeSH headings per PMID TSV (pmid, descriptor)"),
                       ("citations", "citation edges TSV (citing_pmid, cited_pmid)")):
        isub.add_parser(name, parents=[common], help=text).add_argument("file")


def _schema_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("schema", parents=[common], help="list or add relation schemas")
    ssub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ssub.add_parser("list", parents=[common], help="the built-in and workspace schemas")
    q = ssub.add_parser("add", parents=[common], help="add a schema TOML to the workspace")
    q.add_argument("file", help="schema TOML")
    q.add_argument("--replace", action="store_true",
                   help="replace a built-in or workspace schema of the same name (recorded in "
                        "the audit log)")


def _index_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("index", parents=[common],
                       help="build (or refresh) a retriever index over the workspace documents")
    p.add_argument("--retriever", default="dense", help="bm25, dense or hybrid (default dense)")
    p.add_argument("--model", help="dense model: a registry version (kbcurate models list), "
                                   "Hugging Face name or local folder (default: the packaged "
                                   "all-MiniLM-L6-v2)")
    add_backend_args(p)
    _index_kind_args(p)
    p.add_argument("--rebuild", action="store_true", help="ignore a saved index")


def _index_kind_args(p: argparse.ArgumentParser) -> None:
    """``--kind`` and the FAISS parameters of a dense index (recorded with the index)."""
    from retrievers.faiss_index import AUTO_FLAT_MAX, AUTO_KIND, IndexKind

    g = p.add_argument_group("dense index (FAISS)")
    g.add_argument("--kind", choices=[k.value for k in IndexKind],
                   help=f"flat: exact; ivf / hnsw: approximate, ~1 ms a query at 100k-1M; "
                        f"auto: flat up to {AUTO_FLAT_MAX:,} documents, {AUTO_KIND} above")
    g.add_argument("--nlist", type=int, help="ivf: k-means cells (default 4 * sqrt(N))")
    g.add_argument("--nprobe", type=int, help="ivf: cells searched per query (default 16)")
    g.add_argument("--hnsw-m", type=int, help="hnsw: links per node (default 32)")
    g.add_argument("--ef-search", type=int, help="hnsw: candidates per query (default 128)")
    g.add_argument("--fp16", action="store_true", default=None,
                   help="store the vectors as float16: half the memory, same ranking")


def _evaluate_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("evaluate", parents=[common],
                       help="evaluate retrievers on a schema's held-out queries")
    p.add_argument("--schema", required=True, help="schema whose KB relations are the queries")
    p.add_argument("--retriever", action="append", default=[], metavar="NAME",
                   help="retriever (repeatable): bm25, dense, hybrid, each optionally with "
                        "+rerank (entity-aware rerank), or ranked (the schema's active learned "
                        "ranker, kbcurate rank train); default bm25. best: compare bm25, "
                        "bm25+rerank, hybrid+rerank (when its index is built) and ranked, and "
                        "record the best as the schema's default ranking in the app")
    p.add_argument("--split", default="test", choices=("train", "dev", "test", "all"))
    p.add_argument("--model", help="dense model: a registry version (kbcurate models list), "
                                   "Hugging Face name or local folder (default: the packaged "
                                   "all-MiniLM-L6-v2)")
    add_backend_args(p)
    p.add_argument("--out", help="write the JSON report here")


def _app_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("demo", parents=[common],
                       help="build the sample workspace from real data, then serve the app")
    p.add_argument("--data-dir",
                   help=f"sample data folder (default: ${DATA_ENV} or ../shared/data)")
    p.add_argument("--no-serve", action="store_true", help="build only")
    p.add_argument("--no-index", action="store_true",
                   help="do not start building the dense index in the background")
    _serve_args(p)

    p = sub.add_parser("serve", parents=[common], help="start the curation app (Streamlit)")
    _serve_args(p)


def _fetch_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("fetch", parents=[common], help="download from NCBI / CIViC (online)")
    fsub = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    for name, text in (("pubmed", "PubMed records by PMID (efetch) into the workspace"),
                       ("citations", "cited PMIDs (elink pubmed_pubmed_refs) into the workspace")):
        q = fsub.add_parser(name, parents=[common], help=text)
        q.add_argument("pmids", nargs="*", help="PMIDs (or use --from-file)")
        q.add_argument("--from-file", help="file with one PMID per line")
        q.add_argument("--email", default=os.environ.get("NCBI_EMAIL"),
                       help="contact email NCBI requires (default: $NCBI_EMAIL)")
        q.add_argument("--api-key", default=os.environ.get("NCBI_API_KEY"),
                       help="NCBI API key: 10 instead of 3 requests/s (default: $NCBI_API_KEY)")
    q = fsub.add_parser("civic", parents=[common], help="CIViC nightly evidence TSV")
    q.add_argument("--dest", help="file to write (default: WS/cache/civic-nightly.tsv)")
    q.add_argument("--import", dest="do_import", action="store_true",
                   help="import it into the workspace after downloading")


def _users_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("users", parents=[common], help="manage app users (WS/users.toml)")
    p.add_argument("action", choices=("list", "add", "remove"))
    p.add_argument("name", nargs="?")
    p.add_argument("--role", default="curator", help="annotator, curator or admin")
    p.add_argument("--password-stdin", action="store_true",
                   help="read the password from standard input instead of a prompt")


def _labels_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from curation.store.label_files import EXPORT_COLUMNS_HELP

    p = sub.add_parser("labels", parents=[common], help="export labels or show agreement",
                       description="export: every current label matching --user, --schema and "
                                   "--grade, with its item's final grade. "
                                   + EXPORT_COLUMNS_HELP)
    p.add_argument("action", choices=("export", "agreement"))
    p.add_argument("args", nargs="*", help="export: FILE(.csv|.tsv|.jsonl); agreement: USER USER")
    p.add_argument("--user")
    p.add_argument("--schema")
    p.add_argument("--grade")


def _settings_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("settings", parents=[common], help="show or change workspace settings",
                       description="blind-review: annotators see other users' labels on an item "
                                   "only after grading it themselves (the Review page)")
    p.add_argument("name", nargs="?", choices=("blind-review",), default="blind-review",
                   help="the setting (default blind-review, the only one)")
    p.add_argument("value", nargs="?", choices=("on", "off"),
                   help="new value (admin action, audited as actor 'cli'); omit to show it")


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8501)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kbcurate`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.quiet:  # also the bars of transformers / huggingface_hub (read at their import)
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        os.environ["KBCURATE_QUIET"] = "1"  # and nncf's (retrievers/backends.py)
    from curation.cli import commands

    try:
        return commands.dispatch(args)
    except (CurationError, RetrieverError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DATABASE_ERRORS as exc:  # one that no store function translated
        logger.debug("database error", exc_info=True)
        print(f"error: {describe_database_error(exc, _database_of(args))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; nothing was written by the unfinished step", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head, less, ...: stop quietly (Python docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file write no store function wrapped (read-only mount, full disk)
        logger.debug("file error", exc_info=True)
        print(f"error: {describe_os_error(exc, _database_of(args))}", file=sys.stderr)
        return 2


def _database_of(args: argparse.Namespace) -> Path | None:
    """The workspace database the command used, when one was named."""
    from curation.store.workspace import DB_NAME

    try:
        return workspace_path(args) / DB_NAME
    except CurationError:
        return None


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
