"""The retriever menu of the app and the index jobs behind it.

A menu entry is a registered retriever ("bm25"), or a retriever over a model version
("dense · disease_gene-edel@2"), or one that follows the schema's active version
("dense · active", pinned once per search by :func:`resolve_retriever_choice`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from curation.access.users import User
from curation.jobs.queue import Job, list_jobs, submit_job
from curation.search.indexing import index_folder, with_workspace_defaults
from curation.store.identities import ACTIVE, VERSION_SEP, RetrieverChoice
from curation.store.models import Models, ModelStatus, ModelVersion
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from retrievers.registry import retriever_names

__all__ = ["ACTIVE", "VERSION_SEP", "VERSIONED", "RetrieverChoice", "active_index_job",
           "ensure_index_job", "index_location", "last_index_job", "parse_retriever_choice",
           "resolve_retriever_choice", "retriever_choices", "version_choices"]


def retriever_choices(ws: Workspace, schema: str | None = None) -> list[str]:
    """The app's retriever menu: registered retrievers, then dense and hybrid over each
    candidate or active model version of ``schema`` (the active one first), preceded by
    "dense · active" and "hybrid · active" (which follow promotions) when there is an active one.
    """
    versions = _menu_versions(ws, schema)
    follow = ([str(RetrieverChoice(name, ACTIVE)) for name in VERSIONED]
              if versions and versions[0].status == ModelStatus.ACTIVE else [])
    return [*retriever_names(), *follow, *_entries(versions)]


#: The retrievers offered over each model version ("dense · V", "hybrid · V").
VERSIONED = ("dense", "hybrid")


def version_choices(ws: Workspace, schema: str | None = None) -> list[str]:
    """"dense · V" and "hybrid · V" for each candidate or active version of ``schema`` (the
    active one first): what an evaluation compares, each entry naming its version."""
    return _entries(_menu_versions(ws, schema))


def _menu_versions(ws: Workspace, schema: str | None) -> list[ModelVersion]:
    """The schema's candidate and active versions, the active one(s) first."""
    versions = [v for v in Models(ws).versions(schema=schema) if v.status != ModelStatus.RETIRED]
    return sorted(versions, key=lambda v: v.status != ModelStatus.ACTIVE)


def _entries(versions: list[ModelVersion]) -> list[str]:
    return [str(RetrieverChoice(name, v.id)) for v in versions for name in VERSIONED]


def resolve_retriever_choice(ws: Workspace, schema: str, choice: str) -> str:
    """Pin "dense · active" / "hybrid · active" to the schema's active version *now*.

    A search resolves its menu entry once and then loads that version's model and index (both
    keyed by the version), so a promotion running at the same time gives it the old model and
    index or the new ones, never a mix.

    Raises:
        CurationError: The entry follows the active version but the schema has none.
    """
    parsed = RetrieverChoice.parse(choice)
    if not parsed.follows_active:
        return choice
    active = Models(ws).active(schema)
    if active is None:
        raise CurationError(f"{schema} has no active model version yet; train one (kbcurate "
                            "train / retrain) or pick another retriever")
    return str(parsed.pinned(active.id))


def parse_retriever_choice(choice: str, *, ws: Workspace | None = None,
                           schema: str | None = None) -> tuple[str, dict[str, Any]]:
    """(retriever name, options) of a menu entry from :func:`retriever_choices`.

    "dense · active" / "hybrid · active" are pinned to ``schema``'s active version now (pass
    ``ws`` and ``schema``, or pin the entry first with :func:`resolve_retriever_choice`).

    Raises:
        CurationError: An entry that follows the active version without a schema to pin it to
            (its options would name no model version, so its index would never be built), or a
            schema without an active version.
    """
    if ws is not None and schema is not None:
        choice = resolve_retriever_choice(ws, schema, choice)
    parsed = RetrieverChoice.parse(choice)
    name, version = parsed.retriever, parsed.version
    if version is None:
        return str(parsed), {}  # "bm25", or "bm25+rerank" as given
    if parsed.follows_active:
        raise CurationError(
            f"{choice!r} follows a schema's active model version, but no schema was given to "
            "pin it to; pick the version itself from the menu (e.g. 'dense · "
            "disease_gene-edel@1'), or pin the entry with resolve_retriever_choice(ws, schema, "
            "choice) before its index is looked up")
    model = str(version)
    return name, ({"model": model} if name == "dense" else {"dense": {"model": model}})


def index_location(ws: Workspace, name: str, options: Mapping[str, Any] | None = None) -> Path:
    """Folder of a retriever's index over this workspace (as :func:`get_index` names it)."""
    return index_folder(ws, name, with_workspace_defaults(ws, name, dict(options or {})))


def last_index_job(ws: Workspace, name: str,
                   options: Mapping[str, Any] | None = None) -> Job | None:
    """The most recent index job for this retriever and options (any status), if any; an
    unfinished activation of the dense version these options name counts as one (it builds
    that version's dense and hybrid indexes), so no second build of the same index starts
    while it encodes."""
    opts = dict(options or {})
    version = (opts.get("model") if name == "dense" else
               (opts.get("dense") or {}).get("model") if name == "hybrid" else None)
    if version:
        for job in list_jobs(ws, "activate", limit=20):
            if not job.finished and job.params.get("version") == version:
                return job
    for job in list_jobs(ws, "index", limit=50):
        if job.params.get("retriever") == name and \
                (job.params.get("options") or {}) == dict(options or {}):
            return job
    return None


def active_index_job(ws: Workspace, name: str,
                     options: Mapping[str, Any] | None = None) -> Job | None:
    """The unfinished index job for this retriever and options, if any."""
    job = last_index_job(ws, name, options)
    return job if job is not None and not job.finished else None


def ensure_index_job(ws: Workspace, name: str, options: Mapping[str, Any] | None = None, *,
                     user: User | None) -> Job:
    """The running index job for ``name``, or a new one (never two builds of one folder)."""
    running = active_index_job(ws, name, options)
    if running is not None:
        return running
    params: dict[str, Any] = {"retriever": name}
    if options:
        params["options"] = dict(options)
    return submit_job(ws, "index", params, user=user)
