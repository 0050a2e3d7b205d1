"""The files of ranker versions: ``WS/rankers/<schema>-ranker@N/`` (the model and a copy of its
manifest) and the version record read from the database row (:class:`RankerVersion`).

Also what :mod:`curation.ranking.versions` needs below it: a folder written before the database
kept versions is registered on first sight (its manifest checked, its model's checksum matching);
the temporary folders of killed saves are removed (:func:`clean_orphans`), never one that a live
process is writing (its ``saving`` row names the folder and the process).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.ranking.manifest import check_manifest, parse_manifest, read_manifest_file
from curation.store.errors import WorkspaceError
from curation.store.ranker_versions import RankerVersionRow, RankerVersions, parse_ranker_id
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

FOLDER = "rankers"
MANIFEST = "manifest.json"
TMP_PREFIX = ".tmp-"
#: Who registers a version found on disk without a database row.
REGISTRAR = "<system>"


@dataclass(frozen=True)
class RankerVersion:
    """One saved version (``sha256``: the model file's checksum recorded in the database)."""

    id: str
    schema: str
    number: int
    path: Path
    manifest: dict[str, Any]
    sha256: str = ""
    checked: bool = False
    created_by: str = ""
    created_at: str = ""

    @property
    def metrics(self) -> dict[str, Any]:
        return self.manifest.get("metrics", {})

    @property
    def file(self) -> Path:
        """The model file (in the version's own folder: the manifest names no path)."""
        return self.path / str(self.manifest["file"])


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file (hex)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def version_root(ws: Workspace) -> Path:
    """``WS/rankers``."""
    return ws.root / FOLDER


def parse_id(ident: str) -> tuple[str, int]:
    """(schema, number) of ``<schema>-ranker@N``.

    Raises:
        CurationError: Not a version id.
    """
    parsed = parse_ranker_id(ident)
    if parsed is None:
        raise CurationError(f"{ident!r} is not a ranker version id; expected <schema>-ranker@N "
                            "(e.g. disease_gene-ranker@1)")
    return parsed


def version_from_row(ws: Workspace, row: RankerVersionRow) -> RankerVersion:
    """The version of a database row, its manifest checked.

    Raises:
        CurationError: The stored manifest is not a ranker manifest.
    """
    where = f"the manifest of {row.ident} in the workspace database"
    manifest = parse_manifest(row.manifest, where)
    manifest = check_manifest({**manifest, "file": row.file or manifest["file"]}, where)
    return RankerVersion(row.ident, row.schema, row.number, version_root(ws) / row.ident, manifest,
                         row.sha256, row.checked, row.created_by, row.created_at)


def register_found(ws: Workspace, folder: Path) -> RankerVersion:
    """A version folder without a database row (written before rows were kept), registered.

    Raises:
        CurationError: It cannot be a version (damaged manifest, missing or changed model).
    """
    schema, number = parse_id(folder.name)
    path = folder / MANIFEST
    if folder.is_symlink() or path.is_symlink() or not path.is_file():
        raise CurationError(f"{folder}: no {MANIFEST} (or a link); not a ranker version: remove "
                            "the folder or restore the file")
    try:
        manifest = read_manifest_file(path)
    except OSError as exc:
        raise CurationError(f"{path}: unreadable ({exc.strerror or exc})") from exc
    model = folder / manifest["file"]
    if model.is_symlink() or not model.is_file():
        raise CurationError(f"{folder}: its model file {manifest['file']} is missing; restore "
                            "it or remove the folder")
    if manifest.get("sha256") != file_sha256(model):
        raise CurationError(f"{model}: its SHA-256 differs from {path}'s; the version is "
                            "damaged: restore the file or remove the folder")
    row = RankerVersionRow(folder.name, schema, number, "saved", manifest["file"],
                           manifest["sha256"], False, json.dumps(manifest, sort_keys=True),
                           str(manifest.get("created_by", "")), str(manifest.get("created_at", "")))
    try:
        RankerVersions(ws).register(row, actor=REGISTRAR)
        logger.info("registered the ranker version %s found on disk", folder.name)
    except WorkspaceError as exc:  # read-only: use it as found
        logger.warning("%s: cannot register it now (%s)", folder, exc)
    return version_from_row(ws, row)


def disk_floor(ws: Workspace, schema: str) -> int:
    """The largest number of a ``schema`` version folder on disk (0: none)."""
    root = version_root(ws)
    numbers = [parsed[1] for p in (root.iterdir() if root.is_dir() else [])
               if (parsed := parse_ranker_id(p.name)) and parsed[0] == schema]
    return max(numbers, default=0)


def clean_orphans(ws: Workspace) -> list[str]:
    """Remove the temporary folders of killed saves (not one a live process writes now) and
    their rows; returns the names removed."""
    root = version_root(ws)
    if not root.is_dir():
        return []
    folders = [p for p in root.iterdir() if p.name.startswith(TMP_PREFIX) and p.is_dir()
               and not p.is_symlink()]
    store = RankerVersions(ws)
    live = set()
    for row in store.saving():  # read after listing: a save records its row before its folder
        if row.writer_alive:
            live.add(row.tmp)
        else:
            store.discard(row.ident)
    removed = [p.name for p in folders if p.name not in live]
    for name in removed:
        shutil.rmtree(root / name, ignore_errors=True)
    if removed:
        logger.info("removed %d unfinished ranker folder(s) of killed rounds: %s", len(removed),
                    ", ".join(removed))
    return removed
