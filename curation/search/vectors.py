"""Bulk encoding of a workspace's documents into a dense index.

:func:`bulk_index` builds a dense index over every document with
:func:`retrievers.bulk_encode.bulk_encode`: shards encoded in parallel (Ray) straight into the
vector collection (the workspace's vector store, :mod:`curation.search.vector_settings`),
resumable from ``WS/cache/bulk/<index>-<corpus>.json``; the finished index is saved where
:func:`curation.search.indexing.get_index` finds it.

The vector store setting itself (:func:`store_setting`, :func:`set_store_setting`,
:func:`store_options`, :func:`namespace`) lives in :mod:`curation.search.vector_settings`
(which :mod:`curation.search.indexing` reads, so this module imports indexing, never the other
way).
"""

from __future__ import annotations

import json
import logging
import shutil
from typing import Any

from curation.search.indexing import (
    CORPUS_FILE,
    corpus_docs,
    corpus_fingerprint,
    index_folder,
    with_workspace_defaults,
)
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from retrievers.base import Progress
from retrievers.bulk_encode import BulkConfig, BulkReport, bulk_encode
from retrievers.errors import RetrieverError
from retrievers.registry import build_retriever
from retrievers.saved import replace_folder

logger = logging.getLogger(__name__)


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
