"""Watch a relation for new abstracts (LitSuggest's digest, per relation).

A curator or an admin watches one relation (its query slots and its Entrez query, built or
edited) or the relations of a schema a filter lists, as the relation table filters them (slot or
attribute -> text, and a KB). Each run of a watch (:mod:`curation.pubmed.watch_run`) asks PubMed
for what appeared since its last successful run (``mindate``, Entrez date), imports and ranks
it; :mod:`curation.pubmed.watch_digest` tells what is new per relation.

This module adds, lists and removes watches, with the permission checks (annotators may not
watch; only the owner or an admin removes or runs one) and the audit log, and says which
relations and queries a watch searches (:func:`watch_targets`) and when it is due
(:func:`is_due`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from curation.access.adjudication import REVIEWER_ROLES, require_reviewer
from curation.access.users import PermissionDenied, User
from curation.pubmed.query import build_pubmed_query, partial_pubmed_query
from curation.pubmed.search import check_max_hits
from curation.search.relation_table import curation_order
from curation.search.session import typed_partial
from curation.store.clock import utcnow
from curation.store.relations import PartialRelation, Relations
from curation.store.watches import Watch, Watches
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema, get_schema

logger = logging.getLogger(__name__)

#: A new watch's first run asks for this many days before the day it was added.
LOOKBACK_DAYS = 30
#: A watch is due this many days after its last successful run, unless told otherwise.
EVERY_DAYS = 1
#: The most relations one filter watch may list (each is one esearch per run).
MAX_FILTER_RELATIONS = 50
#: Longest Entrez query accepted (characters).
MAX_QUERY = 4000
#: The kinds of watch.
RELATION, FILTER = "relation", "filter"


@dataclass(frozen=True)
class Target:
    """One relation a watch searches: the relation, its Entrez query and how lists name it."""

    partial: PartialRelation
    term: str
    label: str


def utc_today() -> date:
    """Today in UTC (the day E-utilities' dates are compared with)."""
    return datetime.now(UTC).date()


def parse_day(value: str | date, what: str = "date") -> date:
    """A date from ``YYYY-MM-DD`` (or ``YYYY/MM/DD``) text.

    Raises:
        CurationError: Not such a date.
    """
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value).strip().replace("/", "-"))
    except ValueError as exc:
        raise CurationError(f"The {what} {value!r} is not a date; give it as YYYY-MM-DD, e.g. "
                            "2026-01-31") from exc


def may_manage(user: User | None, watch: Watch) -> bool:
    """Whether ``user`` may run or remove ``watch``: an admin, or its owner while a curator."""
    return user is not None and (user.is_admin or (user.name == watch.owner
                                                   and user.role in REVIEWER_ROLES))


def require_manager(user: User | None, watch: Watch, action: str) -> None:
    """Raise :class:`PermissionDenied` unless :func:`may_manage`."""
    if not may_manage(user, watch):
        who = f"{user.name} ({user.role.value})" if user else "an anonymous user"
        raise PermissionDenied(f"{action} needs the admin role or to be the watch's owner "
                               f"({watch.owner}); {who} may not do it")


def get_watch(ws: Workspace, watch_id: int) -> Watch:
    """The watch with this id.

    Raises:
        CurationError: No such watch (the message lists the ids there are).
    """
    found = Watches(ws).get(int(watch_id))
    if found is None:
        ids = [str(w.id) for w in Watches(ws).watches()]
        raise CurationError(f"No watch #{watch_id}; the watches are: "
                            f"{', '.join(ids) or 'none'} (kbcurate watch list)")
    return found


def _relation_spec(ws: Workspace, schema: Schema, slots: Mapping[str, str],
                   query: str | None) -> tuple[str, dict[str, Any], str, str]:
    unknown = sorted(set(slots) - set(schema.query_slots))
    if unknown:
        raise CurationError(f"{schema.name} has no query slot {', '.join(map(repr, unknown))}; "
                            f"watch a relation by {', '.join(schema.query_slots)}")
    texts = {s: slots[s].strip() for s in schema.query_slots if (slots.get(s) or "").strip()}
    partial = typed_partial(ws, schema, texts)  # raises when no slot is filled
    term = (query or "").strip() or build_pubmed_query(ws, schema.name, texts).text
    if len(term) > MAX_QUERY:
        raise CurationError(f"The PubMed query has {len(term):,} characters; at most "
                            f"{MAX_QUERY:,} are accepted")
    label = " · ".join(e.text for s in schema.query_slots for e in partial.query.get(s, ()))
    return partial.query_key, {"slots": texts}, label or " · ".join(texts.values()), term


def _filter_spec(ws: Workspace, schema: Schema, filters: Mapping[str, str],
                 source: str | None) -> tuple[str, dict[str, Any], str, str]:
    given = {k.strip(): v.strip() for k, v in filters.items() if v and v.strip()}
    spec = {"filters": dict(sorted(given.items())), "source": (source or "").strip()}
    listed = filter_relations(ws, schema, spec)
    if not listed:
        raise CurationError(f"No {schema.name} relation matches {describe_filter(spec)}; "
                            "check the filter with kbcurate relations --where")
    label = f"{schema.name} where {describe_filter(spec)}"
    return json.dumps(spec, sort_keys=True), spec, label, ""


def describe_filter(spec: Mapping[str, Any]) -> str:
    """``gene=BRAF, evidence_level=A (civic)``, or "all relations"."""
    text = ", ".join(f"{k}={v}" for k, v in (spec.get("filters") or {}).items())
    text = text or "all relations"
    return f"{text} ({spec['source']})" if spec.get("source") else text


def filter_relations(ws: Workspace, schema: Schema, spec: Mapping[str, Any]
                     ) -> list[PartialRelation]:
    """The relations a filter watch lists, in the relation table's order.

    Raises:
        CurationError: An unknown filter name, or more than :data:`MAX_FILTER_RELATIONS`.
    """
    listed = curation_order(Relations(ws).partial(schema.name, spec.get("filters") or {},
                                                  source=spec.get("source") or None))
    if len(listed) > MAX_FILTER_RELATIONS:
        raise CurationError(f"{describe_filter(spec)} lists {len(listed):,} {schema.name} "
                            f"relations; a watch searches at most {MAX_FILTER_RELATIONS}: "
                            "narrow the filter (another slot, an evidence level, a KB)")
    return listed


def add_watch(ws: Workspace, user: User | None, schema: str, *,
              slots: Mapping[str, str] | None = None, filters: Mapping[str, str] | None = None,
              source: str | None = None, query: str | None = None, max_hits: int = 200,
              every_days: int = EVERY_DAYS, since: str | date | None = None,
              today: date | None = None) -> Watch:
    """Watch one relation (``slots``) or the relations a filter lists (``filters``, ``source``);
    ``user`` owns the watch. Audited.

    Args:
        since: The first Entrez date the first run asks for (default :data:`LOOKBACK_DAYS`
            days before today).
        query: An edited Entrez query of a relation watch (default: built from its slots).

    Raises:
        PermissionDenied: ``user`` is not a curator or an admin.
        CurationError: Neither or both of ``slots`` and ``filters``, a bad value, or the owner
            already watches this relation or filter.
    """
    require_reviewer(user, "Watching a relation")
    assert user is not None
    sch = get_schema(schema, ws.schemas())
    if (slots is None) == (filters is None):
        raise CurationError("A watch is one relation (its slots) or a filter of relations; "
                            "give one of the two")
    check_max_hits(max_hits)
    if not 1 <= every_days <= 365:
        raise CurationError(f"every {every_days} days is out of range; expected 1 to 365")
    start = parse_day(since, "since date") if since is not None else \
        (today or utc_today()) - timedelta(days=LOOKBACK_DAYS)
    if start > (today or utc_today()):
        raise CurationError(f"The since date {start} is in the future; give today or earlier")
    if slots is not None:
        kind, (target, spec, label, term) = RELATION, _relation_spec(ws, sch, slots, query)
    else:
        kind, (target, spec, label, term) = FILTER, _filter_spec(ws, sch, filters or {}, source)
    store = Watches(ws)
    with ws.transaction():
        if store.find(user.name, sch.name, target) is not None:
            raise CurationError(f"{user.name} already watches {label}; kbcurate watch list "
                                "shows it")
        watch_id = store.add(owner=user.name, schema=sch.name, kind=kind, target=target,
                             spec=spec, label=label, pubmed_query=term, max_hits=max_hits,
                             every_days=every_days, mindate=start.isoformat(), at=utcnow())
        watch = store.get(watch_id)
        ws.audit(user.name, "add", "watch", str(watch_id), after=watch_json(watch))
    logger.info("%s watches %s (watch %d)", user.name, label, watch_id)
    return watch


def remove_watch(ws: Workspace, user: User | None, watch_id: int) -> Watch:
    """Stop a watch (its owner or an admin); its runs and new abstracts go with it. Audited.

    Raises:
        CurationError: No such watch.
        PermissionDenied: ``user`` is neither its owner nor an admin.
    """
    watch = get_watch(ws, watch_id)
    require_manager(user, watch, f"Removing watch #{watch.id}")
    assert user is not None
    with ws.transaction():
        Watches(ws).remove(watch.id)
        ws.audit(user.name, "remove", "watch", str(watch.id), before=watch_json(watch))
    return watch


def watch_json(watch: Watch) -> dict[str, Any]:
    """A watch for ``--json`` and the audit log."""
    out: dict[str, Any] = {"id": watch.id, "owner": watch.owner, "schema": watch.schema,
                           "kind": watch.kind, "label": watch.label}
    if watch.kind == RELATION:
        out.update(query_key=watch.target, slots=watch.slots)
    else:
        out.update(filters=watch.filters, source=watch.spec.get("source") or None)
    out.update(pubmed_query=watch.pubmed_query, max_hits=watch.max_hits,
               every_days=watch.every_days, since=watch.mindate,
               last_run_at=watch.last_run_at)
    return out


def watch_targets(ws: Workspace, watch: Watch) -> list[Target]:
    """The relations a watch searches now, each with its Entrez query: the relation of a
    relation watch with its stored query; for a filter watch the relations the filter lists
    today, each query built from the relation (a relation whose every slot is noise is left
    out, with a note in the log).

    Raises:
        CurationError: The schema is gone, the filter lists too many relations, or the
            relation's slots no longer resolve.
    """
    schema = get_schema(watch.schema, ws.schemas())
    if watch.kind == RELATION:
        partial = typed_partial(ws, schema, watch.slots)
        term = watch.pubmed_query or build_pubmed_query(ws, schema.name, watch.slots).text
        return [Target(partial, term, watch.label)]
    out = []
    for partial in filter_relations(ws, schema, watch.spec):
        label = " · ".join(e.text for ents in partial.query.values() for e in ents)
        try:
            out.append(Target(partial, partial_pubmed_query(ws, partial).text, label))
        except CurationError as exc:
            logger.info("watch %d leaves out %s: %s", watch.id, label, exc)
    return out


def is_due(watch: Watch, today: date | None = None) -> bool:
    """Whether a watch should run: it never ran successfully, or its last successful run was
    at least ``every_days`` days ago (a failed run leaves it due, so it catches up)."""
    if watch.last_run_at is None:
        return True
    last = parse_day(watch.last_run_at[:10])
    return ((today or utc_today()) - last).days >= watch.every_days
