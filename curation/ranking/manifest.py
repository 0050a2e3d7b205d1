"""What a ranker version's manifest must hold, checked whenever one is read (issue 35).

A manifest is the JSON record of a version (kept in the workspace database, with a copy in
``manifest.json`` beside the model). One that is not what the code reads (``[]``, ``"metrics":
[]``, ``"depth": "abc"``) gives one :class:`~kb_sources.errors.CurationError` naming where it was
read and what is wrong, never an ``AttributeError`` deep inside a page; the other versions keep
working.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from curation.ranking.model import LIGHTGBM_FILE, LOGISTIC_FILE
from kb_sources.errors import CurationError
from kb_sources.json_text import parse_json, read_json

#: The model file names a manifest may name (in the version's own folder, never a path).
MODEL_FILES = (LIGHTGBM_FILE, LOGISTIC_FILE)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _metrics(v: Any) -> bool:
    return isinstance(v, dict) and all(
        isinstance(split, dict) and all(_number(x) for x in split.values())
        for split in v.values())


#: key -> (check, what it must be); keys not listed are free.
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "kind": (lambda v: isinstance(v, str) and bool(v), "a model kind (\"lightgbm\")"),
    "features": (lambda v: isinstance(v, list) and bool(v)
                 and all(isinstance(x, str) for x in v), "a list of feature names"),
    "file": (lambda v: v in MODEL_FILES, f"one of {', '.join(MODEL_FILES)}"),
    "metrics": (_metrics, "an object of splits, each an object of numbers"),
    "depth": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
              "a positive whole number"),
    "dense": (lambda v: v is None or isinstance(v, str), "a dense version id or null"),
    "base": (lambda v: isinstance(v, bool), "true or false"),
    "cross": (lambda v: v is None or isinstance(v, dict) and isinstance(v.get("version"), str)
              and isinstance(v.get("key"), str) and isinstance(v.get("k"), int)
              and not isinstance(v.get("k"), bool) and v["k"] > 0,
              "null or the cross version's {\"version\", \"key\", \"k\"}"),
    "labels_used": (lambda v: isinstance(v, list), "a list of label ids"),
    "labels_held_out": (lambda v: isinstance(v, list), "a list of label ids"),
    "options": (lambda v: isinstance(v, dict), "an object"),
    "created_at": (lambda v: isinstance(v, str), "a date"),
    "created_by": (lambda v: isinstance(v, str), "a user name"),
}
#: What a manifest must be, and how to fix one that is not JSON (or nested too deeply).
EXPECTED = "a ranker manifest (a JSON object of a few levels)"
DAMAGED = ("the ranker version is damaged: restore its manifest, or remove its folder (in "
           "rankers/) and re-run the round (kbcurate rank train)")
#: Keys every manifest must have.
REQUIRED = ("kind", "features", "file")


def parse_manifest(text: str | bytes, where: str) -> dict[str, Any]:
    """A manifest read from JSON text and checked (:func:`check_manifest`).

    Raises:
        CurationError: Not JSON (or nested too deeply, or too long), or not a ranker manifest;
            the message names ``where``.
    """
    return check_manifest(parse_json(text, where, expected=EXPECTED, fix=DAMAGED), where)


def read_manifest_file(path: Path) -> dict[str, Any]:
    """The checked manifest of the file ``path`` (its size checked before it is read).

    Raises:
        OSError: The file cannot be read.
        CurationError: As :func:`parse_manifest`; the message names the file.
    """
    return check_manifest(read_json(path, expected=EXPECTED, fix=DAMAGED), str(path))


def check_manifest(data: Any, where: str) -> dict[str, Any]:
    """``data`` when it is a ranker manifest.

    Raises:
        CurationError: One line naming ``where``, the key and what it must be.
    """
    if not isinstance(data, dict):
        raise CurationError(f"{where}: not a ranker manifest (expected a JSON object, got "
                            f"{type(data).__name__}); the version is damaged: restore the file "
                            "or train a new version")
    problems = [f"missing {key!r}" for key in REQUIRED if key not in data]
    problems += [f"{key!r} must be {what}, got {json.dumps(data[key])[:40]}"
                 for key, (ok, what) in _CHECKS.items() if key in data and not ok(data[key])]
    if problems:
        raise CurationError(f"{where}: not a valid ranker manifest: {'; '.join(problems)}; the "
                            "version is damaged: restore the file or train a new version")
    return data
