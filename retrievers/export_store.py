"""Where exported models are stored, and how a stored export is checked before it is loaded.

An export of the transformer body (:mod:`retrievers.backends`) lives in its own folder per model
and stored form (:func:`export_folder`, under :func:`default_export_root` unless a root is
given), beside an ``export.json`` (:class:`ExportManifest`): backend, precision, source, tool
versions and the sha256 of every file. :func:`verify_export` returns the manifest only when the
source matches and every file still has its checksum; anything else means "export again".
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from retrievers.errors import RetrieverError
from retrievers.saved import load_json

logger = logging.getLogger(__name__)

#: The file each export folder holds beside the model files.
EXPORT_MANIFEST = "export.json"
EXPORT_FORMAT = 1


def default_export_root() -> Path:
    """``$XDG_CACHE_HOME/kbcurate/exports`` (``~/.cache/...``): exports outside a workspace."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kbcurate" / "exports"


def stored_precision(backend: str, precision: str) -> str:
    """The precision an export is stored in: OpenVINO bf16 runs the fp32 model (bf16 is a
    run-time hint), so both share one export."""
    return "fp32" if (backend, precision) == ("openvino", "bf16") else precision


def export_folder(root: str | Path, model_key: str, backend: str, precision: str) -> Path:
    """``<root>/<model_key>-<backend>-<stored precision>``: one folder per model and form."""
    return Path(root) / f"{model_key}-{backend}-{stored_precision(backend, precision)}"


@dataclass(frozen=True)
class ExportManifest:
    """What ``export.json`` records about one export.

    Attributes:
        backend: "onnx" or "openvino".
        precision: Stored precision ("fp32" or "int8").
        source: The model version or weights fingerprint the export was made from.
        files: Relative path -> sha256 of every exported file.
        tool: Versions of the converter / runtime packages.
        calibration_texts: Texts used to calibrate (static int8), else 0.
        created: UTC time of the export.
        seconds: How long the export took.
    """

    backend: str
    precision: str
    source: str
    files: dict[str, str]
    tool: dict[str, str] = field(default_factory=dict)
    calibration_texts: int = 0
    created: str = ""
    seconds: float = 0.0
    format: int = EXPORT_FORMAT


def sha256_file(path: Path) -> str:
    """sha256 hex digest of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_export(folder: Path, source: str) -> ExportManifest | None:
    """The export's manifest when every file matches its checksum and the source matches;
    None (with a log line saying why) otherwise."""
    path = folder / EXPORT_MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = ExportManifest(**load_json(path))
    except (OSError, TypeError, RetrieverError) as exc:
        logger.warning("%s: unreadable %s (%s); exporting again", folder, EXPORT_MANIFEST, exc)
        return None
    if manifest.format != EXPORT_FORMAT or manifest.source != source or not manifest.files:
        logger.warning("%s was exported from another model or format; exporting again", folder)
        return None
    for name, digest in manifest.files.items():
        file = folder / name
        if not file.is_file() or sha256_file(file) != digest:
            logger.warning("%s: %s does not match its sha256 in %s (changed or missing); "
                           "not loading it, exporting again", folder, name, EXPORT_MANIFEST)
            return None
    return manifest
