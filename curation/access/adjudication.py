"""Label review: disagreements between annotators, adjudicated final grades, blind mode.

An *item* is one (schema, query_key, doc_id): a document judged for a partial relation.

* A **disagreement** is an item whose current (not superseded) labels from two or more users
  carry different grades. A skip is not a grade and is left out, so "skip" against "partial" is
  no disagreement.
* A curator or admin records the **final grade** of an item, with a written reason. A newer
  decision supersedes the older one (``superseded_by``); none is deleted, and each is audited
  (object type ``adjudication``, the old decision in ``before``).
* :func:`final_grade` is the adjudicated grade, else the grade every current label agrees on,
  else None (unresolved, or not labelled).
* **Blind mode** is a workspace setting (``meta`` key ``blind_review``), switched by an admin and
  audited (object type ``setting``). While it is on, an annotator sees another user's label on an
  item only after giving their own grade there (a skip does not count: it is no judgement).
  Curators and admins always see every label: they settle disagreements, which needs everyone's
  grades, and they are the ones who review the annotators' work.

The rows are read and written by :mod:`curation.store.adjudications`; :class:`Adjudication`,
:data:`Item` and :data:`BLIND_REVIEW_KEY` come from there and are re-exported here; the
history of an item and document titles are :class:`~curation.store.adjudications.Adjudications`
methods.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from curation.access.users import PermissionDenied, Role, User, require_admin
from curation.store.adjudications import (
    BLIND_REVIEW_KEY,
    Adjudication,
    Adjudications,
    Item,
)
from curation.store.entities import Entities
from curation.store.labels import Grade, Label, Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

__all__ = ["BLIND_REVIEW_KEY", "REVIEWER_ROLES", "Adjudication", "Disagreement", "FinalGrade",
           "Item", "adjudicate", "blind_mode", "current_adjudications",
           "disagreements", "final_grade", "final_grades", "next_open_item",
           "relation_slot_texts", "relation_texts", "require_reviewer", "sees_all_labels",
           "set_blind_mode", "visible_labels"]

logger = logging.getLogger(__name__)

#: Roles that moderate suggestions, record final grades and always see every label.
REVIEWER_ROLES: frozenset[Role] = frozenset({Role.CURATOR, Role.ADMIN})


def require_reviewer(user: User | None, action: str) -> None:
    """Raise :class:`PermissionDenied` unless ``user`` is a curator or an admin."""
    if user is None or user.role not in REVIEWER_ROLES:
        who = f"{user.name} ({user.role.value})" if user else "an anonymous user"
        raise PermissionDenied(f"{action} needs the curator or admin role; {who} may not do it")


@dataclass(frozen=True)
class Disagreement:
    """An item two or more users graded differently.

    Attributes:
        schema, query_key, doc_id: The item.
        query_text: The query of the newest label on it.
        grades: (user, grade) of each current non-skip label, by user name.
        adjudication: The current final grade, when one was recorded.
        notes: (user, note) of the same labels, in the same order ("" when a label has none;
            untrusted text).
    """

    schema: str
    query_key: str
    doc_id: str
    query_text: str
    grades: tuple[tuple[str, Grade], ...]
    adjudication: Adjudication | None = None
    notes: tuple[tuple[str, str], ...] = ()

    @property
    def item(self) -> Item:
        return self.schema, self.query_key, self.doc_id

    @property
    def resolved(self) -> bool:
        return self.adjudication is not None


def _item(label: Label) -> Item:
    return label.schema, label.query_key, label.doc_id


def _graded(ws: Workspace, schema: str | None = None) -> dict[Item, list[Label]]:
    """Current non-skip labels per item (each list newest first)."""
    out: dict[Item, list[Label]] = {}
    for label in Labels(ws).find(schema=schema):
        if label.grade is not Grade.SKIP:
            out.setdefault(_item(label), []).append(label)
    return out


def disagreements(ws: Workspace, schema: str | None = None, *,
                  viewer: User | None = None) -> list[Disagreement]:
    """Items whose current labels disagree: unresolved first, then the most recently labelled.

    Args:
        ws: The workspace.
        schema: Only items of this schema.
        viewer: When given, blind mode applies (:func:`visible_labels`): an annotator gets only
            the items they graded themselves.
    """
    current = current_adjudications(ws, schema)
    graded = _graded(ws, schema)
    if viewer is not None and not sees_all_labels(ws, viewer):
        mine = Adjudications(ws).graded_items(viewer.name)
        graded = {item: labels for item, labels in graded.items() if item in mine}
    out = []
    for item, labels in graded.items():
        if len({lab.grade for lab in labels}) < 2:
            continue
        by_user = sorted(labels, key=lambda lab: lab.user)
        out.append(Disagreement(*item, labels[0].query_text,
                                tuple((lab.user, lab.grade) for lab in by_user),
                                current.get(item), tuple((lab.user, lab.note) for lab in by_user)))
    return sorted(out, key=lambda d: (d.resolved, -graded[d.item][0].id))


def next_open_item(items: Sequence[Disagreement], after: Item) -> Disagreement | None:
    """The first unresolved item after ``after`` in the order of ``items`` (wrapping around to
    the start); None when every other item is resolved. ``after`` itself is never returned."""
    keys = [d.item for d in items]
    start = keys.index(after) + 1 if after in keys else 0
    for d in (*items[start:], *items[:start]):
        if not d.resolved and d.item != after:
            return d
    return None


def current_adjudications(ws: Workspace, schema: str | None = None) -> dict[Item, Adjudication]:
    """Item -> its current final grade (of one schema, when given)."""
    return {adj.item: adj for adj in Adjudications(ws).current_list(schema)}


def adjudicate(ws: Workspace, schema: str, query_key: str, doc_id: str, grade: str | Grade,
               reason: str, *, user: User | None) -> Adjudication:
    """Record the final grade of a labelled item (audited); it supersedes an earlier one.

    Raises:
        PermissionDenied: Not a curator or admin.
        CurationError: Grade skip or unknown, no reason, or nobody labelled the item.
    """
    require_reviewer(user, "Recording a final grade")
    assert user is not None
    grade = Grade.parse(grade)
    if grade is Grade.SKIP:
        raise CurationError("A final grade is complete, partial or irrelevant; skip decides "
                            "nothing")
    if not reason.strip():
        raise CurationError("A final grade needs a written reason (it is audited and shown to "
                            "the annotators)")
    with ws.transaction():
        if not Adjudications(ws).item_has_labels(schema, query_key, doc_id):
            raise CurationError(f"Nobody labelled document {doc_id} for query {query_key!r} of "
                                f"{schema}; a final grade settles the labels of an item")
        history = Adjudications(ws).history(schema, query_key, doc_id)
        old = history[0] if history else None
        new_id = Adjudications(ws).insert(user=user.name, schema=schema,
                                          query_key=query_key, doc_id=doc_id, grade=grade,
                                          reason=reason.strip(),
                                          supersedes=None if old is None else old.id)
        ws.audit(user.name, "adjudicate", "adjudication", str(new_id),
                 before=None if old is None else {"id": old.id, "user": old.user,
                                                  "grade": old.grade.value,
                                                  "reason": old.reason},
                 after={"schema": schema, "query_key": query_key, "doc_id": doc_id,
                        "grade": grade.value, "reason": reason.strip()})
    return Adjudications(ws).history(schema, query_key, doc_id)[0]


@dataclass(frozen=True)
class FinalGrade:
    """The settled grade of an item.

    Attributes:
        grade: The adjudicated grade, else the one grade every current non-skip label gives.
        source: ``adjudicated`` or ``unanimous`` (one label counts as unanimous).
        adjudication: The current decision when ``source`` is ``adjudicated``.
    """

    grade: Grade
    source: str
    adjudication: Adjudication | None = None


def _settle(adjudication: Adjudication | None, labels: Iterable[Label]) -> FinalGrade | None:
    """The rule of :func:`final_grade`: a decision beats every label; else one shared grade."""
    if adjudication is not None:
        return FinalGrade(adjudication.grade, "adjudicated", adjudication)
    grades = {lab.grade for lab in labels if lab.grade is not Grade.SKIP}
    return FinalGrade(grades.pop(), "unanimous") if len(grades) == 1 else None


def final_grade(ws: Workspace, schema: str, query_key: str, doc_id: str) -> Grade | None:
    """The adjudicated grade, else the one grade all current labels agree on, else None."""
    history = Adjudications(ws).history(schema, query_key, doc_id)
    labels = [lab for lab in Labels(ws).find(schema=schema, query_key=query_key)
              if lab.doc_id == doc_id]
    settled = _settle(history[0] if history else None, labels)
    return settled.grade if settled else None


def final_grades(ws: Workspace, schema: str | None = None, *,
                 viewer: User | None = None) -> dict[Item, FinalGrade]:
    """Item -> its final grade (:func:`final_grade`'s rule), for every item that has one.

    Open disagreements and items with only skips are left out. With ``viewer`` given, blind
    mode applies: an annotator gets only the items they graded themselves (their own grade
    given, the others' may show).
    """
    current = current_adjudications(ws, schema)
    graded = _graded(ws, schema)
    items = set(graded) | set(current)
    if viewer is not None and not sees_all_labels(ws, viewer):
        items &= Adjudications(ws).graded_items(viewer.name)
    out = {}
    for item in items:
        settled = _settle(current.get(item), graded.get(item, ()))
        if settled is not None:
            out[item] = settled
    return out


# -- blind mode ----------------------------------------------------------------------------------
def blind_mode(ws: Workspace) -> bool:
    """Whether blind review is on (off unless an admin switched it on)."""
    return Adjudications(ws).blind_review_value() == "on"


def set_blind_mode(ws: Workspace, on: bool, *, user: User | None) -> bool:
    """Switch blind review on or off (admin only; a change is audited). Returns the new value.

    Raises:
        PermissionDenied: Not an admin.
    """
    require_admin(user, "Switching blind review")
    assert user is not None
    with ws.transaction():
        old = blind_mode(ws)
        if old != on:
            Adjudications(ws).save_blind_review_value("on" if on else "off")
            ws.audit(user.name, "set", "setting", BLIND_REVIEW_KEY,
                     before={BLIND_REVIEW_KEY: old}, after={BLIND_REVIEW_KEY: on})
    return on


def sees_all_labels(ws: Workspace, viewer: User | None) -> bool:
    """True when blind mode is off or the viewer is a curator or admin."""
    return (viewer is not None and viewer.role in REVIEWER_ROLES) or not blind_mode(ws)


def visible_labels(ws: Workspace, labels: Sequence[Label], viewer: User | None) -> list[Label]:
    """The part of ``labels`` that ``viewer`` may see (order kept).

    In blind mode an annotator (or nobody signed in) sees their own labels, and other users'
    labels only on items they have graded themselves; otherwise every label is visible.
    """
    if sees_all_labels(ws, viewer):
        return list(labels)
    name = viewer.name if viewer is not None else ""
    mine = Adjudications(ws).graded_items(name)
    return [lab for lab in labels if lab.user == name or _item(lab) in mine]


# -- how an item reads -----------------------------------------------------------------------
def relation_texts(ws: Workspace,
                   keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(schema, query_key) -> the relation's query entities ("gene: BRAF · variant: V600E").

    The words come from a KB record of the partial relation; a query typed by a curator (no
    record) is read from its key, with entity names from the workspace. Keys of neither form
    map to "".
    """
    schemas = ws.schemas()
    out = {}
    for schema, query_key in set(keys):
        by_slot = relation_slot_texts(ws, schema, query_key, schemas)
        out[schema, query_key] = " · ".join(f"{slot}: {' + '.join(texts)}"
                                            for slot, texts in by_slot.items())
    return out


def relation_slot_texts(ws: Workspace, schema: str, query_key: str,
                        schemas: Mapping[str, Schema] | None = None) -> dict[str, list[str]]:
    """Query slot -> entity texts of one relation (:func:`relation_texts`, unjoined): from a KB
    record of it, else read from a typed query's key; {} for a key of neither form."""
    schemas = ws.schemas() if schemas is None else schemas
    slots = schemas[schema].query_slots if schema in schemas else ()
    return _record_slots(ws, schema, query_key, slots) or _key_slots(ws, query_key)


def _record_slots(ws: Workspace, schema: str, query_key: str,
                  slots: Sequence[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for slot, text in Relations(ws).slot_texts(schema, query_key):
        found.setdefault(slot, []).append(text)
    return {s: found[s] for s in slots if s in found}


def _key_slots(ws: Workspace, query_key: str) -> dict[str, list[str]]:
    """Slots of a key made by :func:`curation.store.import_rows.query_key`
    (``gene=gene:673|variant=variant:v600e``)."""
    parts = [p.partition("=") for p in query_key.split("|")]
    if not all(slot and sep for slot, sep, _ in parts):
        return {}
    by_slot = {slot: value.split(",") for slot, _, value in parts if value}
    keys = sorted({k for value in by_slot.values() for k in value})
    names = Entities(ws).names(keys)
    return {slot: [names.get(k) or k.partition(":")[2] or k for k in value]
            for slot, value in by_slot.items()}

