"""The on-disk cache of the online fetchers: one plain file per key, written atomically.

``<root>/pubmed/<pmid>.xml`` holds a PubMed record, ``<root>/elink-<linkname>/<pmid>.json`` the
PMIDs one paper cites (:mod:`kb_sources.fetch`). A file appears only complete: it is written to
a temporary sibling and renamed into place.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

#: The cache folder of PubMed records (below the cache root).
PUBMED_KIND = "pubmed"


class RecordCache:
    """One plain file per key under ``root/kind``; disabled when ``root`` is None."""

    def __init__(self, root: Path | None, kind: str, suffix: str) -> None:
        self.folder = Path(root) / kind if root is not None else None
        self.suffix = suffix

    def get(self, key: str) -> Path | None:
        """The cached file of ``key``, or None."""
        if self.folder is None:
            return None
        path = self.folder / f"{key}{self.suffix}"
        return path if path.is_file() else None

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` (atomically; nothing when the cache is disabled)."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_file(self.folder / f"{key}{self.suffix}") as fh:
            fh.write(data)


def pubmed_cache(root: Path | None) -> RecordCache:
    """The cache of PubMed records under ``root`` (disabled for None)."""
    return RecordCache(root, PUBMED_KIND, ".xml")


def cached_pmids(root: Path | None, pmids: Iterable[str]) -> set[str]:
    """The PMIDs whose records are cached under ``root``."""
    cache = pubmed_cache(root)
    return {p for p in pmids if cache.get(p) is not None}


@contextmanager
def atomic_file(target: Path) -> Iterator[IO[bytes]]:
    """A temporary file next to ``target``, renamed onto it on success, removed on failure."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
