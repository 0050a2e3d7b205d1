"""The workspace's vector store setting: where dense indexes keep their vectors.

The ``meta`` key ``vector_store`` holds the store's settings as JSON
(:class:`retrievers.vector_store.StoreConfig` fields, e.g. ``{"kind": "qdrant", "exact": true}``);
unset or ``faiss`` keeps today's embedded FAISS files, and every dense index is built as before.
With ``qdrant``, dense indexes put their vectors in Qdrant: local mode in ``WS/indexes/qdrant``
(one process at a time: the app and a job worker together need a server), or the server at
``$KBCURATE_QDRANT_URL`` (API key ``$KBCURATE_QDRANT_API_KEY``); collection names start with
this workspace's namespace (from its creation time, the same after a move).

:mod:`curation.search.indexing` adds :func:`store_options` to every dense index's options;
:mod:`curation.search.vectors` encodes the whole corpus into such an index in bulk.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from retrievers.errors import RetrieverError
from retrievers.vector_store import StoreConfig, StoreKind

#: The ``meta`` key of the workspace's vector store settings (JSON).
STORE_KEY = "vector_store"


def store_setting(ws: Workspace) -> StoreConfig:
    """The saved vector store settings (the defaults, FAISS, when unset)."""
    value = Settings(ws).value(STORE_KEY)
    if value is None:
        return StoreConfig()
    try:
        return StoreConfig.from_dict(json.loads(value))
    except (ValueError, TypeError) as exc:
        raise CurationError(f"the workspace setting {STORE_KEY}={value!r} is not usable "
                            f"({exc}); set it again with kbcurate vector-store") from exc


def set_store_setting(ws: Workspace, kind: str, *, actor: str, **settings: Any) -> StoreConfig:
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
    value = setting_json(config)
    with ws.transaction():
        before = setting_json(store_setting(ws))
        Settings(ws).put(STORE_KEY, json.dumps(value))
        ws.audit(actor, "set", "setting", STORE_KEY, before=before, after=value)
    return config


def store_options(ws: Workspace) -> dict[str, Any] | None:
    """The dense option ``vector_store`` for this workspace; ``None`` for FAISS (so FAISS
    indexes keep their folders and files)."""
    setting = store_setting(ws)
    if setting.kind == StoreKind.FAISS:
        return None
    return {**setting_json(setting), "path": str(ws.root / "indexes" / "qdrant"),
            "namespace": namespace(ws)}


def setting_json(config: StoreConfig) -> dict[str, Any]:
    """The settings that differ from the defaults, with ``kind`` always: what is stored, shown
    and audited (``{"kind": "faiss"}`` for the defaults)."""
    defaults = StoreConfig().to_dict()
    return {k: v for k, v in config.to_dict().items() if v != defaults[k] or k == "kind"}


def namespace(ws: Workspace) -> str:
    """The workspace's prefix of collection names: ``ws`` + a hash of its creation time."""
    seed = Settings(ws).created_at()
    if seed is None:
        seed = str(ws.root)
    return "ws" + hashlib.sha256(seed.encode()).hexdigest()[:10]
