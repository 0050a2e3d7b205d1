"""``kbcurate vector-store`` (show or set the workspace's vector store) and ``kbcurate
encode-bulk`` (encode every document into a dense index with parallel workers, resumable), and
:func:`dense_options`, the dense encoder flags that ``index``, ``evaluate`` and ``encode-bulk``
read (here, so that :mod:`curation.cli.commands` imports this module and not the reverse)."""

from __future__ import annotations

import argparse
import json

from curation.cli.common import workspace_path
from curation.store.workspace import Workspace
from retrievers.vector_store import API_KEY_ENV, URL_ENV, StoreKind

#: Flags of ``vector-store`` -> StoreConfig fields (only those given are saved).
STORE_FLAGS = ("exact", "hnsw_m", "ef_construction", "ef_search", "batch_size", "url")


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``vector-store`` and ``encode-bulk`` sub-commands."""
    p = sub.add_parser("vector-store", parents=[common],
                       help="show or set where dense vectors live: faiss (default) or qdrant",
                       description=f"qdrant: local mode in WS/indexes/qdrant, or the server at "
                                   f"${URL_ENV} (API key from ${API_KEY_ENV}). Rebuild the "
                                   "dense index afterwards (kbcurate index).")
    p.add_argument("kind", nargs="?", choices=[k.value for k in StoreKind],
                   help="new store (audited as actor 'cli'); omit to show the setting")
    p.add_argument("--exact", action="store_true", default=None,
                   help="qdrant: exact search (the equivalent of FAISS flat)")
    p.add_argument("--hnsw-m", type=int, help="qdrant: HNSW links per node (default 32)")
    p.add_argument("--ef-construction", type=int, help="qdrant: HNSW build list (default 200)")
    p.add_argument("--ef-search", type=int, help="qdrant: HNSW search list (default 128)")
    p.add_argument("--batch-size", type=int, help="qdrant: vectors per upsert (default 1024)")
    p.add_argument("--url", help=f"qdrant server URL (default: ${URL_ENV}; never a key here)")

    p = sub.add_parser("encode-bulk", parents=[common],
                       help="encode every document into the dense index with parallel "
                            "workers (Ray), shard by shard, resumable")
    p.add_argument("--model", help="dense model: a registry version, Hugging Face name or "
                                   "local folder (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--shard-size", type=int, default=5000, help="documents per shard")
    p.add_argument("--workers", type=int, default=2, help="parallel Ray workers (default 2)")
    p.add_argument("--engine", choices=("auto", "local", "ray"), default="auto",
                   help="auto: Ray when installed and --workers > 1; local: this process")
    p.add_argument("--ray-address", help="Ray cluster address (default: $KBCURATE_RAY_ADDRESS, "
                                         "else a Ray started here for the run)")


def cmd_vector_store(args: argparse.Namespace) -> int:
    from curation.search.vector_settings import set_store_setting, setting_json, store_setting

    settings = {k: v for k in STORE_FLAGS if (v := getattr(args, k, None)) is not None}
    with Workspace.open(workspace_path(args)) as ws:
        if args.kind is not None:
            set_store_setting(ws, args.kind, actor="cli", **settings)
        elif settings:
            print("error: give the store kind (faiss or qdrant) with its settings")
            return 2
        print(f"vector_store: {json.dumps(setting_json(store_setting(ws)), sort_keys=True)}")
    return 0


def dense_options(args: argparse.Namespace) -> dict[str, str]:
    """The dense encoder options given on the command line (``--model``, ``--backend``,
    ``--precision``); the workspace defaults fill in the rest."""
    return {key: value for key in ("model", "backend", "precision")
            if (value := getattr(args, key, None)) is not None}


def cmd_encode_bulk(args: argparse.Namespace) -> int:
    from curation.search.vectors import bulk_index
    from retrievers.bulk_encode import BulkConfig

    config = BulkConfig(shard_size=args.shard_size, workers=args.workers, engine=args.engine,
                        ray_address=args.ray_address)
    with Workspace.open(workspace_path(args)) as ws:
        retriever, report = bulk_index(ws, dense_options(args), config,
                                       progress=not args.quiet)
    print(f"dense index of {report.vectors:,} documents ({retriever.label}): {report.encoded} "
          f"of {report.shards} shards encoded ({report.skipped} done before) by {report.engine} "
          f"in {report.seconds:.1f} s")
    return 0


#: ``kbcurate`` sub-command -> handler (merged into :func:`curation.cli.commands.dispatch`).
HANDLERS = {"vector-store": cmd_vector_store, "encode-bulk": cmd_encode_bulk}
