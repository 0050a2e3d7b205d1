"""Which encoder models a saved index may load: a model version of the workspace (checked
against its recorded checksums), the packaged all-MiniLM-L6-v2, or the model its caller asked for.
An edited ``retriever.json`` never makes a search load another model (issue 28).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curation.store.models import Models, verify_weights
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError


def check_index_models(ws: Workspace, folder: str | Path,
                       requested: dict[str, Any] | None = None) -> None:
    """Refuse a saved index whose manifests name an encoder model that is neither a model
    version of this workspace (its files checked against the recorded checksums), nor the
    packaged all-MiniLM-L6-v2, nor a model the caller asked for in ``requested`` (the index
    options it built the folder name from: a CLI ``--model`` folder, checked job options).
    Call it before loading the index: an edited ``retriever.json`` must never make a search
    load another model unchecked.

    Raises:
        CurationError: A manifest names another model (the file and the fix are named), or a
            version's files do not match their checksums.
    """
    from retrievers.saved import saved_encoders

    asked = set(_model_values(requested or {}))
    for manifest, encoder in saved_encoders(Path(folder)):
        for key in ("model", "query_model"):
            value = encoder.get(key)
            if value is not None:
                _check_indexed_model(ws, str(value), asked, manifest, key)


def _model_values(options: Any) -> list[str]:
    """Every ``model`` / ``query_model`` value in (nested) retriever options."""
    if not isinstance(options, dict):
        return []
    found = [str(v) for k, v in options.items() if k in ("model", "query_model") and v]
    return found + [m for v in options.values() for m in _model_values(v)]


def _check_indexed_model(ws: Workspace, value: str, asked: set[str], manifest: Path,
                         key: str) -> None:
    from retrievers.encoder import DEFAULT_MODEL, resolve_model_path

    packaged = resolve_model_path(DEFAULT_MODEL)
    path = Path(value).expanduser()
    models_root = (ws.root / "models").resolve()
    if path.is_absolute() and path.resolve().is_relative_to(models_root):
        for version in Models(ws).versions():
            if path.resolve() in (version.model_dir.resolve(),
                                  (version.model_dir / "query").resolve()):
                verify_weights(version)
                return
    elif value in asked or value == packaged or resolve_model_path(value) == packaged:
        return
    raise CurationError(
        f"Index manifest {manifest} names the encoder {key} {value!r}, which is neither a model "
        "version of this workspace nor the packaged all-MiniLM-L6-v2 nor the model this index "
        "was asked for; an index never loads another model (was retriever.json edited?). "
        f"Delete {manifest.parent} and build the index again "
        "(kbcurate index --rebuild)")
