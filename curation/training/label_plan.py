"""Which labels a dense retraining round learns from, decided in one place (issue 44 item 3).

:func:`plan_labels` is the only selection there is: the round (:func:`curation.training.feedback.
label_examples`) and the sidebar's counter (:func:`next_round_labels`) both call it, so the
counter shows exactly what the next round will take.

* Only a user's current label counts (a relabel supersedes; the audit keeps the old one).
* Conflicts (several users, one (query, abstract)): the most senior role wins (admin > curator >
  annotator), among equals the latest; the others are **overruled**.
* An adjudicated final grade (Review page) replaces the winning label's grade.
* **Labels of every split train**, those of dev and test relations included. The gate stays
  honest by measuring only queries whose query group no compared version learned a label of
  (:mod:`curation.training.round_gate`); the groups a version learned are kept in its manifest
  (``labels.learned_groups``).
* Not usable: ``overruled``, ``skip`` (no judgement) and ``no document`` (the abstract left the
  workspace), each kept with its reason (:data:`NOT_USED_REASONS`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from curation.access.adjudication import current_adjudications
from curation.access.users import USERS_FILE, Role, UserStore
from curation.evaluation.harness import EvalTask
from curation.store.documents import Documents
from curation.store.label_types import Grade, Label
from curation.store.labels import Labels
from curation.store.models import Models
from curation.store.workspace import Workspace
from kb_sources.schema import Schema, get_schema

logger = logging.getLogger(__name__)

#: Seniority of roles when labels conflict (higher wins).
SENIORITY: dict[Role, int] = {Role.ANNOTATOR: 0, Role.CURATOR: 1, Role.ADMIN: 2}
#: Why a current label is not trained on (the manifest and the sidebar say it).
NOT_USED_REASONS: dict[str, str] = {
    "overruled": "another label of the same abstract for the same query wins (the more senior "
                 "role, then the latest)",
    "skip": "graded skip: no judgement to learn",
    "no document": "its abstract is no longer in the workspace",
    "recipe": "the recipe makes no training row of it (its labels line says which it uses)",
}
#: The split of a label whose query group is not in the task (no cited abstract in the workspace).
OTHER = "other"


@dataclass(frozen=True)
class LabelPlan:
    """What a round will do with each current label.

    Attributes:
        used: The labels it trains on (final grades applied), oldest first.
        not_used: Reason (a :data:`NOT_USED_REASONS` key) -> label ids it cannot train on.
        groups: Label id -> (query group, split of that group) of every used label.
        last_label_id: The newest label read.
    """

    used: tuple[Label, ...]
    not_used: dict[str, tuple[int, ...]] = field(default_factory=dict)
    groups: dict[int, tuple[str, str]] = field(default_factory=dict)
    last_label_id: int = 0


def split_counts(groups: Mapping[int, tuple[str, str]], ids: Iterable[int]) -> dict[str, int]:
    """Split -> how many of the labels ``ids`` lie there (``groups``: id -> (group, split))."""
    return dict(sorted(Counter(groups[i][1] for i in ids if i in groups).items()))


def groups_of(groups: Mapping[int, tuple[str, str]], ids: Iterable[int]) -> list[str]:
    """The query groups of the labels ``ids``: what a version trained on them learned."""
    return sorted({groups[i][0] for i in ids if i in groups})


def resolve_conflicts(labels: Sequence[Label], roles: Mapping[str, Role | str]
                      ) -> tuple[list[Label], list[Label]]:
    """(winners, overruled): one label per (schema, query, document).

    The most senior role wins; among equal roles the latest label (highest id). Users missing
    from ``roles`` count as annotators.
    """
    def rank(label: Label) -> tuple[int, int]:
        role = roles.get(label.user, Role.ANNOTATOR)
        return SENIORITY[Role.parse(role)], label.id

    best: dict[tuple[str, str, str], Label] = {}
    overruled: list[Label] = []
    for label in labels:
        key = (label.schema, label.query_key, label.doc_id)
        old = best.get(key)
        if old is None or rank(label) > rank(old):
            if old is not None:
                overruled.append(old)
            best[key] = label
        else:
            overruled.append(label)
    return sorted(best.values(), key=lambda lb: lb.id), sorted(overruled, key=lambda lb: lb.id)


def current_labels(ws: Workspace, schema: str, *, after_id: int = 0) -> list[Label]:
    """Every user's current (not superseded) label of a schema, oldest first."""
    labels = [lb for lb in Labels(ws).find(schema=schema) if lb.id > after_id]
    return sorted(labels, key=lambda lb: lb.id)


def roles_of(ws: Workspace) -> dict[str, Role]:
    """User -> role from the workspace's users file (empty when there is none)."""
    path = ws.root / USERS_FILE
    if not path.is_file():
        return {}
    return {u.name: u.role for u in UserStore(path).users()}


def query_group(sch: Schema, query_key: str) -> str:
    """The split group of a query key: its first query slot's entity keys (as the harness)."""
    first = sch.query_slots[0]
    for part in query_key.split("|"):
        slot, _, keys = part.partition("=")
        if slot == first:
            return ",".join(sorted(k for k in keys.split(",") if k))
    return ""


def plan_labels(ws: Workspace, sch: Schema, labels: Sequence[Label], *,
                roles: Mapping[str, Role | str] | None = None,
                task: EvalTask | None = None) -> LabelPlan:
    """What a round does with ``labels`` (see the module docstring).

    Args:
        labels: The current labels of the schema.
        roles: User -> role for conflicts (users missing count as annotators).
        task: The schema's split, which gives each used label's query group and split (without
            it, or for a relation outside it, the group is read from the query key and the
            split is :data:`OTHER`).
    """
    winners, overruled = resolve_conflicts(labels, roles or {})
    final = current_adjudications(ws, sch.name)  # a curator's final grade beats every label
    winners = [replace(lb, grade=final[item].grade)
               if (item := (lb.schema, lb.query_key, lb.doc_id)) in final else lb
               for lb in winners]
    present = Documents(ws).titles(lb.doc_id for lb in winners)
    not_used: dict[str, list[int]] = {"overruled": [lb.id for lb in overruled]}
    used: list[Label] = []
    for lb in winners:
        why = ("skip" if lb.grade is Grade.SKIP else
               "no document" if lb.doc_id not in present else "")
        if why:
            not_used.setdefault(why, []).append(lb.id)
        else:
            used.append(lb)
    return LabelPlan(tuple(used), {k: tuple(v) for k, v in not_used.items() if v},
                     label_groups(sch, used, task), max((lb.id for lb in labels), default=0))


def label_groups(sch: Schema, labels: Iterable[Label], task: EvalTask | None
                 ) -> dict[int, tuple[str, str]]:
    """Label id -> (query group, split) (see :func:`plan_labels`)."""
    queries = {q.qid: q for q in task.queries} if task is not None else {}
    splits = {q.group: q.split for q in queries.values()}
    out = {}
    for lb in labels:
        q = queries.get(lb.query_key)
        group = q.group if q is not None else query_group(sch, lb.query_key)
        out[lb.id] = (group, splits.get(group, OTHER))
    return out


@dataclass(frozen=True)
class NextRoundLabels:
    """The sidebar's counter: what the next round of a schema will learn from.

    Attributes:
        active: The active version (None: there is none).
        new: Grade -> labels the next round uses that the active version did not learn from.
        learned: Labels the next round uses that the active version learned from too.
        not_usable: Reason -> how many current labels no round can use.
    """

    active: str | None
    new: dict[str, int]
    learned: int
    not_usable: dict[str, int]

    @property
    def total(self) -> int:
        """Every label the next round uses."""
        return sum(self.new.values()) + self.learned


def learned_label_ids(manifest: Mapping[str, Any]) -> set[int]:
    """The label ids a dense version's manifest says it trained on."""
    used = (manifest.get("examples") or {}).get("labels", {}).get("used") or []
    return {int(i) for i in used if isinstance(i, int) and not isinstance(i, bool)}


def next_round_labels(ws: Workspace, schema: str, *,
                      roles: Mapping[str, Role | str] | None = None) -> NextRoundLabels:
    """Count what the next retraining round of ``schema`` will learn from, with
    :func:`plan_labels` (the round's own selection): the labels new to the active version per
    grade, those it learned already, and the current labels no round can use, by reason."""
    sch = get_schema(schema, ws.schemas())
    plan = plan_labels(ws, sch, current_labels(ws, sch.name),
                       roles=roles if roles is not None else roles_of(ws))
    active = Models(ws).active(sch.name)
    known = learned_label_ids(active.manifest) if active is not None else set()
    new = Counter(lb.grade.value for lb in plan.used if lb.id not in known)
    return NextRoundLabels(active.id if active else None, dict(new),
                           sum(lb.id in known for lb in plan.used),
                           {k: len(v) for k, v in plan.not_used.items()})
