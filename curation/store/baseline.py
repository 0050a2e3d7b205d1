"""Importing NLM's PubMed baseline and update files: resumable, file by file, memory flat.

``kbcurate import docs pubmed-baseline DIR`` calls :func:`import_baseline`, which applies the
files of ``DIR`` (:func:`kb_sources.pubmed_baseline.baseline_files`: NLM's name order, baseline
then update files) one after the other:

* **One import per file**, through the import ledger (:mod:`curation.store.import_log`): its
  citations are written in short batches, and its deletions, the ``done`` mark of its
  ``baseline_files`` row and the import's own ``done`` mark commit in one last transaction. A
  killed import (kill -9, a full disk, malformed XML) is rolled back completely, and the next run
  resumes at the first file not ``done``, redoing that file from its start.
* **Newer replaces older**: a citation updates the document of its PMID by the import rules of
  :mod:`curation.store.import_rows` (same source: the new version's fields replace the old ones;
  a field the new version leaves empty is kept; a document another source imported first keeps
  its text and only gains what it lacked). Files apply in order, so the latest version wins; of
  NLM's rare versioned citations the highest ``<PMID Version>`` wins whatever the order.
* **Deletions** (``<DeleteCitation>``) remove the document and its annotations (audited), except
  a document that curators labelled, adjudicated or suggested: it stays, and its PMID is flagged
  in ``baseline_deletions`` (``kept = 1``; the report lists it). A label is never lost.
* **Order is checked**: a file that sorts before one already done is refused (applying it now
  would put an old version over a newer one); a ``NAME.md5`` beside a file is checked first.
* **Memory stays flat**: the reader streams (records cleared once used) and batches are bounded,
  so memory does not grow with the number of files (``benchmarks/baseline_import.py``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from curation.store.baseline_files import BaselineFiles, Deleted
from curation.store.import_log import BatchSizer, ImportRun, importing
from curation.store.import_rows import import_documents
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.pubmed_baseline import (
    SOURCE,
    Citation,
    Deletion,
    baseline_files,
    check_md5,
    natural_key,
    read_baseline_file,
)
from kb_sources.types import Document

__all__ = ["BaselineReport", "FileReport", "import_baseline"]

logger = logging.getLogger(__name__)

READER = "docs:pubmed-baseline"


@dataclass(frozen=True)
class FileReport:
    """What one file did (``skipped``: done in an earlier run)."""

    name: str
    skipped: bool = False
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    older: int = 0  #: citations left out: a higher version of the PMID is already in
    deleted: int = 0
    kept: tuple[str, ...] = ()  #: deleted by NLM, kept because labelled
    md5_checked: bool = False
    seconds: float = 0.0

    @property
    def records(self) -> int:
        return self.added + self.updated + self.unchanged + self.older


@dataclass(frozen=True)
class BaselineReport:
    """What one :func:`import_baseline` run did, file by file."""

    folder: str
    files: tuple[FileReport, ...] = field(default_factory=tuple)

    def total(self, name: str) -> int:
        """Sum of one count (``added``, ``deleted``, ...) over the files imported now."""
        return sum(getattr(f, name) for f in self.files if not f.skipped)

    @property
    def kept(self) -> tuple[str, ...]:
        return tuple(p for f in self.files for p in f.kept)

    def summary(self) -> str:
        done = [f for f in self.files if not f.skipped]
        seconds = sum(f.seconds for f in done)
        records = self.total("records")
        rate = f", {records / seconds:,.0f} records/s" if seconds > 0 else ""
        return (f"{self.folder}: {len(done)} file(s) imported, {len(self.files) - len(done)} "
                f"already done; documents +{self.total('added')} ~{self.total('updated')} "
                f"={self.total('unchanged')}, {self.total('older')} older versions left out, "
                f"{self.total('deleted')} deleted, {len(self.kept)} deleted by NLM but kept "
                f"because labelled{rate}")


def import_baseline(ws: Workspace, folder: str | Path, *, actor: str = "cli",
                    source: str = SOURCE, progress: bool = True,
                    batch_size: int | None = None) -> BaselineReport:
    """Import every baseline and update file of ``folder`` not imported yet, in NLM's order.

    Args:
        folder: NLM's files (here or in ``baseline/`` and ``updatefiles/``).
        source: Source label of the documents.
        progress: Progress bars (overall and per file).
        batch_size: Records per transaction; None adapts it to ~0.25 s per transaction.

    Returns:
        The report, one entry per file found.

    Raises:
        InputFormatError: A file is malformed or fails its MD5 check (that file is rolled back;
            the files before it stay imported).
        CurationError: A file sorts before one already imported.
        WorkspaceBusyError: Another import is running.
    """
    files = baseline_files(folder)
    ledger = BaselineFiles(ws)
    done = {r.name: r for r in ledger.rows() if r.status == "done"}
    _check_order(files, done)
    versions = ledger.versions()
    reports = []
    overall = tqdm(files, desc="pubmed baseline", unit=" files", disable=not progress,
                   position=0)
    try:
        for path in overall:
            if path.name in done:
                _warn_if_changed(path, done[path.name].size)
                reports.append(FileReport(path.name, skipped=True))
                continue
            reports.append(_import_file(ws, path, versions, actor=actor, source=source,
                                        progress=progress, batch_size=batch_size))
    finally:
        overall.close()
    report = BaselineReport(str(folder), tuple(reports))
    logger.info("%s", report.summary())
    return report


def _check_order(files: list[Path], done: dict[str, object]) -> None:
    if not done:
        return
    last = max(done, key=natural_key)
    early = [p.name for p in files if p.name not in done and natural_key(p.name)
             < natural_key(last)]
    if early:
        raise CurationError(
            f"{early[0]} comes before {last}, which is already imported: applying it now would "
            "put older versions of citations over newer ones. Import the files in NLM's order "
            "into a new workspace, or move this file out of the folder")


def _warn_if_changed(path: Path, size: int) -> None:
    if path.stat().st_size != size:
        logger.warning("%s changed since it was imported (%d bytes, then %d); it is not "
                       "imported again", path, path.stat().st_size, size)


@dataclass
class _FileState:
    """What one file's import collects besides the documents it writes."""

    versions: dict[str, int]  # every PMID's highest version above 1 (earlier files + this one)
    new_versions: dict[str, int] = field(default_factory=dict)
    deletions: dict[str, None] = field(default_factory=dict)  # in file order
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("added", "updated", "unchanged", "held", "older"), 0))  # held: labelled, text kept


def _import_file(ws: Workspace, path: Path, versions: dict[str, int], *, actor: str,
                 source: str, progress: bool, batch_size: int | None) -> FileReport:
    start = time.perf_counter()
    ledger = BaselineFiles(ws)
    md5 = check_md5(path)
    state = _FileState(versions)
    sizer = BatchSizer(size=batch_size, fixed=True) if batch_size else BatchSizer()
    items = tqdm(read_baseline_file(path, source=source), desc=path.name, unit=" records",
                 disable=not progress, mininterval=0.5, leave=False, position=1)
    try:
        with importing(ws, actor=actor, kind="docs", reader=READER, path=str(path)) as run:
            ledger.start(path.name, path.stat().st_size, md5, run.id)
            for batch in _batches(items, state, sizer):
                with run.batch(sizer, len(batch)):
                    for key, value in import_documents(run, batch, actor).items():
                        state.counts[key.removeprefix("documents_")] += value
            deleted = _finish(ws, run, path, state, actor)
    except BaseException as exc:
        try:
            ledger.fail(path.name, f"{type(exc).__name__}: {exc}")
        except Exception:  # the original error is the one to report (a full disk, ...)
            logger.warning("%s: could not record the failure in baseline_files", path.name,
                           exc_info=True)
        raise
    finally:
        items.close()
    versions.update(state.new_versions)
    c = state.counts
    report = FileReport(path.name, added=c["added"], updated=c["updated"],
                        unchanged=c["unchanged"], older=c["older"], deleted=deleted.deleted,
                        kept=deleted.kept, md5_checked=md5, seconds=time.perf_counter() - start)
    logger.info("%s: %d records in %.1f s, %d deleted, %d kept", path.name, report.records,
                report.seconds, report.deleted, len(report.kept))
    if c["held"]:
        logger.warning("%s: %d labelled document(s) kept the text their labels were given on "
                       "(the new text is in the audit log, action 'held')", path.name, c["held"])
    return report


def _batches(items: Iterator[Citation | Deletion], state: _FileState,
             sizer: BatchSizer) -> Iterator[list[Document]]:
    """Lists of ``sizer.size`` documents; deletions and versions are noted in ``state``."""
    batch: list[Document] = []
    for item in items:
        if isinstance(item, Deletion):
            if item.version >= state.versions.get(item.pmid, 1):  # not an older version only
                state.deletions[item.pmid] = None
            continue
        pmid = item.document.doc_id
        if item.version < state.versions.get(pmid, 1):
            state.counts["older"] += 1
            continue
        if item.version > 1:
            state.versions[pmid] = state.new_versions[pmid] = item.version
        state.deletions.pop(pmid, None)  # a citation after its deletion brings it back
        batch.append(item.document)
        if len(batch) >= sizer.size:
            yield batch
            batch = []
    if batch:
        yield batch


def _finish(ws: Workspace, run: ImportRun, path: Path, state: _FileState,
            actor: str) -> Deleted:
    """The file's last transaction: deletions, versions, the ledger and the import marked done."""
    ledger = BaselineFiles(ws)
    digest = _sha256(path)
    with ws.transaction():
        deleted = ledger.delete_documents(state.deletions, path.name, actor)
        ledger.record_versions(state.new_versions, path.name)
        c = state.counts
        ledger.finish(path.name, {**c, "deleted": deleted.deleted, "kept": len(deleted.kept)},
                      digest)
        run.finish(added=c["added"], updated=c["updated"] + deleted.deleted,
                   unchanged=c["unchanged"], sha256=digest)
    return deleted


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
