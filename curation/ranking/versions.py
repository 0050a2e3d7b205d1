"""Ranker versions: ``WS/rankers/<schema>-ranker@N/`` with the text model and ``manifest.json``.

Each version is a row of the workspace database
(:class:`~curation.store.ranker_versions.RankerVersions`), as dense versions are: the database
allocates its number (two processes saving at once get different ones), and keeps the model
file's SHA-256 and the manifest (features, grade table, options, label ids, sizes, metrics, the
gate's verdict); ``manifest.json`` beside the model is a copy for people. Loading refuses a model
whose checksum differs from the database's, and checks a file not yet checked before this process
lets LightGBM read it (:mod:`curation.ranking.model_check`: a damaged file never takes the server
down). A version is written into a temporary folder (recorded with its process) and renamed into
place, so a crash never leaves half a version, and the next round removes the folders of killed
ones. A round's version commits with its gate verdict and promotion (:func:`saving_version`):
a full disk while recording them leaves no version. Versions written before the database kept
them are registered when first seen.

Which version ranks is a workspace setting per schema (:meth:`~curation.store.rankers.Rankers.
set_active`, admins only, audited); activating an older version is the rollback.
:func:`active_ranker` says whether the active version can be used, and why not, so search falls
back to the next measured configuration with a notice instead of failing.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.ranking.manifest import check_manifest
from curation.ranking.model import Ranker
from curation.ranking.model_check import check_model_file, remember_checked
from curation.ranking.version_files import (
    MANIFEST,
    REGISTRAR,
    TMP_PREFIX,
    RankerVersion,
    clean_orphans,
    disk_floor,
    file_sha256,
    parse_id,
    register_found,
    version_from_row,
    version_root,
)
from curation.store.errors import (
    DATABASE_ERRORS,
    Actor,
    WorkspaceError,
    describe_database_error,
    describe_os_error,
    require_admin_actor,
)
from curation.store.ranker_versions import RankerVersions, parse_ranker_id, ranker_id
from curation.store.rankers import Rankers
from curation.store.workspace import DB_NAME, Workspace, utcnow
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Re-exported: the version record, and the cleanup a round runs first.
__all__ = ["ActiveRanker", "RankerVersion", "VersionScan", "activate", "active_ranker",
           "active_version", "clean_orphans", "get_version", "identical_version",
           "list_versions", "load_ranker", "model_sha256", "parse_id", "promote",
           "save_version", "saving_version", "scan_versions", "update_manifest", "update_metrics",
           "verify_model"]


@dataclass(frozen=True)
class VersionScan:
    """The versions that read, and one line per one that does not (naming its file)."""

    versions: tuple[RankerVersion, ...]
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class ActiveRanker:
    """The schema's active version as search may use it.

    Attributes:
        ident: What the workspace setting names (None: no active version).
        version: The version, when it can be used (None otherwise).
        problem: Why the named version cannot be used (empty when it can).
    """

    schema: str
    ident: str | None
    version: RankerVersion | None = None
    problem: str = ""

    def notice(self, fallback: str) -> str:
        """One line for the page and the CLI when the active version cannot be used."""
        return (f"The active ranker {self.ident} of {self.schema} cannot be used: "
                f"{self.problem.rstrip('.')}. Searches use {fallback} instead. An admin can "
                "activate another version or train a new one (Models page, or kbcurate rank "
                f"activate VERSION --reason TEXT / kbcurate rank train --schema {self.schema}).")


def scan_versions(ws: Workspace, schema: str | None = None) -> VersionScan:
    """Every saved version (of one schema), oldest first, and one line per folder or row that is
    not a usable version record (the others still list)."""
    store = RankerVersions(ws)
    known = store.idents()
    out, problems = [], []
    root = version_root(ws)
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        parsed = parse_ranker_id(folder.name)
        if parsed is None or folder.name in known or (schema and parsed[0] != schema):
            continue
        try:
            register_found(ws, folder)
        except CurationError as exc:
            problems.append(str(exc))
    for row in store.saved(schema):
        try:
            out.append(version_from_row(ws, row))
        except CurationError as exc:
            problems.append(str(exc))
    return VersionScan(tuple(sorted(out, key=lambda v: (v.schema, v.number))), tuple(problems))


def list_versions(ws: Workspace, schema: str | None = None) -> list[RankerVersion]:
    """Every saved version (of one schema) that reads, oldest first (see
    :func:`scan_versions` for the others)."""
    found = scan_versions(ws, schema)
    for problem in found.problems:
        logger.warning("%s", problem)
    return list(found.versions)


def get_version(ws: Workspace, ident: str) -> RankerVersion:
    """The version ``<schema>-ranker@N``.

    Raises:
        CurationError: A malformed id, no such version (the message lists the saved ones), or
            a damaged record (naming where it was read).
    """
    schema, _ = parse_id(ident)
    row = RankerVersions(ws).get(ident)
    if row is not None and row.status == "saved":
        return version_from_row(ws, row)
    folder = version_root(ws) / ident
    if row is None and (folder.is_dir() or folder.is_symlink()):
        return register_found(ws, folder)
    known = ", ".join(r.ident for r in RankerVersions(ws).saved(schema)) or "none"
    raise CurationError(f"No ranker version {ident} in {version_root(ws)} (saved versions of "
                        f"{schema}: {known}); train one with `kbcurate rank train --schema "
                        f"{schema}`")


def save_version(ws: Workspace, schema: str, ranker: Ranker, manifest: dict[str, Any], *,
                 actor: str) -> RankerVersion:
    """Write a new version of ``schema`` (not yet active); the database allocates its number.

    Raises:
        CurationError: No user, a schema name no version id can carry, or the disk is full
            (nothing is saved then).
    """
    with saving_version(ws, schema, ranker, manifest, actor=actor) as version:
        ident = version.id
    return get_version(ws, ident)


@contextmanager
def saving_version(ws: Workspace, schema: str, ranker: Ranker, manifest: dict[str, Any], *,
                   actor: str) -> Iterator[RankerVersion]:
    """Write a new version of ``schema`` and yield it inside the transaction that makes it a
    saved version: what the block records (the gate's verdict, the promotion) commits with it,
    all or nothing. A block that fails (a full disk while recording the verdict) leaves no
    version: the transaction rolls back, the folder and the row are removed.

    Raises:
        CurationError: No user, a schema name no version id can carry, or a file or database
            error (a full disk) while saving or in the block (nothing is saved then).
    """
    if not actor.strip():
        raise CurationError("Saving a ranker version needs a user; sign in first")
    parse_id(ranker_id(schema, 1))
    root = version_root(ws)
    tmp = root / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    store = RankerVersions(ws)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _save_error(ws, schema, exc) from exc
    ident = store.allocate(schema, created_by=actor, tmp=tmp.name, floor=disk_floor(ws, schema))
    final: Path | None = None
    try:
        path = ranker.save(tmp)
        sha = file_sha256(path)
        full = {**manifest, "id": ident, "schema": schema, "kind": ranker.kind,
                "features": ranker.names, "file": path.name, "sha256": sha,
                "created_at": utcnow(), "created_by": actor}
        (tmp / MANIFEST).write_text(json.dumps(full, indent=1, sort_keys=True), encoding="utf-8")
        with ws.transaction():
            store.finish(ident, file=path.name, sha256=sha, manifest=full)
            final = _rename_into_place(tmp, root / ident)
            yield get_version(ws, ident)
    except BaseException as exc:
        _undo_save(store, ident, tmp, final)
        if isinstance(exc, (OSError, *DATABASE_ERRORS)):
            raise _save_error(ws, schema, exc) from exc
        raise
    remember_checked(sha)
    logger.info("saved ranker %s (%s, %d features)", ident, ranker.kind, len(ranker.names))


def _rename_into_place(tmp: Path, target: Path) -> Path:
    """Rename the finished temporary folder to ``target`` (the version's folder).

    Raises:
        CurationError: ``target`` exists (left by an interrupted save).
    """
    if target.exists() or target.is_symlink():
        raise CurationError(f"{target} exists but is no saved version (left by an "
                            "interrupted save?); move it away and train again")
    tmp.rename(target)
    return target


def model_sha256(ranker: Ranker) -> str:
    """The SHA-256 the ranker's model file would have once saved (written into a temporary
    folder outside the workspace and removed)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kbcurate-ranker-") as tmp:
        return file_sha256(ranker.save(Path(tmp)))


def identical_version(ws: Workspace, schema: str, sha256: str) -> RankerVersion | None:
    """The saved version of ``schema`` whose model file has this SHA-256 (the same model,
    options and training data) and can be used, or None: a round never keeps two identical
    versions, but a model equal to one whose file is gone or damaged is saved anew."""
    for row in RankerVersions(ws).saved(schema):
        if row.sha256 == sha256:
            try:
                version = version_from_row(ws, row)
                verify_model(version, ws)
                return version
            except CurationError as exc:  # gone or damaged: the new model is saved anew
                logger.info("%s equals the new model but cannot be used (%s)", row.ident, exc)
    return None


def _undo_save(store: RankerVersions, ident: str, tmp: Path, final: Path | None) -> None:
    for folder in (tmp, final):
        if folder is not None and folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
    try:
        store.discard(ident)
    except (CurationError, OSError) as exc:  # the next round removes the row of a dead save
        logger.warning("could not drop the unfinished ranker row %s (%s)", ident, exc)


def _save_error(ws: Workspace, schema: str, exc: BaseException) -> CurationError:
    """The one line for a file or database error while saving (a full disk says so, and what
    to do)."""
    db = ws.root / DB_NAME
    why = (describe_os_error(exc, db) if isinstance(exc, OSError)
           else describe_database_error(exc, db))
    return CurationError(f"Cannot save a ranker version of {schema} into {version_root(ws)}: "
                         f"{why.rstrip('.')}. Nothing was saved; the active ranker version "
                         "still ranks")


def verify_model(version: RankerVersion, ws: Workspace | None = None) -> Path:
    """The version's model file, after checking it may be loaded: in the version's folder, not
    a link, its SHA-256 the one recorded in the database, and (once per file) its structure
    and a load in a child process. ``ws``: record a passed check in the database.

    Raises:
        CurationError: Missing, changed since it was saved, or damaged.
    """
    path = version.file
    if version.path.is_symlink() or path.is_symlink() or not path.is_file():
        raise CurationError(f"{version.path}: the model file {path.name} is missing; the "
                            f"version {version.id} cannot rank. Restore the folder, or activate "
                            "another version or train a new one")
    if not version.sha256 or file_sha256(path) != version.sha256:
        raise CurationError(f"{path}: its SHA-256 differs from the one recorded in the workspace "
                            "database when it was saved; the file was changed after training. "
                            "Refusing to load it; train a new version or restore the file")
    if version.manifest["kind"] == "lightgbm" and not version.checked:  # C++ reads it
        check_model_file(path, len(version.manifest["features"]), version.sha256)
        if ws is not None:
            try:
                RankerVersions(ws).mark_checked(version.id, version.sha256)
            except WorkspaceError as exc:
                logger.info("could not record the check of %s (%s)", version.id, exc)
    return path


def load_ranker(version: RankerVersion, ws: Workspace | None = None) -> Ranker:
    """The version's model, after :func:`verify_model`.

    Raises:
        CurationError: The file is missing, changed or damaged.
    """
    path = verify_model(version, ws)
    return Ranker.load(path, str(version.manifest["kind"]), list(version.manifest["features"]))


def update_manifest(ws: Workspace, ident: str, changes: dict[str, Any], *,
                    actor: str = REGISTRAR) -> RankerVersion:
    """Merge ``changes`` into the version's manifest (the database's, then the file copy; the
    model file is not touched)."""
    version = get_version(ws, ident)
    manifest = check_manifest({**version.manifest, **changes}, f"the new manifest of {ident}")
    RankerVersions(ws).set_manifest(ident, manifest, actor=actor)
    tmp = version.path / f".manifest-{uuid.uuid4().hex}.json"
    try:
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(version.path / MANIFEST)
    except OSError as exc:  # the database holds it; the file is a copy
        tmp.unlink(missing_ok=True)
        logger.warning("%s: could not update the manifest copy (%s)", version.path, exc)
    return get_version(ws, ident)


def update_metrics(ws: Workspace, ident: str, metrics: dict[str, Any]) -> RankerVersion:
    """Record metrics in the version's manifest (the model file is not touched)."""
    version = get_version(ws, ident)
    return update_manifest(ws, ident, {"metrics": {**version.metrics, **metrics}})


def active_version(ws: Workspace, schema: str) -> RankerVersion | None:
    """The schema's active version, or None.

    Raises:
        CurationError: The setting names a version that is gone or damaged (see
            :func:`active_ranker` for a caller that falls back).
    """
    ident = Rankers(ws).active(schema)
    return get_version(ws, ident) if ident else None


def active_ranker(ws: Workspace, schema: str) -> ActiveRanker:
    """The schema's active version if it can be used (its model checked), else why not."""
    ident = Rankers(ws).active(schema)
    if not ident:
        return ActiveRanker(schema, None)
    try:
        version = get_version(ws, ident)
        if version.schema != schema:
            raise CurationError(f"{ident} ranks {version.schema}, not {schema}")
        verify_model(version, ws)
    except CurationError as exc:
        return ActiveRanker(schema, ident, None, str(exc))
    return ActiveRanker(schema, ident, version)


def _loadable(ws: Workspace, ident: str, user: Actor) -> RankerVersion:
    require_admin_actor(user, "Activating a ranker version")
    version = get_version(ws, ident)
    load_ranker(version, ws)  # never activate what cannot be loaded
    return version


def activate(ws: Workspace, ident: str, *, user: Actor, reason: str = "") -> RankerVersion:
    """Make a version the one its schema ranks with (an older one: a rollback).

    Raises:
        PermissionDenied: ``user`` is not an admin.
        CurationError: No such version, or it cannot be loaded.
    """
    version = _loadable(ws, ident, user)
    Rankers(ws).set_active(version.schema, version.id, user=user, reason=reason)
    return version


def promote(ws: Workspace, ident: str, *, user: Actor, reason: str,
            started_from: str | None) -> bool:
    """A round's promotion: activate ``ident`` only if the active version is still
    ``started_from``, the one the round started from (a compare-and-swap); False, changing
    nothing, when an admin (or another round) changed it meanwhile.

    Raises:
        PermissionDenied: ``user`` is not an admin (the gate acts for whoever started the
            round: the CLI, an admin, or the system's learn-as-you-label job).
        CurationError: No such version, or it cannot be loaded.
    """
    version = _loadable(ws, ident, user)
    return Rankers(ws).set_active(version.schema, version.id, user=user, reason=reason,
                                  expected=started_from)
