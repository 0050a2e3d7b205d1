"""Confirmed source suggestions: a PMID a curator confirmed as evidence for a relation.

A curator turns a candidate answer (:mod:`curation.search.candidates`) into a
:class:`SourceSuggestion` (PMID, the relation's slots, a required comment, who confirmed it),
kept in the workspace (:mod:`curation.store.suggestions`, which defines it and
:class:`SuggestionStatus`), moderated (new -> accepted / rejected by a curator or admin, with a
reason) and exported as CSV in the shape of a CIViC source suggestion.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping, Sequence

from curation.access.adjudication import require_reviewer
from curation.access.users import PermissionDenied, User
from curation.search.candidates import is_pmid, kb_answer_entities
from curation.store.relations import PartialRelation
from curation.store.suggestions import SourceSuggestion, Suggestions, SuggestionStatus
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import CurationError
from kb_sources.schema import Schema, get_schema
from kb_sources.spreadsheet import SafeDictWriter
from kb_sources.types import Entity

logger = logging.getLogger(__name__)

#: Slot name -> column name of a CIViC source suggestion.
CIVIC_COLUMNS: dict[str, str] = {"treatment": "therapy"}


# -- confirmed source suggestions ----------------------------------------------------------------
def add_suggestion(
    ws: Workspace, *, user: User | None, schema: Schema, partial: PartialRelation, pmid: str,
    answer: str, comment: str, answer_key: str = "",
) -> SourceSuggestion:
    """Store a confirmed source suggestion (audited).

    Raises:
        CurationError: No user, a PMID that is not digits, an empty answer or comment, or the
            same suggestion stored before.
    """
    if user is None or not user.name.strip():
        raise CurationError("A source suggestion needs the curator who confirms it; sign in first")
    if not is_pmid(pmid.strip()):
        raise CurationError(f"PMID {pmid!r} is not a PubMed id (digits only); suggest a PubMed "
                            "abstract")
    if not answer.strip():
        raise CurationError(f"Name the {schema.answer} this abstract supports")
    if not comment.strip():
        raise CurationError("A source suggestion needs a comment (what the abstract shows); "
                            "CIViC requires one")
    slots = {s: " + ".join(e.text for e in partial.query.get(s, ())) for s in schema.query_slots}
    with ws.transaction():
        if Suggestions(ws).exists(schema.name, partial.query_key, pmid.strip(), answer_key,
                                  answer.strip()):
            raise CurationError(f"PMID {pmid} is already suggested for {answer.strip()} on this "
                                "relation; see the suggestion list")
        new_id = Suggestions(ws).insert(
            utcnow(), user.name, schema.name, partial.query_key, pmid.strip(), slots,
            answer=answer.strip(), answer_key=answer_key, comment=comment.strip())
        ws.audit(user.name, "suggest", "source_suggestion", str(new_id),
                 after={"pmid": pmid.strip(), "answer": answer.strip(), "query_key":
                        partial.query_key})
    return get_suggestion(ws, new_id)


def get_suggestion(ws: Workspace, suggestion_id: int) -> SourceSuggestion:
    found = Suggestions(ws).get(suggestion_id)
    if found is None:
        raise CurationError(f"No source suggestion with id {suggestion_id}")
    return found


def list_suggestions(ws: Workspace, *, schema: str | None = None, query_key: str | None = None,
                     status: str | SuggestionStatus | None = None) -> list[SourceSuggestion]:
    """Stored suggestions, newest first, optionally for one schema / partial relation / status.

    Raises:
        CurationError: Unknown status (the message lists the options).
    """
    wanted = None if status is None else SuggestionStatus.parse(status)
    return Suggestions(ws).stored(schema=schema, query_key=query_key, status=wanted)


def remove_suggestion(ws: Workspace, suggestion_id: int, *, user: User | None) -> None:
    """Delete a suggestion (its confirmer or an admin; audited)."""
    old = get_suggestion(ws, suggestion_id)
    if user is None or (user.name != old.confirmed_by and not user.is_admin):
        raise CurationError(f"Only {old.confirmed_by} or an admin may remove suggestion "
                            f"{suggestion_id}")
    with ws.transaction():
        Suggestions(ws).delete(suggestion_id)
        ws.audit(user.name, "remove", "source_suggestion", str(suggestion_id),
                 before={"pmid": old.pmid, "answer": old.answer, "comment": old.comment})


# -- moderation ----------------------------------------------------------------------------------
def moderate_suggestion(ws: Workspace, suggestion_id: int, status: str | SuggestionStatus,
                        reason: str, *, user: User | None) -> SourceSuggestion:
    """Accept or reject a source suggestion (curator or admin; audited with old and new status).

    Rules: the reason is recorded for both decisions and required to reject or to overturn an
    earlier decision; a curator may not accept a suggestion they confirmed themselves (a second
    person sees every accepted suggestion, as CIViC's editors do), an admin may.

    Args:
        ws: The workspace.
        suggestion_id: The suggestion.
        status: ``accepted`` or ``rejected``.
        reason: Why (shown next to the decision and exported).
        user: The moderator.

    Returns:
        The suggestion as now stored.

    Raises:
        PermissionDenied: Not a curator or admin, or a curator accepting their own suggestion.
        CurationError: Unknown id, a status other than accepted / rejected, no reason where one
            is required, or the suggestion already has that status.
    """
    require_reviewer(user, "Moderating a source suggestion")
    assert user is not None
    new = SuggestionStatus.parse(status)
    if new is SuggestionStatus.NEW:
        raise CurationError("Moderate a suggestion to accepted or rejected; 'new' is where it "
                            "starts")
    reason = reason.strip()
    with ws.transaction():
        old = get_suggestion(ws, suggestion_id)
        _check_moderation(old, new, reason, user)
        Suggestions(ws).set_review(suggestion_id, new, user.name, utcnow(), reason)
        ws.audit(user.name, "accept" if new is SuggestionStatus.ACCEPTED else "reject",
                 "source_suggestion", str(suggestion_id),
                 before={"status": old.status.value, "reviewed_by": old.reviewed_by,
                         "review_reason": old.review_reason},
                 after={"status": new.value, "review_reason": reason})
    return get_suggestion(ws, suggestion_id)


def _check_moderation(old: SourceSuggestion, new: SuggestionStatus, reason: str,
                      user: User) -> None:
    if old.status is new:
        raise CurationError(f"Suggestion {old.id} is already {new.value} (by {old.reviewed_by} "
                            f"at {old.reviewed_at})")
    if not reason and new is SuggestionStatus.REJECTED:
        raise CurationError(f"Rejecting suggestion {old.id} needs a reason; its confirmer "
                            f"{old.confirmed_by} reads it")
    if not reason and old.status is not SuggestionStatus.NEW:
        raise CurationError(f"Suggestion {old.id} was {old.status.value} by {old.reviewed_by}; "
                            "overturning that decision needs a reason")
    if new is SuggestionStatus.ACCEPTED and old.confirmed_by == user.name and not user.is_admin:
        raise PermissionDenied(f"{user.name} confirmed suggestion {old.id}, so another curator "
                               "or an admin accepts it")


def accepted_answers(ws: Workspace, schema: Schema | str, query_key: str) -> list[Entity]:
    """The answers of accepted suggestions for one partial relation, as entities to treat as
    known (with the KB's synonyms when the answer is a KB entity), oldest acceptance first."""
    sch = schema if isinstance(schema, Schema) else get_schema(schema, ws.schemas())
    rows = Suggestions(ws).accepted_answer_rows(sch.name, query_key)
    if not rows:
        return []
    kb = {e.key: e for e in kb_answer_entities(ws, sch)}
    out: dict[str, Entity] = {}
    for answer, answer_key in rows:
        entity = kb.get(answer_key) or answer_entity(sch, answer, answer_key)
        out.setdefault(entity.key, entity)
    return list(out.values())


def answer_entity(schema: Schema, answer: str, answer_key: str) -> Entity:
    """The entity an answer key names (``chemical:D000077484``, ``chemical:vemurafenib``); a
    suggestion without a key gets the answer slot's type."""
    etype, _, ident = answer_key.partition(":")
    if not etype:
        return Entity(answer, schema.slot(schema.answer).type)
    return Entity(answer, etype, "" if ident == answer.strip().lower() else ident)


# -- export --------------------------------------------------------------------------------------
#: Moderation columns that follow the CIViC ones in an export.
STATUS_COLUMNS = ("status", "reviewed_by", "reviewed_at", "review_reason")


def suggestion_rows(suggestions: Sequence[SourceSuggestion],
                    schemas: Mapping[str, Schema]) -> list[dict[str, str]]:
    """Rows in CIViC source-suggestion shape: pmid, the relation's slots (``treatment`` is
    ``therapy``), comment, confirmed_by, created_at, schema; then the moderation columns
    (:data:`STATUS_COLUMNS`)."""
    rows = []
    for s in suggestions:
        schema = schemas.get(s.schema)
        answer_slot = schema.answer if schema else "answer"
        row = {"pmid": s.pmid}
        for slot, text in s.slots.items():
            row[CIVIC_COLUMNS.get(slot, slot)] = text
        row[CIVIC_COLUMNS.get(answer_slot, answer_slot)] = s.answer
        row.update(comment=s.comment, confirmed_by=s.confirmed_by, created_at=s.created_at,
                   schema=s.schema, status=s.status.value, reviewed_by=s.reviewed_by,
                   reviewed_at=s.reviewed_at or "", review_reason=s.review_reason)
        rows.append(row)
    return rows


def suggestions_csv(suggestions: Sequence[SourceSuggestion],
                    schemas: Mapping[str, Schema]) -> str:
    """CSV text of :func:`suggestion_rows` (columns in first-seen order)."""
    rows = suggestion_rows(suggestions, schemas)
    columns = list(dict.fromkeys(k for row in rows for k in row)) or [
        "pmid", "gene", "variant", "therapy", "comment", "confirmed_by", "created_at",
        *STATUS_COLUMNS]
    buffer = io.StringIO()
    writer = SafeDictWriter(buffer, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
