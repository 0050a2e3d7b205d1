"""The PubMed baseline ledger: ``baseline_files``, ``baseline_deletions``, ``baseline_versions``.

:class:`BaselineFiles`, built on a workspace (``BaselineFiles(ws)``), holds the SQL of the
baseline import (:func:`curation.store.baseline.import_baseline`):

* ``baseline_files``: one row per NLM file, ``running`` while its import runs, ``done`` (with its
  counts) in the same transaction that finishes the import, ``failed`` with the error;
* ``baseline_deletions``: every PMID a ``<DeleteCitation>`` named, with ``kept = 1`` where the
  document stays in the workspace because curators labelled it (labels, adjudications or source
  suggestions refer to it): a label is never lost;
* ``baseline_versions``: the highest ``<PMID Version>`` of NLM's rare versioned citations (only
  versions above 1 are stored), so an older version never replaces a newer one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from curation.store.clock import utcnow
from curation.store.workspace import Workspace
from kb_sources.pubmed_baseline import natural_key

_CHUNK = 500  # PMIDs per IN (...) list


@dataclass(frozen=True)
class BaselineFileRow:
    """One NLM file in the ledger (times as ISO strings)."""

    name: str
    size: int
    sha256: str
    md5_checked: bool
    status: str
    import_id: int | None
    started_at: str
    finished_at: str | None
    added: int
    updated: int
    unchanged: int
    deleted: int
    kept: int
    error: str

    @classmethod
    def from_row(cls, row: Any) -> BaselineFileRow:
        return cls(**{**dict(row), "md5_checked": bool(row["md5_checked"])})


@dataclass(frozen=True)
class Deleted:
    """What applying a file's deletions did."""

    deleted: int  #: documents removed from the workspace
    kept: tuple[str, ...]  #: PMIDs NLM deleted that stay because curators labelled them


class BaselineFiles:
    """The baseline ledger tables (see the module docstring)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    # -- reads ----------------------------------------------------------------------------
    def rows(self) -> list[BaselineFileRow]:
        """Every file of the ledger, in NLM's order."""
        rows = [BaselineFileRow.from_row(r) for r in self.ws.conn.execute(
            "SELECT * FROM baseline_files")]
        return sorted(rows, key=lambda r: natural_key(r.name))

    def versions(self) -> dict[str, int]:
        """PMID -> highest version imported, for the citations whose version is above 1."""
        return {r["pmid"]: int(r["version"]) for r in self.ws.conn.execute(
            "SELECT pmid, version FROM baseline_versions")}

    def deletions(self, *, kept_only: bool = False) -> list[tuple[str, str, bool]]:
        """``(pmid, file, kept)`` of the PMIDs NLM deleted, by PMID; ``kept_only`` gives the
        labelled documents that stayed."""
        sql = "SELECT pmid, file, kept FROM baseline_deletions"
        if kept_only:
            sql += " WHERE kept = 1"
        rows = self.ws.conn.execute(sql + " ORDER BY pmid").fetchall()
        return [(r["pmid"], r["file"], bool(r["kept"])) for r in rows]

    # -- writes ---------------------------------------------------------------------------
    def start(self, name: str, size: int, md5_checked: bool, import_id: int) -> None:
        """Record that the import of ``name`` began (its own short transaction)."""
        with self.ws.transaction() as conn:
            conn.execute("DELETE FROM baseline_files WHERE name = ?", (name,))
            conn.execute(
                "INSERT INTO baseline_files(name, size, md5_checked, status, import_id, "
                "started_at) VALUES (?, ?, ?, 'running', ?, ?)",
                (name, size, int(md5_checked), import_id, utcnow()))

    def fail(self, name: str, error: str) -> None:
        """Mark the import of ``name`` failed with its error (after it was rolled back)."""
        with self.ws.transaction() as conn:
            conn.execute("UPDATE baseline_files SET status = 'failed', finished_at = ?, "
                         "error = ? WHERE name = ?", (utcnow(), error[:2000], name))

    def finish(self, name: str, counts: Mapping[str, int], sha256: str) -> None:
        """Mark ``name`` done with its counts (inside the transaction that finishes its import).

        Args:
            counts: ``added``, ``updated``, ``unchanged``, ``deleted``, ``kept``.
        """
        self.ws.conn.execute(
            "UPDATE baseline_files SET status = 'done', finished_at = ?, sha256 = ?, added = ?, "
            "updated = ?, unchanged = ?, deleted = ?, kept = ?, error = '' WHERE name = ?",
            (utcnow(), sha256, *(int(counts[k]) for k in ("added", "updated", "unchanged",
                                                           "deleted", "kept")), name))

    def record_versions(self, versions: Mapping[str, int], name: str) -> None:
        """Store the versions above 1 that ``name`` brought (inside the caller's transaction)."""
        rows = [(pmid, v, name) for pmid, v in versions.items() if v > 1]
        for chunk in _chunks([r[0] for r in rows]):
            self.ws.conn.execute(
                f"DELETE FROM baseline_versions WHERE pmid IN ({_marks(chunk)})", chunk)
        self.ws.conn.executemany(
            "INSERT INTO baseline_versions(pmid, version, file) VALUES (?, ?, ?)", rows)

    def delete_documents(self, pmids: Iterable[str], name: str, actor: str) -> Deleted:
        """Apply NLM's deletions (inside the caller's transaction): remove each document and its
        annotations, audited, unless curators labelled it; record every PMID.

        Args:
            pmids: PMIDs of the file's ``<DeleteCitation>`` blocks.
            name: The file, recorded with each deletion.
            actor: Who the audit log names.
        """
        deleted, kept = 0, []
        for chunk in _chunks(list(dict.fromkeys(pmids))):
            curated = self._curated(chunk)
            present = {r["doc_id"]: r for r in self.ws.conn.execute(
                f"SELECT doc_id, title, source FROM documents WHERE doc_id IN ({_marks(chunk)})",
                chunk)}
            gone = [p for p in chunk if p in present and p not in curated]
            kept += [p for p in chunk if p in present and p in curated]
            for part in _chunks(gone):
                for table in ("annotations", "documents"):
                    self.ws.conn.execute(
                        f"DELETE FROM {table} WHERE doc_id IN ({_marks(part)})", part)
            for pmid in gone:
                self.ws.audit(actor, "delete", "document", pmid,
                              before={"title": present[pmid]["title"],
                                      "source": present[pmid]["source"]},
                              after={"reason": f"DeleteCitation in {name}"})
            deleted += len(gone)
            self.ws.conn.execute(
                f"DELETE FROM baseline_deletions WHERE pmid IN ({_marks(chunk)})", chunk)
            now = utcnow()
            self.ws.conn.executemany(
                "INSERT INTO baseline_deletions(pmid, file, kept, ts) VALUES (?, ?, ?, ?)",
                [(p, name, int(p in present and p in curated), now) for p in chunk])
        return Deleted(deleted, tuple(kept))

    def _curated(self, pmids: list[str]) -> set[str]:
        marks = _marks(pmids)
        rows = self.ws.conn.execute(
            f"SELECT doc_id FROM labels WHERE doc_id IN ({marks}) "
            f"UNION SELECT doc_id FROM adjudications WHERE doc_id IN ({marks}) "
            f"UNION SELECT pmid FROM source_suggestions WHERE pmid IN ({marks})",
            [*pmids, *pmids, *pmids])
        return {r[0] for r in rows}


def _chunks(items: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


def _marks(items: list[str]) -> str:
    return ",".join("?" * len(items))
