"""Model registry: every trained model is a version in the workspace.

A version is named ``<schema>-<recipe>@<n>`` ("disease_gene-edel@3"). Its folder ``WS/models/<id>/``
holds ``model/`` (``model.safetensors``; pickled weights are refused) and ``manifest.json`` (how it
was trained, every file's sha256, the metrics). At most one version per schema is ``active`` (the
one the app ranks with; activating an older one is a rollback); every change is audited, weights
are checked before use. :class:`Models` registers, lists, activates, retires, exports."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from curation.store.errors import Actor, require_admin_actor
from curation.store.model_files import check_model_files
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import CurationError, InputFormatError, UnknownNameError, parse_choice
from kb_sources.json_text import parse_json

logger = logging.getLogger(__name__)

WEIGHTS = "model.safetensors"
CROSS_KIND = "cross"  # the manifest kind of a cross-encoder version (never the dense encoder)
MANIFEST = "manifest.json"
_NAME_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*")


class ModelStatus(StrEnum):
    """Where a version is in its life."""

    CANDIDATE = "candidate"  # registered, not used for ranking
    ACTIVE = "active"  # the one version per schema that ranks
    RETIRED = "retired"  # kept for the record; activating it again is a rollback

    @classmethod
    def parse(cls, value: str | ModelStatus) -> ModelStatus:
        return parse_choice(cls, value, "model status")


@dataclass(frozen=True)
class ModelVersion:
    """One registered model version (``path`` is its folder ``WS/models/<id>/``)."""

    id: str
    name: str
    version: int
    schema: str
    recipe: str
    base_model: str
    path: Path
    status: ModelStatus
    created_at: str
    created_by: str
    manifest: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""

    @property
    def model_dir(self) -> Path:
        """The sentence-transformers folder of this version."""
        return self.path / "model"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["status"] = self.status.value
        return data


def verify_weights(version: ModelVersion) -> None:
    """Check every file of the version against the sha256 recorded when it was registered.

    Raises:
        CurationError: A file is missing or changed, or pickled weights were added.
    """
    expected = {**version.manifest.get("files", {}), WEIGHTS: version.sha256}
    for rel, digest in sorted(expected.items()):
        path = version.model_dir / rel
        what, verb = ((f"weights of {version.id}", "do") if rel == WEIGHTS
                      else (f"file {rel} of {version.id}", "does"))
        if not path.is_file():
            raise CurationError(f"{what} missing: {path} not found, so the checksum recorded "
                                "at training cannot be checked; restore it or retrain")
        found = _sha256(path)
        if found != digest:
            raise CurationError(
                f"{what} at {path} {verb} not match the checksum recorded at training (expected "
                f"{digest}, found {found}): the file was changed or corrupted; restore it or "
                "retrain")
    _check_safetensors(version.model_dir, f"model {version.id} at {version.model_dir}")


#: Encoder settings an imported version's manifest may carry (``EncoderConfig`` fields).
_ENCODER_KEYS = ("pooling", "query_prefix", "doc_prefix", "query_max_seq_length")


def format_models_table(versions: list[ModelVersion]) -> str:
    """A plain-text table: id, status, base model, created, test NDCG@10 (corpus, else pool)."""
    width = max([len(v.id) for v in versions] + [10]) + 2
    lines = [f"{'id':<{width}}{'status':<11}{'base model':<32}{'created':<27}{'NDCG@10':>8}"]
    for v in versions:
        ndcg = next((v.metrics[k] for k in ("test_ndcg@10", "testpool_ndcg@10", "ndcg@10")
                     if isinstance(v.metrics.get(k), int | float)), None)  # as rounds record
        shown = f"{ndcg:.3f}" if isinstance(ndcg, int | float) else "-"
        lines.append(f"{v.id:<{width}}{v.status.value:<11}{v.base_model[:31]:<32}"
                     f"{v.created_at:<27}{shown:>8}")
    return "\n".join(lines)


def _copy_and_hash(source: Path, dest: Path) -> dict[str, str]:
    """Copy a folder; returns {relative path: sha256} of the copied files."""
    shutil.copytree(source, dest)
    return {p.relative_to(dest).as_posix(): _sha256(p)
            for p in sorted(dest.rglob("*")) if p.is_file()}


def _check_safetensors(folder: Path, what: str) -> None:
    check_model_files(folder, what)
    if not (folder / WEIGHTS).is_file():
        raise CurationError(f"{what} has no {WEIGHTS}; weights must be safetensors ({WEIGHTS}, "
                            "never pickle): save with model.save(..., safe_serialization=True)")


def _write_manifest(folder: Path, manifest: dict[str, Any], metrics: dict[str, Any]) -> None:
    """Write ``manifest.json`` atomically (temp file + replace)."""
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps({**manifest, "metrics": metrics}, indent=2, sort_keys=True,
                              ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


class Models:
    """The models table: the registry of trained model versions."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def register(
        self, *,
        schema: str,
        recipe: str,
        base_model: str,
        model_dir: str | Path,
        manifest: dict[str, Any],
        metrics: dict[str, Any] | None = None,
        created_by: str,
    ) -> ModelVersion:
        """Copy a trained sentence-transformers folder into the workspace as a new candidate.

        Args:
            schema: Relation schema the model was trained for ("disease_gene").
            recipe: Training recipe ("edel").
            base_model: The model training started from.
            model_dir: Sentence-transformers folder with ``model.safetensors``.
            manifest: How it was trained (config, data sizes, seed, ``max_seq_length``...).
            metrics: Evaluation results ("ndcg@10": ...), if already known.
            created_by: Who registered it.

        Returns:
            The new version, status ``candidate``.

        Raises:
            CurationError: Bad name parts, no user, or the folder lacks safetensors weights or holds
                pickled ones.
        """
        for kind, part in (("schema", schema), ("recipe", recipe)):
            if not _NAME_PART.fullmatch(part):
                raise CurationError(f"{kind} {part!r} cannot name a model: use letters, digits, "
                                    "'_' and '.' (e.g. 'disease_gene', 'edel')")
        if not created_by.strip():
            raise CurationError("Registering a model needs a user (created_by); sign in first")
        source = Path(model_dir)
        _check_safetensors(source, f"model folder {source}")
        tmp = self.ws.root / "models" / f".tmp-{uuid.uuid4().hex}"
        final: Path | None = None
        try:
            files = _copy_and_hash(source, tmp / "model")
            name, created_at = f"{schema}-{recipe}", utcnow()
            with self.ws.transaction():
                version = 1 + int(self.ws.conn.execute(
                    "SELECT COALESCE(MAX(CAST(version AS INTEGER)), 0) FROM models WHERE name = ?",
                    (name,)).fetchone()[0])
                ident = f"{name}@{version}"
                full = {**manifest, "id": ident, "schema": schema, "recipe": recipe,
                        "base_model": base_model, "created_at": created_at,
                        "created_by": created_by, "files": files, "sha256": files[WEIGHTS]}
                _write_manifest(tmp, full, metrics or {})
                target = tmp.parent / ident
                if target.exists():
                    raise CurationError(
                        f"{target} exists but is not a registered version (left by an "
                        "interrupted registration?); remove it and register again")
                tmp.rename(target)
                final = target
                self.ws.conn.execute(
                    "INSERT INTO models(name, version, recipe, base_model, path, status, metrics, "
                    "created_at, schema, created_by, manifest, sha256) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, str(version), recipe, base_model, f"models/{ident}",
                     ModelStatus.CANDIDATE.value, _dumps(metrics or {}), created_at, schema,
                     created_by, _dumps(full), files[WEIGHTS]))
                self.ws.audit(created_by, "register", "model", ident,
                              after={"base_model": base_model, "sha256": files[WEIGHTS]})
        except BaseException as exc:
            for folder in (tmp, final):
                if folder is not None and folder.exists():
                    shutil.rmtree(folder, ignore_errors=True)
            if isinstance(exc, OSError):
                raise CurationError(
                    f"Cannot save the model version into {tmp.parent}: {exc.strerror or exc}. "
                    "Nothing was registered; free disk space or make the folder writable, then "
                    "run the training again (it resumes from its last checkpoint)") from exc
            raise
        logger.info("registered model %s from %s", ident, source)
        return self.get(ident)

    def versions(self, schema: str | None = None,
                    status: str | ModelStatus | None = None) -> list[ModelVersion]:
        """Registered versions, newest first, optionally of one schema and/or status."""
        sql, params = "SELECT * FROM models WHERE 1 = 1", []
        if schema is not None:
            sql, params = sql + " AND schema = ?", [*params, schema]
        if status is not None:
            sql, params = sql + " AND status = ?", [*params, ModelStatus.parse(status).value]
        return [self._from_row(r) for r in self.ws.conn.execute(sql + " ORDER BY id DESC", params)]

    def get(self, ident: str) -> ModelVersion:
        """The version with id ``<name>@<n>``.

        Raises:
            UnknownNameError: No such version; the message lists the registered ids.
        """
        row = self._row(ident)
        if row is None:
            raise UnknownNameError("model version", ident, [m.id for m in self.versions()])
        return self._from_row(row)

    def is_version(self, ident: str) -> bool:
        """Whether ``ident`` names a registered version (vs. a HF name or folder)."""
        return self._row(ident) is not None

    def active(self, schema: str) -> ModelVersion | None:
        """The active version of a schema, or None."""
        found = self.versions(schema=schema, status=ModelStatus.ACTIVE)
        return found[0] if found else None

    def activate(self, ident: str, user: Actor, reason: str = "") -> ModelVersion:
        """Make a version the active one of its schema; the previous active one becomes a candidate.

        Activating a retired version is allowed (a rollback). Weights are verified first.

        Raises:
            PermissionDenied: ``user`` is not an admin.
            UnknownNameError: No such version.
            CurationError: The weights do not match their checksum, or a cross-encoder version.
        """
        actor = require_admin_actor(user, "Activating a model version")
        version = self.get(ident)
        if version.manifest.get("kind") == CROSS_KIND:  # it re-ranks: not a dense encoder
            raise CurationError(f"{version.id} is a cross-encoder version: it re-ranks; activate "
                                "it with kbcurate models activate (sets the active cross-encoder)")
        verify_weights(version)
        with self.ws.transaction():
            prev = self.active(version.schema)
            if prev is not None and prev.id == version.id:
                return version
            if prev is not None:
                self._set_status(prev, ModelStatus.CANDIDATE)
            self._set_status(version, ModelStatus.ACTIVE)
            self.ws.audit(actor, "activate", "model", version.id,
                          before={"previous": prev.id if prev else None}, after={"reason": reason})
        logger.info("activated model %s (previous: %s)", version.id, prev.id if prev else None)
        return self.get(version.id)

    def retire(self, ident: str, user: Actor, reason: str = "") -> ModelVersion:
        """Retire a version (an active one leaves its schema without an active model).

        Raises:
            PermissionDenied: ``user`` is not an admin.
        """
        actor = require_admin_actor(user, "Retiring a model version")
        version = self.get(ident)
        with self.ws.transaction():
            self._set_status(version, ModelStatus.RETIRED)
            self.ws.audit(actor, "retire", "model", version.id,
                          before={"status": version.status.value}, after={"reason": reason})
        return self.get(version.id)

    def update_metrics(self, ident: str, metrics: dict[str, Any],
                       actor: str) -> ModelVersion:
        """Merge ``metrics`` into the version's metrics (database row and ``manifest.json``)."""
        version = self.get(ident)
        merged = {**version.metrics, **metrics}
        with self.ws.transaction():
            self.ws.conn.execute("UPDATE models SET metrics = ? WHERE name = ? AND version = ?",
                                 (_dumps(merged), version.name, str(version.version)))
            self.ws.audit(actor, "metrics", "model", version.id, before=version.metrics,
                          after=merged)
            _write_manifest(version.path, version.manifest, merged)  # last: a failure rolls back
        return self.get(version.id)

    def options(self, ident: str) -> dict[str, Any]:
        """Dense-encoder options (``EncoderConfig`` fields) for a verified version."""
        version = self.get(ident)
        verify_weights(version)
        options: dict[str, Any] = {
            "model": str(version.model_dir),
            "model_version": f"{version.id}:{version.sha256[:12]}",
            "max_seq_length": version.manifest.get("max_seq_length", 256),
        }
        if "document_format" in version.manifest:
            options["document_format"] = version.manifest["document_format"]
        # imported checkpoints (kbcurate models import): prefixes, pooling, own query encoder
        for key, value in (version.manifest.get("encoder") or {}).items():
            if key in _ENCODER_KEYS:
                options[key] = value
        if version.manifest.get("query_model") and (version.model_dir / "query").is_dir():
            options["query_model"] = str(version.model_dir / "query")
        return options

    def export(self, ident: str, dest: str | Path, *, user: Actor) -> Path:
        """Copy a verified version (``model/`` + ``manifest.json``) to ``dest/<id>/``; returns it.

        Raises:
            PermissionDenied: ``user`` is not an admin (weights leave the workspace).
            CurationError: Weights do not verify, or ``dest/<id>`` already exists.
        """
        require_admin_actor(user, "Exporting a model version")
        version = self.get(ident)
        verify_weights(version)
        Path(dest).mkdir(parents=True, exist_ok=True)
        target = Path(dest) / version.id
        if target.exists():
            raise CurationError(f"{target} already exists; export {version.id} to another folder "
                                "or remove the old copy first")
        tmp = Path(dest) / f".tmp-{uuid.uuid4().hex}"
        try:
            shutil.copytree(version.model_dir, tmp / "model")
            shutil.copy2(version.path / MANIFEST, tmp / MANIFEST)
            tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return target

    def _set_status(self, version: ModelVersion, status: ModelStatus) -> None:
        self.ws.conn.execute("UPDATE models SET status = ? WHERE name = ? AND version = ?",
                             (status.value, version.name, str(version.version)))

    def _row(self, ident: str) -> Any:
        name, _, version = str(ident).rpartition("@")
        return self.ws.conn.execute("SELECT * FROM models WHERE name = ? AND version = ?",
                                    (name, version)).fetchone()

    def _from_row(self, row: Any) -> ModelVersion:
        ident = f"{row['name']}@{row['version']}"
        return ModelVersion(
            id=ident, name=row["name"], version=int(row["version"]),
            schema=row["schema"], recipe=row["recipe"], base_model=row["base_model"],
            path=self.ws.root / row["path"], status=ModelStatus.parse(row["status"]),
            created_at=row["created_at"], created_by=row["created_by"],
            manifest=_stored_object(row["manifest"], ident, "manifest"),
            metrics=_stored_object(row["metrics"], ident, "metrics"), sha256=row["sha256"])


def _stored_object(text: str, ident: str, column: str) -> dict[str, Any]:
    """The JSON object kept in ``column`` of version ``ident``'s row.

    Raises:
        InputFormatError: Not a JSON object of a few levels; the message names the record.
    """
    where = f"the {column} of model version {ident} in the workspace database"
    fix = ("the record is damaged: restore workspace.sqlite from a backup, or train the "
           "version again (kbcurate train)")
    value = parse_json(text, where, expected="a JSON object", fix=fix)
    if not isinstance(value, dict):
        raise InputFormatError(where, f"a JSON {type(value).__name__}, not an object",
                               expected="a JSON object", fix=fix)
    return value
