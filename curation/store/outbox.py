"""A durable outbox: records the database could not take yet, one JSON line each.

An append is flushed and fsynced before it returns, so a record the caller reported as "pending"
survives a crash or a kill. Every change happens under an exclusive lock on a sidecar lock file,
so app sessions (threads) and processes never lose each other's records. A line that cannot be
parsed (a write torn by a crash, never acknowledged) is moved to ``<name>.unreadable`` rather
than dropped. The outbox and its sidecars are never opened through a symbolic link
(:mod:`curation.store.safe_files`) and are created ``0600``: they hold curators' labels.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from curation.store.safe_files import LinkRefusedError, open_no_follow, read_text_no_follow
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)


class Outbox:
    """A JSONL outbox file (see module docstring).

    Args:
        path: The outbox file; ``path.lock`` and ``path.unreadable`` live next to it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.unreadable_path = path.with_name(path.name + ".unreadable")

    def exists(self) -> bool:
        """Whether records wait (a link counts, so that reading it is refused, not skipped)."""
        return self.path.is_symlink() or (self.path.is_file() and self.path.stat().st_size > 0)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the outbox's exclusive lock (blocks while another writer holds it).

        Raises:
            CurationError: The lock file cannot be created or opened.
        """
        try:
            fh = open_no_follow(self.lock_path, "ab")
        except LinkRefusedError:
            raise
        except OSError as exc:
            raise CurationError(
                f"Cannot open the outbox lock {self.lock_path} ({exc.strerror}); make the "
                "workspace folder writable or free space on its disk") from exc
        with fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def append(self, record: dict[str, Any]) -> None:
        """Add one record durably (call while :meth:`locked`)."""
        created = not self.path.exists()
        line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        with open_no_follow(self.path, "a") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        if created:
            _fsync_dir(self.path.parent)

    def read(self) -> list[dict[str, Any]]:
        """All records, oldest first (call while :meth:`locked`); torn lines are moved aside."""
        if not self.path.is_file() and not self.path.is_symlink():
            return []
        records, bad = [], []
        for line in read_text_no_follow(self.path, errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                bad.append(line)
        if bad:
            self.set_aside(bad)
            self.replace(records)
        return records

    def set_aside(self, lines: list[str]) -> None:
        """Move lines the caller cannot use to ``<name>.unreadable`` (kept for a person)."""
        logger.warning("%s: %d unreadable line(s) moved to %s", self.path, len(lines),
                       self.unreadable_path)
        with open_no_follow(self.unreadable_path, "a") as fh:
            fh.write("".join(line + "\n" for line in lines))
            fh.flush()
            os.fsync(fh.fileno())

    def replace(self, records: list[dict[str, Any]]) -> None:
        """Atomically make ``records`` the outbox's content (call while :meth:`locked`)."""
        if not records:
            self.path.unlink(missing_ok=True)
            _fsync_dir(self.path.parent)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.unlink(missing_ok=True)  # a link left there is removed, never written through
        with open_no_follow(tmp, "x") as fh:
            for record in records:
                fh.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a file's creation, rename or removal in ``folder`` durable."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
