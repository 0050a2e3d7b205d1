"""Retriever indexes over a workspace's documents, built once and reused.

An index lives in ``WS/indexes/<name>-<options hash>/`` as the retriever's own plain files plus
``corpus.json`` (a fingerprint of the documents it covers). :func:`get_index` loads it when the
fingerprint still matches the workspace and rebuilds it otherwise; dense retrievers keep an
embedding cache in ``WS/cache/embeddings`` so a rebuild encodes only new or changed documents.
A rebuild writes a temporary sibling folder and swaps it in when complete
(:mod:`retrievers.saved`): a worker killed mid-build leaves the previous index readable.

Dense encoders run on the workspace's default backend (``meta`` key ``encoder_backend``, e.g.
"openvino/int8"; torch/fp32 when unset) unless the options name one (``backend``,
``precision``); :func:`set_default_backend` changes it (``kbcurate bench --backends
--set-default`` does, when a candidate passes the quality guard). Exported models live in
``WS/cache/exports``. The pair is part of the index options, so each pair has its own index.

The workspace's vector store (:mod:`curation.search.vector_settings`, ``meta`` key
``vector_store``) adds the dense option ``vector_store`` when it is not FAISS (so FAISS indexes
are unchanged).

Index jobs accept only the parameters ``retriever``, ``options`` and ``rebuild``;
:func:`check_index_params` (the ``index`` job kind's validator) refuses unknown retrievers, an
unknown backend/precision and any path option (``cache_dir``, ``export_dir``, a ``model``
folder) that resolves outside the workspace.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from curation.jobs.guards import workspace_path
from curation.search.vector_settings import store_options
from curation.store.documents import PLAIN_FORMAT, Documents, document_text
from curation.store.index_models import check_index_models
from curation.store.models import Models
from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError, UnknownNameError
from retrievers.backends import DEFAULT as DEFAULT_BACKEND
from retrievers.backends import check_combination, parse_combination
from retrievers.base import Retriever
from retrievers.encoder import resolve_model_path
from retrievers.errors import RetrieverError
from retrievers.registry import build_retriever, load_retriever, retriever_names
from retrievers.saved import MANIFEST, complete_folder, replace_folder

logger = logging.getLogger(__name__)

CORPUS_FILE = "corpus.json"


def corpus_fingerprint(ws: Workspace) -> str:
    """SHA-256 over every (doc_id, content hash): changes when any document changes."""
    h = hashlib.sha256()
    for doc_id, digest in Documents(ws).corpus_hashes():
        h.update(f"{doc_id}\t{digest}\n".encode())
    return h.hexdigest()


def corpus_docs(ws: Workspace, document_format: str | None = None) -> list[tuple[str, str]]:
    """All documents as (doc_id, text), in doc_id order.

    The text is :func:`curation.store.documents.document_text`: ``title + " " + abstract``, or
    ``document_format`` filled with ``{title}`` and ``{abstract}`` (a trained model's format,
    e.g. "{title} [SEP] {abstract}").
    """
    text_format = document_format or PLAIN_FORMAT
    return [(doc_id, document_text(title, abstract, text_format))
            for doc_id, title, abstract in Documents(ws).all_parts(by_id=True)]


def _resolve_version(ws: Workspace, dense: dict[str, Any]) -> dict[str, Any]:
    """Replace a registry version name in ``model`` by its verified folder and settings."""
    model = dense.get("model")
    if isinstance(model, str) and Models(ws).is_version(model):
        return {**dense, **Models(ws).options(model)}
    return dense


#: The ``meta`` key of the workspace's default encoding backend ("backend/precision").
BACKEND_KEY = "encoder_backend"


def default_backend(ws: Workspace) -> tuple[str, str]:
    """The workspace's default (backend, precision) for dense encoders; torch/fp32 when unset."""
    value = Settings(ws).value(BACKEND_KEY)
    if value is None:
        return DEFAULT_BACKEND
    try:
        return parse_combination(value)
    except RetrieverError as exc:
        logger.warning("ignoring the workspace setting %s=%r: %s", BACKEND_KEY, value, exc)
        return DEFAULT_BACKEND


def set_default_backend(ws: Workspace, backend: str, precision: str, *, actor: str) -> None:
    """Make (backend, precision) the workspace default (audited as ``actor``).

    Raises:
        CurationError: Unknown or unsupported pair.
    """
    pair = _checked_pair(backend, precision, "default backend")
    with ws.transaction():
        old = default_backend(ws)
        if old != pair:
            Settings(ws).put(BACKEND_KEY, "/".join(pair))
            ws.audit(actor, "set", "setting", BACKEND_KEY, before={BACKEND_KEY: "/".join(old)},
                     after={BACKEND_KEY: "/".join(pair)})


def _checked_pair(backend: object, precision: object, where: str) -> tuple[str, str]:
    try:
        return check_combination(backend, precision)
    except RetrieverError as exc:
        raise CurationError(f"{where}: {exc}") from None


def _dense_defaults(ws: Workspace, dense: dict[str, Any]) -> dict[str, Any]:
    """A dense component's options with the workspace's cache, backend and export folder."""
    dense = _resolve_version(ws, dense)
    dense.setdefault("cache_dir", str(ws.root / "cache" / "embeddings"))
    store = store_options(ws)  # None for FAISS: the index keeps its folder and files
    if store is not None:
        dense.setdefault("vector_store", store)
    if not {"backend", "precision", "dtype"} & dense.keys():  # an explicit choice wins
        dense["backend"], dense["precision"] = default_backend(ws)
    pair = (dense.get("backend", DEFAULT_BACKEND[0]), dense.get("precision", DEFAULT_BACKEND[1]))
    if pair == DEFAULT_BACKEND:  # the plain torch index keeps its folder name
        dense.pop("backend", None)
        dense.pop("precision", None)
    elif pair[0] != DEFAULT_BACKEND[0]:
        dense.setdefault("export_dir", str(ws.root / "cache" / "exports"))
    return dense


def with_workspace_defaults(ws: Workspace, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Fill in the workspace embedding cache, backend and export folder for dense components;
    resolve model versions.

    A dense ``model`` may name a version of the workspace's model registry
    (``disease_gene-edel@1``): its weights are checked against the recorded checksum and its
    folder, vector cache key, token limit and document format are used.
    """
    opts = dict(options)
    if name == "dense":
        opts = _dense_defaults(ws, opts)
    elif name == "hybrid":
        dense = _dense_defaults(ws, dict(opts.get("dense", {})))
        if "document_format" in dense:
            opts["document_format"] = dense.pop("document_format")
        opts["dense"] = dense
    return opts


def with_dense_options(name: str, dense: dict[str, Any]) -> dict[str, Any]:
    """Options of retriever ``name`` that carry dense-encoder options (``model``, ``backend``,
    ``precision`` ...): the options themselves for "dense", ``{"dense": ...}`` for "hybrid",
    none for the others."""
    if name == "dense":
        return dict(dense)
    return {"dense": dict(dense)} if name == "hybrid" and dense else {}


#: How a path inside the workspace is written in index keys (a copied or moved workspace keeps
#: its indexes: nothing inside it is addressed by its absolute location).
WS_MARK = "$WS"


def portable(ws: Workspace, value: Any) -> Any:
    """``value`` with every string path inside the workspace written relative to ``$WS``."""
    root = str(ws.root)
    if isinstance(value, str):
        if value == root:
            return WS_MARK
        return WS_MARK + value[len(root):] if value.startswith(root + "/") else value
    if isinstance(value, dict):
        return {k: portable(ws, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [portable(ws, v) for v in value]
    return value


def index_folder(ws: Workspace, name: str, options: dict[str, Any]) -> Path:
    """Where the index of ``name`` with ``options`` lives (the same after a move or copy)."""
    blob = json.dumps(portable(ws, options), sort_keys=True, default=str)
    return ws.root / "indexes" / f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def _rebase(ws: Workspace, folder: Path) -> None:
    """Point a saved index that was built where the workspace used to be at its new place.

    The saved files name the model folder and embedding cache by absolute path; when the
    workspace was copied or moved, those paths are rewritten (each file replaced atomically).
    """
    marker = folder / CORPUS_FILE
    try:
        saved = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    old = saved.get("workspace")
    if old is None:  # indexes built before the workspace root was recorded
        cache = str((saved.get("options") or {}).get("cache_dir") or "")
        if not cache.endswith("/cache/embeddings"):
            return
        old = cache[: -len("/cache/embeddings")]
    new = str(ws.root)
    if old == new:
        return
    logger.info("index %s was built in %s: rebasing its paths to %s", folder.name, old, new)
    for path in sorted(folder.rglob("*.json")):
        text = path.read_text(encoding="utf-8")
        if old not in text and path != marker:
            continue
        data = _replace_prefix(json.loads(text), old, new)
        if path == marker:
            data["workspace"] = new
        tmp = path.with_name(f".{path.name}.rebase")
        tmp.write_text(json.dumps(data, default=str), encoding="utf-8")
        tmp.replace(path)


def _replace_prefix(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new + value[len(old):] if value == old or value.startswith(old + "/") else value
    if isinstance(value, dict):
        return {k: _replace_prefix(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_prefix(v, old, new) for v in value]
    return value


def saved_fingerprint(folder: Path) -> str | None:
    """The corpus fingerprint a saved index was built for (None when there is none)."""
    marker = complete_folder(folder, MANIFEST) / CORPUS_FILE
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("fingerprint")
    except (OSError, ValueError):
        return None


def index_ready(ws: Workspace, name: str, options: dict[str, Any] | None = None, *,
                fingerprint: str | None = None) -> bool:
    """True when the saved index exists and covers the workspace's current documents."""
    folder = index_folder(ws, name, with_workspace_defaults(ws, name, dict(options or {})))
    saved = saved_fingerprint(folder)
    return saved is not None and saved == (fingerprint or corpus_fingerprint(ws))


def get_index(
    ws: Workspace,
    name: str,
    options: dict[str, Any] | None = None,
    *,
    progress: bool | Callable[[int, int], None] = True,
    rebuild: bool = False,
    stale_ok: bool = False,
) -> Retriever:
    """A retriever indexed over the workspace's current documents (loaded or built).

    Args:
        ws: The workspace.
        name: Registered retriever name ("bm25", "dense", "hybrid").
        options: Retriever options (see ``retrievers.registry``).
        progress: tqdm bar (True), none (False) or a ``(done, total)`` callback.
        rebuild: Ignore a saved index.
        stale_ok: Load a saved index even when documents were added or changed since it was
            built (a background ranker round: rebuilding the whole index every few labels
            while an import runs would replace it under every reader; the index job
            refreshes it). Built when there is none.
    """
    opts = with_workspace_defaults(ws, name, options or {})
    folder = index_folder(ws, name, opts)
    saved = saved_fingerprint(folder)
    fingerprint = saved if stale_ok and saved is not None and not rebuild \
        else corpus_fingerprint(ws)
    if not rebuild and saved == fingerprint:
        logger.info("loading index %s", folder)
        _rebase(ws, complete_folder(folder, MANIFEST))
        check_index_models(ws, folder, opts)  # an edited manifest loads no other model
        return load_retriever(folder)
    build_opts = dict(opts)
    docs = corpus_docs(ws, build_opts.pop("document_format", None))
    logger.info("building %s index over %d documents in %s", name, len(docs), folder)
    retriever = build_retriever(name, **build_opts)
    retriever.index(docs, progress=progress)
    marker = {"fingerprint": fingerprint, "documents": len(docs), "retriever": name,
              "options": opts, "workspace": str(ws.root)}
    with replace_folder(folder) as tmp:  # the old index stays until the new one is complete
        retriever.write_to(tmp)
        (tmp / CORPUS_FILE).write_text(json.dumps(marker, default=str), encoding="utf-8")
    return retriever


def run_index_job(ctx: Any, retriever: str = "dense", options: dict[str, Any] | None = None,
                  rebuild: bool = False) -> dict[str, Any]:
    """Background job: build (or refresh) an index with progress in the job row."""
    def report(done: int, total: int) -> None:
        ctx.progress(done / total if total else 1.0, f"indexed {done:,} of {total:,} documents")

    index = get_index(ctx.ws, retriever, options, progress=report, rebuild=rebuild)
    return {"retriever": retriever, "documents": len(index),
            "folder": str(index_folder(ctx.ws, retriever,
                                       with_workspace_defaults(ctx.ws, retriever, options or {})))}


#: Retriever options that name a folder the job writes or reads; they must lie in the workspace
#: (``path``: a vector store's folder, inside the ``vector_store`` table).
PATH_OPTIONS = ("cache_dir", "export_dir", "path")
#: Options naming a model: a registered version, the packaged model, or a folder in the workspace.
MODEL_OPTIONS = ("model", "query_model")
#: Options that would point a job at a vector store or another host. The vector store's location
#: is the workspace setting (``kbcurate vector-store``, admins only; its API key comes from the
#: environment), so index jobs never take one: a job naming a URL could send the key anywhere.
LOCATION_OPTIONS = ("vector_store", "url", "urls", "host", "hosts", "port", "endpoint",
                    "location", "api_key", "grpc_port", "prefer_grpc")


def check_index_params(ws: Workspace, params: dict[str, Any]) -> None:
    """Validator of the ``index`` job kind (called by :func:`curation.jobs.queue.submit_job`).

    Raises:
        CurationError: Unknown retriever, ``options`` not a table, ``rebuild`` not a boolean, an
            unknown backend/precision, a path option (``cache_dir``, ``export_dir``; ``model``
            when it is a folder) outside the workspace, or a vector-store location, host or URL
            (:data:`LOCATION_OPTIONS`, any value with ``://``).
    """
    name = params.get("retriever", "dense")
    if name not in retriever_names():
        raise UnknownNameError("retriever", str(name), retriever_names())
    if not isinstance(params.get("rebuild", False), bool):
        raise CurationError(f"Index job option rebuild={params['rebuild']!r}; expected true or "
                            "false")
    check_retriever_paths(ws, "options", params.get("options") or {})


def check_retriever_paths(ws: Workspace, where: str, options: Any) -> None:
    """Refuse path options that lie outside the workspace, in ``options`` and in the per-
    component tables inside it (``hybrid``'s ``dense = {...}``).

    Raises:
        CurationError: ``options`` is not a table, or a path resolves outside the workspace.
    """
    if not isinstance(options, dict):
        raise CurationError(f"Index job option {where} is {type(options).__name__} "
                            f"{str(options)[:60]!r}; expected a table of option names to values")
    if "backend" in options or "precision" in options:
        _checked_pair(options.get("backend", DEFAULT_BACKEND[0]),
                      options.get("precision", DEFAULT_BACKEND[1]), f"Index job option {where}")
    for key, value in options.items():
        option = f"{where}.{key}"
        _refuse_location(option, key, value)
        if isinstance(value, dict):
            check_retriever_paths(ws, option, value)
        elif key in PATH_OPTIONS:
            workspace_path(ws, value, option)
        elif key in MODEL_OPTIONS and not _known_model(ws, value):
            try:
                workspace_path(ws, value, option, must_exist=True)
            except CurationError as exc:
                raise CurationError(
                    f"Index job option {option}={value!r} is not a model version of this "
                    "workspace (see kbcurate models list) nor the packaged all-MiniLM-L6-v2, and "
                    f"as a folder: {exc}") from exc


def _refuse_location(option: str, key: str, value: object) -> None:
    """Refuse a vector-store table, a host/URL option or any URL value in an index job."""
    if str(key).lower() in LOCATION_OPTIONS or (isinstance(value, str) and "://" in value):
        raise CurationError(
            f"Index job option {option}={str(value)[:80]!r} names a vector store, host or URL; "
            "where vectors are stored is a workspace setting that only an admin changes "
            "(kbcurate vector-store), and index jobs never take URLs or hosts. Leave the option "
            "out")


def _known_model(ws: Workspace, value: object) -> bool:
    """A model version of this workspace, or the packaged model's alias."""
    return isinstance(value, str) and (Models(ws).is_version(value)
                                       or resolve_model_path(value) != value)
