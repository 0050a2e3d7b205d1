"""The workspace's vector store setting, and bulk encoding of its documents into a dense index.

The ``meta`` key ``vector_store`` holds the store's settings as JSON
(:class:`retrievers.vector_store.StoreConfig` fields, e.g. ``{"kind": "qdrant", "exact": true}``);
unset or ``faiss`` keeps today's embedded FAISS files, and every dense index is built as before.
With ``qdrant``, dense indexes put their vectors in Qdrant: local mode in ``WS/indexes/qdrant``
(one process at a time: the app and a job worker together need a server), or the server at
``$KBCURATE_QDRANT_URL`` (API key ``$KBCURATE_QDRANT_API_KEY``); collection names start with
this workspace's namespace (from its creation time, the same after a move).

:func:`bulk_index` builds a dense index over every document with
:func:`retrievers.bulk_encode.bulk_encode`: shards encoded in parallel (Ray) straight into the
vector collection, resumable from ``WS/cache/bulk/<index>-<corpus>.json``; the finished index is
saved where :func:`curation.search.indexing.get_index` finds it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from typing import Any

from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from retrievers.base import Progress
from retrievers.bulk_encode import BulkConfig, BulkReport, bulk_encode
from retrievers.errors import RetrieverError
from retrievers.vector_store import StoreConfig, StoreKind

logger = logging.getLogger(__name__)

#: The ``meta`` key of the workspace's vector store settings (JSON).
STORE_KEY = "vector_store"


def store_setting(ws: Workspace) -> dict[str, Any]:
    """The saved vector store settings that differ from the defaults, with ``kind`` always
    (``{"kind": "faiss"}`` when unset)."""
    row = ws.conn.execute("SELECT value FROM meta WHERE key = ?", (STORE_KEY,)).fetchone()
    if row is None:
        return {"kind": StoreKind.FAISS.value}
    try:
        return _compact(StoreConfig.from_dict(json.loads(row[0])))
    except (ValueError, TypeError) as exc:
        raise CurationError(f"the workspace setting {STORE_KEY}={row[0]!r} is not usable "
                            f"({exc}); set it again with kbcurate vector-store") from exc


def set_store_setting(ws: Workspace, kind: str, *, actor: str, **settings: Any) -> dict[str, Any]:
    """Save the vector store settings (audited as ``actor``); ``path`` and ``namespace`` are
    the workspace's own and cannot be set.

    Raises:
        CurationError: An unknown kind or setting, or ``path`` / ``namespace``.
    """
    fixed = {"path", "namespace"} & settings.keys()
    if fixed:
        raise CurationError(f"vector store setting {', '.join(sorted(fixed))} is chosen by the "
                            "workspace (WS/indexes/qdrant, its namespace); leave it out")
    try:
        config = StoreConfig.from_dict({"kind": kind, **settings})
    except RetrieverError as exc:
        raise CurationError(f"vector store: {exc}") from None
    value = _compact(config)
    with ws.transaction():
        before = store_setting(ws)
        ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
                        "SET value = excluded.value", (STORE_KEY, json.dumps(value)))
        ws.audit(actor, "set", "setting", STORE_KEY, before=before, after=value)
    return value


def store_options(ws: Workspace) -> dict[str, Any] | None:
    """The dense option ``vector_store`` for this workspace; ``None`` for FAISS (so FAISS
    indexes keep their folders and files)."""
    setting = store_setting(ws)
    if setting["kind"] == StoreKind.FAISS:
        return None
    return {**setting, "path": str(ws.root / "indexes" / "qdrant"), "namespace": namespace(ws)}


def _compact(config: StoreConfig) -> dict[str, Any]:
    defaults = StoreConfig().to_dict()
    return {k: v for k, v in config.to_dict().items() if v != defaults[k] or k == "kind"}


def namespace(ws: Workspace) -> str:
    """The workspace's prefix of collection names: ``ws`` + a hash of its creation time."""
    row = ws.conn.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()
    seed = row[0] if row else str(ws.root)
    return "ws" + hashlib.sha256(seed.encode()).hexdigest()[:10]


def bulk_index(ws: Workspace, options: dict[str, Any] | None = None,
               config: BulkConfig | None = None, *, progress: Progress = True
               ) -> tuple[Any, BulkReport]:
    """Encode every document into the dense index of ``options`` with parallel workers.

    Args:
        ws: The workspace.
        options: Dense retriever options (``model``, ``backend`` ...); workspace defaults fill
            in the rest, as for :func:`curation.search.indexing.get_index`.
        config: Shards, workers, engine, Ray address.
        progress: A bar, nothing, or ``fn(done, total)`` in documents.

    Returns:
        The dense retriever (saved, so ``get_index`` loads it) and what the run did.

    Raises:
        CurationError: Encoding or storing failed (the message says how to fix it).
    """
    from curation.search.indexing import (
        CORPUS_FILE,
        corpus_docs,
        corpus_fingerprint,
        index_folder,
        with_workspace_defaults,
    )
    from retrievers.registry import build_retriever
    from retrievers.saved import replace_folder

    opts = with_workspace_defaults(ws, "dense", options or {})
    folder = index_folder(ws, "dense", opts)
    fingerprint = corpus_fingerprint(ws)
    build = dict(opts)
    docs = corpus_docs(ws, build.pop("document_format", None))
    run = f"{folder.name}-{fingerprint[:8]}"
    work = ws.root / "cache" / "bulk"
    try:
        retriever = build_retriever("dense", **build)
        collection = retriever.bulk_target(f"bulk{fingerprint[:8]}", work / run)
        report = bulk_encode(docs, retriever.encoder.config, collection,
                             work / f"{run}.json", config, progress=progress)
        retriever.adopt([d for d, _ in docs], collection)
        marker = {"fingerprint": fingerprint, "documents": len(docs), "retriever": "dense",
                  "options": opts, "workspace": str(ws.root)}
        with replace_folder(folder) as tmp:
            retriever.write_to(tmp)
            (tmp / CORPUS_FILE).write_text(json.dumps(marker, default=str), encoding="utf-8")
    except RetrieverError as exc:
        raise CurationError(f"bulk encoding: {exc}") from exc
    (work / f"{run}.json").unlink(missing_ok=True)
    shutil.rmtree(work / run, ignore_errors=True)
    logger.info("bulk index of %d documents in %s (%s)", len(docs), folder, report)
    return retriever, report
