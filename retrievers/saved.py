"""Saved index folders: the manifest, and saving a folder all at once so that a killed save never
leaves a half-written index.

:func:`replace_folder` hands out a fresh temporary sibling (``.NAME.tmp-PID-TOKEN``); only when
everything is written there does it swap the folder in: the old folder is renamed aside
(``.NAME.old-PID-TOKEN``), the new one renamed into place, and the old one deleted. Each rename is
atomic on POSIX, so at any moment either the old or the new complete index exists under one of
those names. A process killed part-way leaves only hidden siblings behind:

- ``.NAME.tmp-*`` of a dead process is an unfinished save: deleted by the next save or load;
- ``.NAME.old-*`` of a dead process is the previous complete index: moved back into place when
  ``NAME`` is missing, read where it lies when ``NAME`` is incomplete (:func:`complete_folder`),
  deleted once ``NAME`` is complete.

Leftovers of a live process are never touched (it may be in the middle of its swap); a reader that
finds ``NAME`` missing at that instant reads the complete folder set aside instead.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)

#: The manifest every saved retriever folder holds; written last, so it marks a complete save.
MANIFEST = "retriever.json"
FORMAT_VERSION = 1
_EXPECTED = "a saved retriever's manifest (a JSON object)"
_REBUILD = "rebuild the index (it replaces the folder) or delete the folder"
#: Largest manifest read (a few KB in practice).
MAX_MANIFEST_BYTES = 16_000_000
TMP_TAG = ".tmp-"
OLD_TAG = ".old-"
_SWAP_ATTEMPTS = 5


@contextmanager
def replace_folder(folder: str | Path) -> Iterator[Path]:
    """Write a folder's new content into a temporary sibling, then swap it in atomically.

    Args:
        folder: The folder to (re)place; its parent is created when missing.

    Yields:
        An empty temporary folder to write into. When the block raises (or the process is
        killed) ``folder`` keeps its previous content and the temporary folder is removed.

    Raises:
        RetrieverError: Other processes kept swapping the same folder (see :func:`_swap`).

    Example::

        with replace_folder("ws/indexes/bm25-1234") as tmp:
            write_json(tmp / "ids.json", ids)
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(folder)
    tmp = _sibling(folder, TMP_TAG)
    tmp.mkdir()
    try:
        yield tmp
        _swap(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for aside in _siblings(folder, OLD_TAG):  # folder is complete now: drop dead saves' copies
        if not _owner_alive(aside):
            shutil.rmtree(aside, ignore_errors=True)


def _swap(tmp: Path, folder: Path) -> None:
    """Rename ``tmp`` to ``folder``, moving an existing ``folder`` aside first (then deleting it).

    Two processes saving the same folder at once both succeed; the last swap wins.
    """
    asides: list[Path] = []
    for _ in range(_SWAP_ATTEMPTS):
        try:
            os.rename(tmp, folder)  # atomic; fails when folder exists and is not empty
            break
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        aside = _sibling(folder, OLD_TAG)
        try:
            os.rename(folder, aside)
        except FileNotFoundError:  # another save moved it aside first: try again
            continue
        asides.append(aside)
    else:
        raise RetrieverError(
            f"could not swap the new index into {folder}: other processes kept replacing it "
            f"({_SWAP_ATTEMPTS} attempts); retry when the other index builds have finished")
    for aside in asides:
        shutil.rmtree(aside, ignore_errors=True)


def complete_folder(folder: str | Path, marker: str) -> Path:
    """The folder to read: ``folder`` when it holds ``marker`` (the file a save writes last),
    else a complete previous version that a save set aside, else ``folder`` as it is.

    A previous version whose saving process is dead is moved back into place when ``folder`` is
    missing; one whose process is alive (a swap in progress) is read where it lies.
    """
    folder = Path(folder)
    if (folder / marker).is_file():
        return folder
    asides = [p for p in _siblings(folder, OLD_TAG) if (p / marker).is_file()]
    if not asides:
        return folder
    aside = max(asides, key=_mtime)
    if _owner_alive(aside):
        return aside
    try:
        folder.rmdir()  # only an empty folder goes
    except OSError:
        pass
    if not folder.exists():
        try:
            os.rename(aside, folder)
        except OSError as exc:
            logger.warning("could not restore %s from %s (%s); reading it there", folder, aside,
                           exc)
            return aside
        logger.warning("%s: a save was killed while swapping; restored the previous index",
                       folder)
        return folder
    return aside


def clean_leftovers(folder: str | Path, marker: str | None = None) -> list[Path]:
    """Delete what dead processes left next to ``folder``; returns the paths removed.

    Unfinished saves (``.NAME.tmp-*``) always go; previous versions (``.NAME.old-*``) only when
    ``folder`` holds ``marker`` (it is complete), so :func:`complete_folder` can still restore
    them otherwise. Best effort: errors are logged, not raised.
    """
    folder = Path(folder)
    complete = marker is not None and (folder / marker).is_file()
    removed = []
    for tag in (TMP_TAG, OLD_TAG) if complete else (TMP_TAG,):
        for path in _siblings(folder, tag):
            if _owner_alive(path):
                continue
            try:
                shutil.rmtree(path)
            except OSError as exc:
                logger.warning("could not remove the leftover %s (%s)", path, exc)
                continue
            logger.info("removed %s, left by a stopped save", path)
            removed.append(path)
    return removed


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:  # removed meanwhile
        return 0


def _sibling(folder: Path, tag: str) -> Path:
    return folder.parent / f".{folder.name}{tag}{os.getpid()}-{secrets.token_hex(4)}"


def _siblings(folder: Path, tag: str) -> list[Path]:
    prefix = f".{folder.name}{tag}"
    try:
        return [p for p in folder.parent.iterdir() if p.name.startswith(prefix) and p.is_dir()]
    except FileNotFoundError:
        return []


def _owner_alive(path: Path) -> bool:
    """Whether the process that named ``path`` (``.NAME.tag-PID-TOKEN``) still runs."""
    try:
        pid = int(path.name.rsplit("-", 2)[-2])
    except (ValueError, IndexError):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def same_save(folder: Path, manifest: dict[str, Any]) -> bool:
    """Whether ``folder`` still holds the save that ``manifest`` was read from."""
    try:
        return load_json(folder / MANIFEST) == manifest
    except (OSError, RetrieverError):
        return False


def write_json(path: Path, data: object) -> None:
    """Write ``data`` as UTF-8 JSON."""
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def saved_encoders(folder: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """``(manifest file, encoder settings)`` of every dense encoder a saved retriever names,
    the components of a hybrid included: what a caller checks before loading the folder.

    Raises:
        RetrieverError: The folder (or a component's) holds no saved retriever.
    """
    folder = complete_folder(folder, MANIFEST)
    manifest = read_manifest(folder)
    found = []
    if isinstance(manifest.get("encoder"), dict):
        found.append((folder / MANIFEST, manifest["encoder"]))
    for name in manifest.get("components") or []:
        found += saved_encoders(folder / "components" / str(name))
    return found


def load_json(path: Path) -> Any:
    """The JSON value of a retriever's own file (this floor does not read kb_sources).

    Raises:
        OSError: The file cannot be read.
        RetrieverError: Larger than :data:`MAX_MANIFEST_BYTES`, not UTF-8 JSON, or nested so
            deeply that parsing it overflows the stack (``[`` x 100,000).
    """
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise RetrieverError(f"{path}: {path.stat().st_size:,} bytes, more than the "
                             f"{MAX_MANIFEST_BYTES:,} a manifest may hold; {_REBUILD}")
    try:
        return json.loads(path.read_bytes())
    except RecursionError:
        problem = "JSON arrays/objects are nested too deeply to parse"
    except ValueError as exc:  # not JSON, not UTF-8, a number too long
        problem = f"not JSON ({str(exc)[:120]})"
    raise RetrieverError(f"{path}: {problem}. Expected {_EXPECTED}. Fix: {_REBUILD}")


def read_manifest(folder: Path) -> dict[str, Any]:
    """Read ``retriever.json`` from a saved retriever folder (or from the complete previous
    version that a save killed mid-swap left, see :func:`complete_folder`).

    Raises:
        RetrieverError: The folder holds no manifest (nothing was saved there, or a save by an
            older version was cut short), or one that is not a manifest (not JSON, nested too
            deeply).
    """
    folder = Path(folder)
    path = complete_folder(folder, MANIFEST) / MANIFEST
    if not path.is_file():
        found = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        if found:
            raise RetrieverError(
                f"{folder} holds an unfinished save ({', '.join(found[:5])} but no {MANIFEST}): "
                "the process writing it stopped part-way. Rebuild the index (it replaces the "
                "folder) or delete the folder")
        raise RetrieverError(
            f"no saved retriever in {folder} (missing {MANIFEST}); save one there with "
            "retriever.save(folder) or point to the folder that holds it"
        )
    manifest = load_json(path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("format", 0), int):
        raise RetrieverError(f"{path}: not a saved retriever's manifest (expected {_EXPECTED} "
                             f"with a whole-number format); {_REBUILD}")
    if manifest.get("format", 0) > FORMAT_VERSION:
        raise RetrieverError(
            f"{folder} was saved in format {manifest['format']}, newer than this version reads "
            f"({FORMAT_VERSION}); upgrade kbcurate or rebuild the index"
        )
    return manifest
