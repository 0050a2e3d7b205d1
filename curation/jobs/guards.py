"""Guards shared by the job queue and the worker: waiting out a busy workspace, checking a job's
parameters against its kind's whitelist, keeping paths inside the workspace, and telling whether
a worker process still runs.

- :func:`retry_busy` repeats a workspace write that failed because another process held the
  write lock past the connection's lock wait (30 s): up to :data:`LOCK_RETRIES` attempts with
  doubling pauses (1 s, 2 s, ... at most 15 s), each one logged, then the busy error with the
  count. A worker claiming its job waits this way instead of dying with the job still queued.
- :func:`check_params` refuses parameter names a job kind does not declare, listing the allowed
  ones; :func:`workspace_path` is what a kind's validator calls for any path it accepts.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from curation.store.errors import WorkspaceBusyError
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Attempts of a write that finds the workspace busy (each waits the connection's lock wait).
LOCK_RETRIES = 8
#: First pause between attempts (doubled each time, at most :data:`MAX_PAUSE_S`).
FIRST_PAUSE_S = 1.0
MAX_PAUSE_S = 15.0


def retry_busy(action: Callable[[], T], what: str, *, attempts: int = LOCK_RETRIES,
               sleep: Callable[[float], None] | None = None) -> T:
    """Run ``action``; while it fails with :class:`WorkspaceBusyError`, pause and try again.

    Args:
        action: The write (it should be one transaction, safe to repeat).
        what: What is being written, for the log ("job 3: mark running").
        attempts: At most this many tries.
        sleep: The pause function (``time.sleep``; tests pass their own).

    Returns:
        What ``action`` returned.

    Raises:
        WorkspaceBusyError: Still busy after ``attempts`` tries; the message gives the count.
    """
    pause = FIRST_PAUSE_S
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except WorkspaceBusyError as exc:
            if attempt == attempts:
                raise WorkspaceBusyError(
                    f"{what}: gave up after {attempts} attempts, the workspace stayed busy "
                    f"({exc})") from exc
            logger.warning("%s: workspace busy (attempt %d of %d); retrying in %.0f s",
                           what, attempt, attempts, pause)
            (sleep or time.sleep)(pause)
            pause = min(pause * 2, MAX_PAUSE_S)
    raise AssertionError("unreachable")  # pragma: no cover


def check_params(kind: str, params: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Refuse parameter names that job kind ``kind`` does not declare.

    Raises:
        CurationError: Unknown names; the message lists them and the allowed ones.
    """
    allowed = tuple(allowed)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise CurationError(
            f"Job kind {kind!r} got unknown parameter(s) {', '.join(unknown)}. Available "
            f"options: {', '.join(allowed) or '(none)'}; leave the others out")


def workspace_path(ws: Workspace, value: object, option: str, *, must_exist: bool = False
                   ) -> Path:
    """``value`` as a resolved path inside the workspace folder (links and ``..`` followed).

    Args:
        ws: The workspace.
        value: The path given; it must be absolute, as the worker's current folder is not the
            submitter's (a relative one is refused with its absolute form as the fix).
        option: Its parameter name, for the message.
        must_exist: Also require that it exists.

    Raises:
        CurationError: Not an absolute path, resolves outside the workspace, or missing when
            required.
    """
    root = ws.root.resolve()
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        raise CurationError(f"Job option {option} is {value!r}; expected an absolute path "
                            f"inside the workspace {root}")
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise CurationError(f"Job option {option}={str(value)!r} is a relative path; give it "
                            f"as an absolute path inside the workspace, e.g. {root / path}")
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise CurationError(
            f"Job option {option}={str(value)!r} resolves to {resolved}, outside the workspace "
            f"{root}; background jobs only use paths inside it (e.g. {root / 'cache'})")
    if must_exist and not resolved.exists():
        raise CurationError(f"Job option {option}={str(value)!r}: {resolved} does not exist; "
                            f"copy it into the workspace {root} first")
    return resolved


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie counts as dead): the store's check, shared."""
    from curation.store.import_log import pid_alive

    return pid_alive(pid)
