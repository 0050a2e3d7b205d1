"""One run of a watch: what appeared in PubMed since its last successful run, fetched, imported
and ranked.

For each relation the watch searches (:func:`curation.pubmed.watch.watch_targets`), esearch
its query with ``mindate`` = the watch's ``mindate`` (the day of its last successful run, or
the since date of a new watch), ``maxdate`` = today, ``datetype=edat``; fetch and import what the
workspace lacks (:func:`curation.pubmed.search.find_and_import`, the machinery of "Search
PubMed": cache, throttle, one transaction per relation, the search recorded in
``pubmed_searches``). The PMIDs the watch had not found before for that relation are its new
abstracts; once every relation is searched the indexes are refreshed once and each relation with
new abstracts is ranked by the schema's default ranking, which gives each new abstract its
score and rank (:data:`RANK_DEPTH` deep).

The run is recorded (:meth:`curation.store.watches.Watches.record_run`: when, who, the
queries, the date range, counts, the best new score) and audited. A watch removed while it runs
(``kbcurate watch remove`` beside a cron run) ends cleanly: its outcome says "removed during its
run; its results were not recorded" (what it imported stays imported), and :func:`run_watches`
goes on with the other watches; the failure of one watch, even a bug, never stops the others.

A run that fails (PubMed unreachable or answering errors, the workspace busy) is recorded with
its error on one line and does not move the watch's ``mindate``: the next run asks again from
the same day and so catches up; what the failed run had imported stays imported and is not
fetched again. Relations searched on the same day overlap by that day, and a PMID already found
is never new twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from curation.jobs.guards import retry_busy
from curation.jobs.queue import Job, job_state_note, list_jobs
from curation.matching.matcher import EntityMatcher
from curation.pubmed.ranking import rank_relation, refresh_indexes
from curation.pubmed.search import SearchProgress, SearchTracker, find_and_import
from curation.pubmed.watch import Target, get_watch, is_due, parse_day, utc_today, watch_targets
from curation.store.clock import utcnow
from curation.store.watches import RunCounts, Watch, Watches
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.fetch import EntrezSettings, Throttle
from kb_sources.schema import Schema, get_schema

logger = logging.getLogger(__name__)

#: The job kind that runs one watch in the background.
WATCH_JOB_KIND = "watch"
#: How deep each relation is ranked to score its new abstracts.
RANK_DEPTH = 500

#: ``progress(fraction, message)`` of one watch's run.
WatchReport = Callable[[float, str], None]
#: ``(query_key, pmid, score, rank)`` of a new abstract.
NewHit = tuple[str, str, float | None, int | None]


@dataclass(frozen=True)
class WatchOutcome:
    """What one run of a watch did.

    Attributes:
        watch: The watch (as before the run).
        run_id: The run's row in ``watch_runs``.
        mindate: The first Entrez date asked for (``YYYY-MM-DD``).
        maxdate: The last.
        relations: Relations searched.
        found: Records PubMed found in the date range.
        fetched: Records fetched.
        imported: Records new to the workspace.
        new: The abstracts new to the watch, best score first.
        error: Why the run failed ("" when it did not).
        removed: The watch was removed during the run: nothing was recorded (``run_id`` 0, no
            new abstracts; what it imported stays imported).
    """

    watch: Watch
    run_id: int
    mindate: str
    maxdate: str
    relations: int
    found: int
    fetched: int
    imported: int
    new: tuple[NewHit, ...]
    error: str = ""
    removed: bool = False

    @property
    def ok(self) -> bool:
        return not self.error

    def message(self) -> str:
        """One line: "watch 3 (BRAF · V600E), 2026-01-01 to 2026-02-01: found 4, imported 3,
        4 new (best score 12.3)" or "... failed: WHY"."""
        head = f"watch {self.watch.id} ({self.watch.label}), {self.mindate} to {self.maxdate}"
        if self.error:
            return f"{head}: failed: {self.error}"
        if self.removed:
            return f"{head}: removed during its run; its results were not recorded"
        scores = [h[2] for h in self.new if h[2] is not None]
        best = f" (best score {max(scores):.4g})" if scores else ""
        return (f"{head}: {self.relations} relation{'s' if self.relations != 1 else ''}, found "
                f"{self.found:,}, fetched {self.fetched:,}, imported {self.imported:,}, "
                f"{len(self.new):,} new{best}")

    def to_json(self) -> dict[str, Any]:
        """The run for ``--json`` and a job's result."""
        return {"watch_id": self.watch.id, "run_id": self.run_id, "ok": self.ok,
                "mindate": self.mindate, "maxdate": self.maxdate,
                "relations": self.relations, "found": self.found, "fetched": self.fetched,
                "imported": self.imported,
                "new": [{"query_key": k, "pmid": p, "score": None if s is None else round(s, 6),
                         "rank": r} for k, p, s, r in self.new],
                "error": self.error, "removed": self.removed}


@dataclass
class _Tally:
    """The counts of a run so far (kept when it fails half-way)."""

    queries: list[str] = field(default_factory=list)
    relations: int = 0
    found: int = 0
    fetched: int = 0
    imported: int = 0


def one_line(exc: BaseException) -> str:
    """An error as one line of at most 500 characters."""
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def run_watch(ws: Workspace, watch: Watch, *, settings: EntrezSettings, actor: str,
              today: date | None = None, progress: WatchReport | None = None,
              throttle: Throttle | None = None) -> WatchOutcome:
    """Run one watch (module docstring); the outcome, recorded and audited.

    A :class:`CurationError` (PubMed unreachable, an E-utilities error, the workspace busy, a
    relation gone) makes a failed run, returned with its error; any other exception is
    recorded the same way and raised. A watch removed during the run gives an outcome with
    ``removed`` set and nothing recorded.
    """
    maxdate = (today or utc_today()).isoformat()
    mindate = min(watch.mindate, maxdate)
    started, tally = utcnow(), _Tally()
    report = progress or (lambda fraction, message: None)
    try:
        new = _search_and_rank(ws, watch, (mindate, maxdate), tally, report,
                               settings=settings, actor=actor,
                               throttle=throttle or Throttle.for_settings(settings))
        error = ""
    except Exception as exc:
        new, error = [], one_line(exc)
        logger.warning("watch %d (%s) failed: %s", watch.id, watch.label, error)
        if not isinstance(exc, CurationError):
            _record(ws, watch, tally, (mindate, maxdate), [], error, actor, started)
            raise
    run_id = _record(ws, watch, tally, (mindate, maxdate), new, error, actor, started)
    if run_id is None:
        logger.warning("watch %d was removed during its run; its results were not recorded",
                       watch.id)
        new = []
    ranked = sorted(new, key=lambda h: (h[2] is None, -(h[2] or 0.0), h[0], h[1]))
    return WatchOutcome(watch, run_id or 0, mindate, maxdate, tally.relations, tally.found,
                        tally.fetched, tally.imported, tuple(ranked), error,
                        removed=run_id is None)


def _search_and_rank(ws: Workspace, watch: Watch, window: tuple[str, str], tally: _Tally,
                     report: WatchReport, *, settings: EntrezSettings, actor: str,
                     throttle: Throttle) -> list[NewHit]:
    targets = watch_targets(ws, watch)
    schema = get_schema(watch.schema, ws.schemas())
    tally.relations, tally.queries = len(targets), [t.term for t in targets]
    known = Watches(ws).known(watch.id)
    dates = tuple(d.replace("-", "/") for d in window)
    fresh: list[tuple[Target, list[str]]] = []
    for i, target in enumerate(targets):
        def show(p: SearchProgress, i: int = i, label: str = target.label) -> None:
            report(0.8 * (i + p.fraction) / len(targets), f"{label}: {p.message()}")

        tracker = SearchTracker(show)
        try:
            done = find_and_import(ws, schema.name, target.partial.query_key, target.term,
                                   settings=settings, actor=actor, max_hits=watch.max_hits,
                                   tracker=tracker, throttle=throttle, mindate=dates[0],
                                   maxdate=dates[1])
        finally:  # a failed run keeps the counts it reached
            tally.found += tracker.state.count
            tally.fetched += tracker.state.fetched
            tally.imported += tracker.state.imported
        new = [p for p in done.found.ids if (target.partial.query_key, p) not in known]
        if new:
            fresh.append((target, new))
    report(0.85, f"{sum(len(n) for _, n in fresh):,} new; ranking")
    return rank_new(ws, schema, fresh)


def rank_new(ws: Workspace, schema: Schema, fresh: Sequence[tuple[Target, Sequence[str]]]
             ) -> list[NewHit]:
    """Refresh the indexes once, rank each relation with new abstracts by the schema's default
    ranking and give each new abstract its score and rank (None beyond :data:`RANK_DEPTH`)."""
    if not fresh:
        return []
    refresh_indexes(ws, schema.name)
    matcher = EntityMatcher()
    out: list[NewHit] = []
    for target, pmids in fresh:
        partial = target.partial
        hits, _, _ = rank_relation(ws, schema, partial, partial.render(schema).text,
                                   RANK_DEPTH, matcher=matcher)
        where = {h.doc_id: h for h in hits}
        out += [(partial.query_key, p, where[p].score if p in where else None,
                 where[p].rank if p in where else None) for p in pmids]
    return out


def _record(ws: Workspace, watch: Watch, tally: _Tally, window: tuple[str, str],
            new: Sequence[NewHit], error: str, actor: str, started: str) -> int | None:
    """Record and audit the run; its id, or None when the watch was removed meanwhile."""
    counts = RunCounts("\n".join(tally.queries), window[0], window[1], tally.relations,
                       tally.found, tally.fetched, tally.imported, error)

    def write() -> int | None:
        with ws.transaction():
            run_id = Watches(ws).record_run(watch.id, counts, actor=actor, started_at=started,
                                            finished_at=utcnow(), hits=new)
            if run_id is None:
                return None
            ws.audit(actor, "run", "watch", str(watch.id), after={
                "run": run_id, "since": window[0], "until": window[1],
                "relations": tally.relations, "found": tally.found, "fetched": tally.fetched,
                "imported": tally.imported, "new": len(new), "error": error})
        return run_id

    return retry_busy(write, "watch run: record")


def unfinished_job(ws: Workspace, watch_id: int) -> Job | None:
    """The ``watch`` job of this watch that is queued or running, if any."""
    return next((job for job in list_jobs(ws, WATCH_JOB_KIND, limit=200)
                 if not job.finished and job.params.get("watch_id") == watch_id), None)


def chosen_watches(ws: Workspace, ids: Sequence[int] = (), *, every: bool = False,
                   today: date | None = None) -> list[Watch]:
    """The watches a run takes: those named (``ids``), all (``every``), else the due ones.

    Raises:
        CurationError: An id names no watch.
    """
    if ids:
        return [get_watch(ws, i) for i in dict.fromkeys(ids)]
    watches = Watches(ws).watches()
    return watches if every else [w for w in watches if is_due(w, today)]


def run_watches(ws: Workspace, watches: Sequence[Watch], *, settings: EntrezSettings,
                actor: str, today: date | str | None = None,
                progress: Callable[[Watch, float, str], None] | None = None,
                done: Callable[[WatchOutcome], None] | None = None) -> list[WatchOutcome]:
    """Run ``watches`` one after the other with one shared throttle; one outcome per watch
    run, each also handed to ``done``. A watch whose ``watch`` job is queued or running is left
    to that job, and one removed before its turn is skipped (each logged); a watch whose run
    raised (a bug) gets a failed outcome, with the traceback logged, and the others still run.
    """
    day = parse_day(today) if today is not None else None
    throttle = Throttle.for_settings(settings)
    out = []
    for watch in watches:
        if not _still_to_run(ws, watch):
            continue
        report = (lambda f, m, w=watch: progress(w, f, m)) if progress else None
        try:
            outcome = run_watch(ws, watch, settings=settings, actor=actor, today=day,
                                progress=report, throttle=throttle)
        except Exception as exc:  # noqa: BLE001 - one watch's failure never stops the others
            logger.exception("watch %d (%s) failed", watch.id, watch.label)
            maxdate = (day or utc_today()).isoformat()
            outcome = WatchOutcome(watch, 0, min(watch.mindate, maxdate), maxdate, 0, 0, 0, 0,
                                   (), f"{type(exc).__name__}: {one_line(exc)}")
        out.append(outcome)
        if done is not None:
            done(outcome)
    return out


def _still_to_run(ws: Workspace, watch: Watch) -> bool:
    """Whether :func:`run_watches` runs ``watch`` now: it still exists and no job runs it."""
    if Watches(ws).get(watch.id) is None:
        logger.warning("watch %d was removed before its turn; skipped", watch.id)
        return False
    job = unfinished_job(ws, watch.id)
    if job is not None:
        logger.warning("watch %d left to job %d, %s", watch.id, job.id,
                       f"already {job_state_note(job)}")
        return False
    return True
