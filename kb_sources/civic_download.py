"""The CIViC nightly evidence export, downloaded with retries and written atomically.

The network side of CIViC (the reader, :mod:`kb_sources.civic`, only reads local files).
:mod:`kb_sources.fetch` re-exports :func:`download_civic_nightly` and :data:`CIVIC_NIGHTLY_URL`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from urllib.request import urlopen

from kb_sources.eutils import FetchError
from kb_sources.eutils_http import with_retries
from kb_sources.fetch_cache import atomic_file

logger = logging.getLogger(__name__)

#: CIViC nightly evidence export.
CIVIC_NIGHTLY_URL = "https://civicdb.org/downloads/nightly/nightly-ClinicalEvidenceSummaries.tsv"


def download_civic_nightly(
    dest: str | Path, url: str = CIVIC_NIGHTLY_URL, *, timeout: float = 60.0,
    max_retries: int = 3, backoff: float = 1.0, sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Download the CIViC nightly ClinicalEvidenceSummaries TSV to ``dest`` atomically.

    The file is written to a temporary file next to ``dest`` and renamed into place only when
    complete and tab-separated, so a failed download never leaves a partial ``dest``.

    Raises:
        FetchError: The download failed after retries or the content is not a TSV.
    """
    target = Path(dest)
    target.parent.mkdir(parents=True, exist_ok=True)

    def attempt() -> None:
        with atomic_file(target) as fh, urlopen(url, timeout=timeout) as response:
            first = response.readline()
            if b"\t" not in first or first.lstrip().startswith(b"<"):
                raise FetchError(f"{url} did not return a TSV (first line {first[:80]!r}). "
                                 "Fix: check the URL")
            fh.write(first)
            while chunk := response.read(1 << 20):
                fh.write(chunk)

    with_retries(attempt, what=url, max_retries=max_retries, backoff=backoff, sleep=sleep)
    logger.info("downloaded %s to %s (%d bytes)", url, target, target.stat().st_size)
    return target
