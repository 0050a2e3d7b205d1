"""Ranker versions: ``WS/rankers/<schema>-ranker@N/`` with the text model and ``manifest.json``.

The manifest records the features, the grade table, the options, the label ids trained on, the
training sizes, the metrics and the SHA-256 of the model file; loading refuses a model whose
checksum differs. A version is written into a temporary folder and renamed into place, so a
crash never leaves half a version. Which version ranks is a workspace setting per schema
(:meth:`~curation.store.rankers.Rankers.set_active`, audited); activating an older version is the
rollback.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.ranking.model import Ranker
from curation.store.errors import Actor, require_admin_actor
from curation.store.rankers import Rankers
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

FOLDER = "rankers"
_ID = re.compile(r"^(?P<schema>[A-Za-z0-9_.]+)-ranker@(?P<n>[1-9][0-9]*)$")


@dataclass(frozen=True)
class RankerVersion:
    id: str
    schema: str
    number: int
    path: Path
    manifest: dict[str, Any]

    @property
    def metrics(self) -> dict[str, Any]:
        return self.manifest.get("metrics", {})


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _root(ws: Workspace) -> Path:
    return ws.root / FOLDER


def list_versions(ws: Workspace, schema: str | None = None) -> list[RankerVersion]:
    """Every saved version (of one schema), oldest first."""
    out = []
    root = _root(ws)
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        m = _ID.match(folder.name)
        if not m or (schema and m["schema"] != schema) or folder.is_symlink():
            continue
        out.append(get_version(ws, folder.name))
    return sorted(out, key=lambda v: (v.schema, v.number))


def get_version(ws: Workspace, ident: str) -> RankerVersion:
    """The version ``<schema>-ranker@N``.

    Raises:
        CurationError: A malformed id, or no such version (the message lists the saved ones).
    """
    m = _ID.match(ident or "")
    if not m:
        raise CurationError(f"{ident!r} is not a ranker version id; expected <schema>-ranker@N "
                            "(e.g. disease_gene-ranker@1)")
    folder = _root(ws) / ident
    manifest_path = folder / "manifest.json"
    if folder.is_symlink() or not manifest_path.is_file():
        known = ", ".join(v.name for v in sorted(_root(ws).glob("*-ranker@*"))) or "none"
        raise CurationError(f"No ranker version {ident} in {_root(ws)} (saved: {known}); train "
                            "one with `kbcurate rank train --schema S`")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CurationError(f"{manifest_path}: unreadable manifest ({exc}); the version is "
                            "damaged, train a new one") from exc
    return RankerVersion(ident, m["schema"], int(m["n"]), folder, manifest)


def save_version(ws: Workspace, schema: str, ranker: Ranker, manifest: dict[str, Any], *,
                 actor: str) -> RankerVersion:
    """Write a new version of ``schema`` (not yet active)."""
    if not actor.strip():
        raise CurationError("Saving a ranker version needs a user; sign in first")
    root = _root(ws)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{uuid.uuid4().hex}"
    try:
        path = ranker.save(tmp)
        numbers = [v.number for v in list_versions(ws, schema)]
        n = max(numbers, default=0) + 1
        ident = f"{schema}-ranker@{n}"
        full = {**manifest, "id": ident, "schema": schema, "kind": ranker.kind,
                "features": ranker.names, "file": path.name, "sha256": _sha256(path),
                "created_at": utcnow(), "created_by": actor}
        (tmp / "manifest.json").write_text(json.dumps(full, indent=1, sort_keys=True),
                                           encoding="utf-8")
        tmp.rename(root / ident)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("saved ranker %s (%s, %d features)", ident, ranker.kind, len(ranker.names))
    return get_version(ws, ident)


def load_ranker(version: RankerVersion) -> Ranker:
    """The version's model, after checking its SHA-256 against the manifest.

    Raises:
        CurationError: The file is missing or its checksum differs (edited or damaged).
    """
    m = version.manifest
    path = version.path / str(m.get("file", ""))
    if path.name not in ("model.txt", "model.json") or not path.is_file() or path.is_symlink():
        raise CurationError(f"{version.path}: the model file {m.get('file')!r} is missing; the "
                            "version is damaged, train a new one")
    if _sha256(path) != m.get("sha256"):
        raise CurationError(f"{path}: its SHA-256 differs from the manifest's; the file was "
                            "changed after training. Refusing to load it; train a new version "
                            "or restore the file")
    return Ranker.load(path, str(m.get("kind")), list(m.get("features", [])))


def update_metrics(ws: Workspace, ident: str, metrics: dict[str, Any]) -> RankerVersion:
    """Record metrics in the version's manifest (the model file is not touched)."""
    version = get_version(ws, ident)
    manifest = {**version.manifest, "metrics": {**version.metrics, **metrics}}
    tmp = version.path / f".manifest-{uuid.uuid4().hex}.json"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(version.path / "manifest.json")
    return get_version(ws, ident)


def active_version(ws: Workspace, schema: str) -> RankerVersion | None:
    """The schema's active version, or None."""
    ident = Rankers(ws).active(schema)
    return get_version(ws, ident) if ident else None


def activate(ws: Workspace, ident: str, *, user: Actor, reason: str = "") -> RankerVersion:
    """Make a version the one its schema ranks with (an older one: a rollback).

    Raises:
        PermissionDenied: ``user`` is not an admin (a gate's promotion acts for whoever started
            the round: the CLI, an admin, or the system's learn-as-you-label job).
        CurationError: No such version, or it cannot be loaded.
    """
    actor = require_admin_actor(user, "Activating a ranker version")
    version = get_version(ws, ident)
    load_ranker(version)  # never activate what cannot be loaded
    Rankers(ws).set_active(version.schema, version.id, actor=actor, reason=reason)
    return version
