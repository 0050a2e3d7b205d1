"""The ``watches``, ``watch_runs`` and ``watch_hits`` tables: relations watched for new abstracts.

A watch is owned by a curator (or an admin) and is either one relation (``kind = 'relation'``:
its query slots in ``spec``, its query key in ``target``) or a schema's relations filtered like
the relation table (``kind = 'filter'``: the filters in ``spec``, their canonical JSON in
``target``). ``mindate`` is the date (``YYYY-MM-DD``, UTC) its next run searches PubMed from
(Entrez date); a successful run moves it to the run's last day and sets ``last_run_at``, a failed
one leaves both, so the next run catches up.

Every run is one ``watch_runs`` row (when, who, the query, the date range, counts, the best new
abstract's score, the error of a failed run) and each PMID a run found new for one of the
watch's relations one ``watch_hits`` row (first found only: the key is watch, relation, PMID),
with its score and rank in that relation's ranking after the run. :class:`Watches`, built on a
workspace, holds the SQL; the service (:mod:`curation.pubmed.watch`) checks roles and audits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from curation.store.workspace import Workspace

_CHUNK = 500


@dataclass(frozen=True)
class Watch:
    """One watch.

    Attributes:
        id: The watch's id.
        owner: The user who watches (curator or admin).
        schema: The relation schema.
        kind: ``relation`` (one relation) or ``filter`` (the relations a filter lists).
        target: The relation's query key, or the filter's canonical JSON.
        spec: ``{"slots": {...}}`` or ``{"filters": {...}, "source": ...}``.
        label: How lists name it ("BRAF · V600E", "PO where gene=BRAF").
        pubmed_query: The Entrez query of a relation watch (built or edited when it was added);
            "" for a filter watch (each relation's query is built at each run).
        max_hits: PubMed ids taken per relation and run.
        every_days: A run is due this many days after the last successful one.
        mindate: The first Entrez date (``YYYY-MM-DD``) the next run asks for.
        created_at: When it was added (UTC, ISO 8601).
        last_run_at: When its last successful run finished (None before the first).
    """

    id: int
    owner: str
    schema: str
    kind: str
    target: str
    spec: dict[str, Any]
    label: str
    pubmed_query: str
    max_hits: int
    every_days: int
    mindate: str
    created_at: str
    last_run_at: str | None

    @classmethod
    def from_row(cls, row: Any) -> Watch:
        data = dict(row)
        data["spec"] = json.loads(data["spec"])
        return cls(**data)

    @property
    def slots(self) -> dict[str, str]:
        """Slot -> text of a relation watch ({} for a filter watch)."""
        return dict(self.spec.get("slots") or {})

    @property
    def filters(self) -> dict[str, str]:
        """Filter name -> text of a filter watch ({} for a relation watch)."""
        return dict(self.spec.get("filters") or {})


@dataclass(frozen=True)
class WatchRun:
    """One recorded run of a watch.

    Attributes:
        id: The run's id.
        watch_id: Its watch.
        started_at: When it started (UTC, ISO 8601).
        finished_at: When it ended.
        actor: Who ran it (a user name, ``cli``).
        status: ``done`` or ``failed``.
        pubmed_query: The Entrez queries sent (one line per relation).
        mindate: First Entrez date asked for (``YYYY-MM-DD``).
        maxdate: Last Entrez date asked for.
        relations: Relations searched.
        found: Records PubMed found in the date range, all relations together.
        fetched: Records fetched.
        imported: Records new to the workspace.
        new_pmids: PMIDs new to this watch.
        best_score: The best new abstract's score (None when nothing new, or none ranked).
        error: Why a failed run failed ("" when done).
    """

    id: int
    watch_id: int
    started_at: str
    finished_at: str
    actor: str
    status: str
    pubmed_query: str
    mindate: str
    maxdate: str
    relations: int
    found: int
    fetched: int
    imported: int
    new_pmids: int
    best_score: float | None
    error: str

    @classmethod
    def from_row(cls, row: Any) -> WatchRun:
        return cls(**dict(row))


@dataclass(frozen=True)
class WatchHit:
    """A PMID a run found new for one relation of a watch.

    Attributes:
        watch_id: The watch.
        query_key: The relation.
        pmid: The PMID.
        run_id: The run that found it first.
        since: That run's first Entrez date (``YYYY-MM-DD``).
        score: Its score in the relation's ranking after the run (None: not in the top).
        rank: Its rank there (None: not in the top).
    """

    watch_id: int
    query_key: str
    pmid: str
    run_id: int
    since: str
    score: float | None
    rank: int | None


@dataclass(frozen=True)
class RunCounts:
    """What a run did (the counts of a ``watch_runs`` row)."""

    pubmed_query: str
    mindate: str
    maxdate: str
    relations: int = 0
    found: int = 0
    fetched: int = 0
    imported: int = 0
    error: str = ""


class Watches:
    """The watches, watch_runs and watch_hits tables."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def add(self, *, owner: str, schema: str, kind: str, target: str, spec: Mapping[str, Any],
            label: str, pubmed_query: str, max_hits: int, every_days: int, mindate: str,
            at: str) -> int:
        """Store a new watch (joins the caller's transaction); its id."""
        with self.ws.transaction():
            cur = self.ws.conn.execute(
                "INSERT INTO watches(owner, schema, kind, target, spec, label, pubmed_query, "
                "max_hits, every_days, mindate, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?)", (owner, schema, kind, target, json.dumps(dict(spec), sort_keys=True),
                          label, pubmed_query, max_hits, every_days, mindate, at))
            return int(cur.lastrowid)

    def get(self, watch_id: int) -> Watch | None:
        """The watch with this id, or None."""
        row = self.ws.conn.execute("SELECT * FROM watches WHERE id = ?", (watch_id,)).fetchone()
        return Watch.from_row(row) if row else None

    def find(self, owner: str, schema: str, target: str) -> Watch | None:
        """The owner's watch of this relation or filter, or None."""
        row = self.ws.conn.execute(
            "SELECT * FROM watches WHERE owner = ? AND schema = ? AND target = ?",
            (owner, schema, target)).fetchone()
        return Watch.from_row(row) if row else None

    def watches(self, schema: str | None = None, owner: str | None = None) -> list[Watch]:
        """Watches by id, of a schema and owner when given."""
        sql, args = "SELECT * FROM watches WHERE 1 = 1", []
        for column, value in (("schema", schema), ("owner", owner)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        return [Watch.from_row(r) for r in self.ws.conn.execute(sql + " ORDER BY id", args)]

    def of_relation(self, schema: str, query_key: str) -> list[Watch]:
        """The relation watches of one relation (every owner), by id."""
        rows = self.ws.conn.execute(
            "SELECT * FROM watches WHERE schema = ? AND kind = 'relation' AND target = ? "
            "ORDER BY id", (schema, query_key))
        return [Watch.from_row(r) for r in rows]

    def remove(self, watch_id: int) -> bool:
        """Delete a watch with its runs and hits (joins the caller's transaction); whether it
        existed."""
        with self.ws.transaction():
            cur = self.ws.conn.execute("DELETE FROM watches WHERE id = ?", (watch_id,))
            return cur.rowcount > 0

    def record_run(self, watch_id: int, counts: RunCounts, *, actor: str, started_at: str,
                   finished_at: str, hits: Sequence[tuple[str, str, float | None, int | None]]
                   = ()) -> int | None:
        """Store one run and the PMIDs it found new (``(query_key, pmid, score, rank)``; a PMID
        the watch found before for that relation is kept with its first run). A run without
        an error moves the watch's ``mindate`` to the run's ``maxdate`` and sets its
        ``last_run_at``; a failed one changes neither. One transaction (joins the caller's).

        Returns:
            The run's id; None, with nothing stored, when the watch was removed meanwhile
            (checked in the same write transaction, so a removal either comes before and
            nothing is stored, or after and takes the run with it).
        """
        scores = [h[2] for h in hits if h[2] is not None]
        with self.ws.transaction():
            if self.ws.conn.execute("SELECT 1 FROM watches WHERE id = ?",
                                    (watch_id,)).fetchone() is None:
                return None
            cur = self.ws.conn.execute(
                "INSERT INTO watch_runs(watch_id, started_at, finished_at, actor, status, "
                "pubmed_query, mindate, maxdate, relations, found, fetched, imported, new_pmids, "
                "best_score, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (watch_id, started_at, finished_at, actor, "failed" if counts.error else "done",
                 counts.pubmed_query, counts.mindate, counts.maxdate, counts.relations,
                 counts.found, counts.fetched, counts.imported, len(hits),
                 max(scores) if scores else None, counts.error))
            run_id = int(cur.lastrowid)
            self.ws.conn.executemany(
                "INSERT OR IGNORE INTO watch_hits(watch_id, query_key, pmid, run_id, score, "
                "hit_rank) VALUES (?, ?, ?, ?, ?, ?)",
                [(watch_id, key, pmid, run_id, score, rank) for key, pmid, score, rank in hits])
            if not counts.error:
                self.ws.conn.execute(
                    "UPDATE watches SET mindate = ?, last_run_at = ? WHERE id = ?",
                    (counts.maxdate, finished_at, watch_id))
        return run_id

    def runs(self, watch_id: int, limit: int = 20) -> list[WatchRun]:
        """The watch's runs, newest first."""
        rows = self.ws.conn.execute(
            "SELECT * FROM watch_runs WHERE watch_id = ? ORDER BY id DESC LIMIT ?",
            (watch_id, limit))
        return [WatchRun.from_row(r) for r in rows]

    def last_runs(self, watch_ids: Iterable[int]) -> dict[int, WatchRun]:
        """watch id -> its newest run, for the watches that ran."""
        ids = list(dict.fromkeys(watch_ids))
        out: dict[int, WatchRun] = {}
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i:i + _CHUNK]
            rows = self.ws.conn.execute(
                "SELECT * FROM watch_runs WHERE id IN (SELECT MAX(id) FROM watch_runs WHERE "
                f"watch_id IN ({','.join('?' * len(chunk))}) GROUP BY watch_id) ORDER BY id",
                chunk)
            out.update((r["watch_id"], WatchRun.from_row(r)) for r in rows)
        return out

    def known(self, watch_id: int) -> set[tuple[str, str]]:
        """``(query_key, pmid)`` of every PMID the watch found new before."""
        return {(r[0], r[1]) for r in self.ws.conn.execute(
            "SELECT query_key, pmid FROM watch_hits WHERE watch_id = ?", (watch_id,))}

    def hits(self, *, watch_id: int | None = None, schema: str | None = None,
             query_key: str | None = None) -> list[WatchHit]:
        """The PMIDs runs found new, of one watch, schema and relation when given; ordered by
        watch, relation, best score first (unscored last), then PMID."""
        sql = ("SELECT h.watch_id, h.query_key, h.pmid, h.run_id, r.mindate, h.score, h.hit_rank "
               "FROM watch_hits h JOIN watch_runs r ON r.id = h.run_id JOIN watches w "
               "ON w.id = h.watch_id WHERE 1 = 1")
        args: list[Any] = []
        for column, value in (("h.watch_id", watch_id), ("w.schema", schema),
                              ("h.query_key", query_key)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        sql += (" ORDER BY h.watch_id, h.query_key, CASE WHEN h.score IS NULL THEN 1 ELSE 0 END,"
                " h.score DESC, h.pmid")
        return [WatchHit(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5],
                         None if r[6] is None else int(r[6]))
                for r in self.ws.conn.execute(sql, args)]
