"""Opening and writing workspace files without following symbolic links.

A link planted inside the workspace (``pending_labels.jsonl`` pointing at a private file, a
dangling link pointing outside, ``cache/jobs/job-N.log`` pointing at a secret) must never make
kbcurate read, copy or overwrite the file it points at. Every function here opens the final path
component with ``O_NOFOLLOW`` and refuses a link with :class:`LinkRefusedError`; files they
create are ``0600`` (they hold labels, password hashes or logs). :func:`write_atomic` writes a
fresh, randomly named temporary file (``O_EXCL``: never an existing file or link) and renames it
over the target.
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path
from typing import IO, Any

from curation.store.errors import WorkspaceError

#: Permissions of the files this module creates: owner read/write only.
PRIVATE = 0o600

_FLAGS = {"r": os.O_RDONLY, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
          "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL}


class LinkRefusedError(WorkspaceError):
    """A workspace file is a symbolic link; kbcurate does not follow it."""


def refuse_link(path: Path) -> LinkRefusedError:
    """The error for a workspace file that is a symbolic link."""
    return LinkRefusedError(
        f"{path} is a symbolic link; kbcurate never follows links for workspace files (one "
        "could read, copy or overwrite a file elsewhere). Remove the link (rm "
        f"'{path}') and retry; if it held data, copy the real file there instead")


def open_no_follow(path: str | Path, mode: str = "r", *, perm: int = PRIVATE,
                   encoding: str | None = "utf-8", errors: str | None = None) -> IO[Any]:
    """Open ``path`` like :func:`open` (``mode`` "r", "a", "w" or "x", with "b" for bytes)
    but never through a symbolic link; a created file gets ``perm``.

    Raises:
        LinkRefusedError: ``path`` is a symbolic link (dangling or not).
        OSError: Any other error of ``open``.
    """
    path = Path(path)
    flags = _FLAGS[mode.replace("b", "")] | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, perm)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and path.is_symlink()):
            raise refuse_link(path) from None
        raise
    if "b" in mode:
        return os.fdopen(fd, mode.replace("x", "w"))
    return os.fdopen(fd, mode.replace("x", "w"), encoding=encoding, errors=errors)


def read_text_no_follow(path: str | Path, *, errors: str | None = None) -> str:
    """The text of ``path`` (UTF-8), refusing a symbolic link."""
    with open_no_follow(path, "r", errors=errors) as fh:
        return fh.read()


def write_atomic(path: str | Path, text: str, *, perm: int = PRIVATE) -> None:
    """Replace ``path`` with ``text`` all at once: a fresh temporary file beside it (a random
    name, created exclusively, ``perm``), fsynced, renamed over ``path``. A link at ``path`` is
    replaced by the file, never written through; a link at the temporary name cannot exist.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        with open_no_follow(tmp, "x", perm=perm) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
