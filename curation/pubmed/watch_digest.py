"""What the watches found: the Worklist's "Watched relations" and the Curate page's NEW badges.

A watch's *new abstracts* on a relation are the PMIDs its runs found new there
(:mod:`curation.pubmed.watch_run`) that nobody has labelled on that relation yet: labelling one
takes it off the digest. :func:`watch_digest` gives one row per watched relation with new
abstracts ("3 new abstracts since 2026-01-05", the date being the first day the runs that found
them asked for), best new score first, then the watches with nothing new; each row carries the
watch's last run, so a failed run shows why. :func:`new_since` gives the Curate page, for the
relation in view, PMID -> the day since which it is new (every watch of the schema that found
it on that relation).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.watches import Watch, Watches, WatchHit, WatchRun
from curation.store.workspace import Workspace
from kb_sources.schema import get_schema


@dataclass(frozen=True)
class DigestRow:
    """One watched relation in the digest.

    Attributes:
        watch: The watch.
        query_key: The relation ("" for a filter watch with nothing new).
        relation: How the relation reads ("BRAF · V600E"; a filter watch's label when "").
        slots: Query slot -> text of the relation (to open it in Curate).
        new: New abstracts nobody has labelled on it yet.
        since: The first day the runs that found them asked for ("" when none).
        best_score: The best new abstract's score (None: none new, or none ranked).
        best_pmid: That abstract's PMID ("" when none).
        last_run: The watch's newest run (None before the first).
        in_kb: Whether the relation is a KB relation (else its entities were typed).
    """

    watch: Watch
    query_key: str
    relation: str
    slots: dict[str, str]
    new: int
    since: str
    best_score: float | None
    best_pmid: str
    last_run: WatchRun | None
    in_kb: bool = False

    @property
    def failed(self) -> bool:
        """Whether the watch's newest run failed."""
        return self.last_run is not None and self.last_run.status == "failed"

    def headline(self) -> str:
        """ "3 new abstracts since 2026-01-05" / "no new abstract since 2026-02-01"."""
        if self.new:
            return f"{self.new:,} new abstract{'s' if self.new != 1 else ''} since {self.since}"
        return f"no new abstract since {self.watch.mindate}"


def _open_hits(ws: Workspace, schema: str, hits: list[WatchHit]) -> list[WatchHit]:
    """``hits`` less those labelled by anyone on their relation."""
    keys = sorted({h.query_key for h in hits})
    labelled = {(k, d) for k, d, _ in Labels(ws).labellers(schema, keys)}
    return [h for h in hits if (h.query_key, h.pmid) not in labelled]


def _relation_slots(ws: Workspace, schema: str, watch: Watch, key: str
                    ) -> tuple[dict[str, str], bool]:
    """The relation's query slot texts and whether it is a KB relation."""
    stored = Relations(ws).slot_texts(schema, key) if key else []
    if watch.kind == "relation" and key == watch.target:
        return watch.slots, bool(stored)
    query_slots = get_schema(schema, ws.schemas()).query_slots
    out: dict[str, str] = {}
    for slot, text in stored:
        if slot in query_slots:
            out[slot] = f"{out[slot]} + {text}" if slot in out else text
    return out, bool(stored)


def _row(ws: Workspace, watch: Watch, key: str, hits: list[WatchHit],
         last: WatchRun | None) -> DigestRow:
    slots, in_kb = _relation_slots(ws, watch.schema, watch, key)
    own = watch.kind == "relation" and key == watch.target
    relation = watch.label if own else " · ".join(slots.values()) or watch.label
    scored = [h for h in hits if h.score is not None]
    best = max(scored, key=lambda h: h.score or 0.0) if scored else None
    return DigestRow(watch, key, relation, slots, len({h.pmid for h in hits}),
                     min(h.since for h in hits), best.score if best else None,
                     best.pmid if best else "", last, in_kb)


def watch_digest(ws: Workspace, schema: str) -> list[DigestRow]:
    """The schema's watched relations (module docstring): rows with new abstracts, best new
    score first (unscored after), then one row per watch with nothing new."""
    watches = Watches(ws).watches(schema)
    if not watches:
        return []
    last = Watches(ws).last_runs(w.id for w in watches)
    grouped: dict[tuple[int, str], list[WatchHit]] = defaultdict(list)
    for hit in _open_hits(ws, schema, Watches(ws).hits(schema=schema)):
        grouped[(hit.watch_id, hit.query_key)].append(hit)
    by_id = {w.id: w for w in watches}
    rows = [_row(ws, by_id[wid], key, hits, last.get(wid))
            for (wid, key), hits in grouped.items() if wid in by_id]
    rows.sort(key=lambda r: (r.best_score is None, -(r.best_score or 0.0), r.watch.id,
                             r.query_key))
    busy = {r.watch.id for r in rows}
    for watch in watches:
        if watch.id not in busy:
            key = watch.target if watch.kind == "relation" else ""
            slots, in_kb = _relation_slots(ws, schema, watch, key)
            rows.append(DigestRow(watch, key, watch.label, slots, 0, "", None, "",
                                  last.get(watch.id), in_kb))
    return rows


def new_since(ws: Workspace, schema: str, query_key: str,
              pmids: Iterable[str] | None = None) -> dict[str, str]:
    """PMID -> the first day since which a watch of the schema found it new on this relation
    (``YYYY-MM-DD``), of ``pmids`` when given."""
    wanted = None if pmids is None else set(pmids)
    out: dict[str, str] = {}
    for hit in Watches(ws).hits(schema=schema, query_key=query_key):
        if wanted is None or hit.pmid in wanted:
            out[hit.pmid] = min(out.get(hit.pmid, hit.since), hit.since)
    return out
