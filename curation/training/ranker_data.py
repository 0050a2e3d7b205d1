"""What a ranker round learns from: the KB's train-split relations and every label (issue 36
item 3).

* **KB grades** of the train split: each train query's candidates (BM25's top N, the dense top
  N where open, and the documents curators labelled for it), the documents the KB cites graded
  by their g class, labels over KB grades, the rest 0. The KB relations of the dev and test
  splits are never trained on: they are the held-out pool the gate measures on
  (:mod:`curation.training.heldout`), and ``kbcurate evaluate``'s test figures stay clean of the
  KB.
* **Every label**, whatever the split of its relation: a label of a train query grades that
  candidate; a label of a dev or test query, or of a relation no cited abstract of the workspace
  supports, makes a group of its own of the labelled documents only (their KB grades stay out).
  Conflicts: the most senior role, then the latest; an adjudicated final grade beats both.
  ``skip`` is no judgement; a label of a relation that no longer exists, or of a document no
  longer in the workspace, cannot be trained on and is counted.

:class:`LabelSet` also says which labels a version learned from: how many per user and per split
and the range of their ids (the Models page shows it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from curation.access.adjudication import current_adjudications
from curation.access.users import Role
from curation.evaluation.harness import EvalQuery, EvalTask
from curation.ranking.grades import GradeTable, graded, kb_grade
from curation.ranking.model import Group
from curation.ranking.pipeline import RankingContext
from curation.store.documents import Documents
from curation.store.label_types import Grade, Label
from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from curation.training.feedback import current_labels, resolve_conflicts
from curation.training.heldout import group_of
from kb_sources.schema import Schema
from kb_sources.types import Entity

#: The split of a label whose relation has no cited abstract in the workspace (not in the task).
OTHER = "other"


@dataclass(frozen=True)
class LabelQuery:
    """A labelled query outside the train split: what its group needs to be trained on."""

    qid: str
    text: str
    group: str
    split: str
    query: Mapping[str, Sequence[Entity]]


@dataclass(frozen=True)
class LabelSet:
    """The labels a round trains on.

    Attributes:
        grades: query key -> document -> grade (from the grade table).
        used: The label ids trained on.
        queries: The labelled queries outside the train split (their groups, splits, texts).
        by_user: user -> labels trained on.
        by_split: split ("train", "dev", "test", "other") -> labels trained on.
        not_used: why -> how many labels were not trained on (``skip``, ``overruled``, ``no
            relation``, ``no document``).
    """

    grades: dict[str, dict[str, int]] = field(default_factory=dict)
    used: tuple[int, ...] = ()
    queries: dict[str, LabelQuery] = field(default_factory=dict)
    by_user: dict[str, int] = field(default_factory=dict)
    by_split: dict[str, int] = field(default_factory=dict)
    not_used: dict[str, int] = field(default_factory=dict)

    def groups(self) -> set[str]:
        """The query groups of the labelled queries outside the train split."""
        return {q.group for q in self.queries.values()}

    def provenance(self) -> dict[str, Any]:
        """Which labels a version learned from (kept in its manifest as ``labels``)."""
        return {"used": len(self.used), "by_user": dict(sorted(self.by_user.items())),
                "by_split": dict(sorted(self.by_split.items())),
                "ids": [min(self.used), max(self.used)] if self.used else [],
                "queries": len(self.grades), "not_used": dict(sorted(self.not_used.items())),
                "heldout_groups": sorted({q.group for q in self.queries.values()
                                          if q.split != "train"})}


def label_set(ws: Workspace, sch: Schema, task: EvalTask, table: GradeTable,
              roles: Mapping[str, Role | str] | None = None,
              labels: Sequence[Label] | None = None) -> LabelSet:
    """The schema's current labels as training grades (see the module docstring).

    ``labels``: the label rows to read (default: every user's current label of the schema).
    """
    rows = current_labels(ws, sch.name) if labels is None else list(labels)
    winners, overruled = resolve_conflicts(rows, roles or {})
    final = current_adjudications(ws, sch.name)
    in_task = {q.qid: q for q in task.queries}
    others = _other_relations(ws, sch, {lb.query_key for lb in winners} - set(in_task))
    present = Documents(ws).parts(sorted({lb.doc_id for lb in winners}))
    grades: dict[str, dict[str, int]] = {}
    queries: dict[str, LabelQuery] = {}
    used: list[int] = []
    by_user: Counter[str] = Counter()
    by_split: Counter[str] = Counter()
    skipped: Counter[str] = Counter({"overruled": len(overruled)} if overruled else {})
    for lb in winners:
        item = (lb.schema, lb.query_key, lb.doc_id)
        value = table.label(final[item].grade if item in final else lb.grade)
        query = in_task.get(lb.query_key) or others.get(lb.query_key)
        why = ("skip" if value is None else "no relation" if query is None
               else "no document" if lb.doc_id not in present else "")
        if why:
            skipped[why] += 1
            continue
        split = query.split if query is not None else OTHER
        grades.setdefault(lb.query_key, {})[lb.doc_id] = int(value)  # type: ignore[arg-type]
        if split != "train":
            queries[lb.query_key] = (query if isinstance(query, LabelQuery)
                                     else task_label_query(query))
        used.append(lb.id)
        by_user[lb.user] += 1
        by_split[split] += 1
    return LabelSet(grades, tuple(used), queries, dict(by_user), dict(by_split), dict(skipped))


def _other_relations(ws: Workspace, sch: Schema, keys: set[str]) -> dict[str, LabelQuery]:
    """Labelled relations of the schema outside the task (no cited abstract in the workspace)."""
    if not keys:
        return {}
    out = {}
    for p in Relations(ws).partial(sch.name):
        if p.query_key in keys:
            out[p.query_key] = LabelQuery(p.query_key, p.render(sch).text, group_of(p.query),
                                          OTHER, p.query)
    return out


def task_label_query(q: EvalQuery) -> LabelQuery:
    """A task query as a labelled query."""
    return LabelQuery(q.qid, q.text, q.group, q.split, q.query)


def labels_by_ids(ws: Workspace, schema: str, ids: Sequence[Any]) -> list[Label]:
    """The label rows with these ids (superseded ones too: what an older version learned)."""
    wanted = {int(i) for i in ids if isinstance(i, int) and not isinstance(i, bool)}
    if not wanted:
        return []
    rows = Labels(ws).find(schema=schema, include_superseded=True)
    return sorted((lb for lb in rows if lb.id in wanted and lb.grade is not Grade.SKIP),
                  key=lambda lb: lb.id)


# -- graded groups --------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingSet:
    """Graded groups: the train queries' (KB grades, labels over them) and one group per
    labelled query outside the train split (its labelled documents only), by query group."""

    kb: tuple[Group, ...]
    labelled: tuple[tuple[str, Group], ...] = ()

    def groups(self, without: set[str] | frozenset[str] = frozenset()) -> list[Group]:
        """Every group, less the labelled ones of the query groups ``without`` (a fold)."""
        return [*self.kb, *(g for grp, g in self.labelled if grp not in without)]

    @property
    def rows(self) -> int:
        return sum(len(g.grades) for g in self.groups())


def training_groups(ctx: RankingContext, queries: Sequence[EvalQuery], table: GradeTable,
                    labels: Mapping[str, Mapping[str, int]], *, progress: bool = True
                    ) -> list[Group]:
    """Graded candidate groups of the train queries (KB grades, labels over them)."""
    matcher = ctx.builder.matcher
    groups = []
    for q in tqdm(queries, desc=f"features {ctx.schema.name}", disable=not progress,
                  mininterval=0.5):
        own = labels.get(q.qid, {})
        cands = ctx.candidates(q.text, extra=sorted(own))
        x = ctx.features(q.query, cands, q.qid)
        gold = [d for d in q.gold if d in set(cands.doc_ids)]
        parts = Documents(ctx.ws).parts(gold)
        cited = {d: kb_grade(table, " ".join(p for p in parts[d] if p), q.query, q.answers,
                             matcher) for d in gold if d in parts}
        grades = graded(cands.doc_ids, cited, own, table.kb["negative"])
        groups.append(Group(q.qid, cands.doc_ids, x, tuple(grades)))
    return groups


def labelled_groups(ctx: RankingContext, labels: LabelSet) -> list[tuple[str, Group]]:
    """(query group, group) of each labelled query outside the train split: the features of its
    labelled documents as candidates of its query, graded by the labels only."""
    out = []
    for qid, query in sorted(labels.queries.items()):
        own = labels.grades.get(qid, {})
        cands = ctx.candidates(query.text, extra=sorted(own))
        x = ctx.features(query.query, cands, qid)
        rows = [i for i, d in enumerate(cands.doc_ids) if d in own]
        if rows:
            out.append((query.group, Group(qid, tuple(cands.doc_ids[i] for i in rows), x[rows],
                                           tuple(own[cands.doc_ids[i]] for i in rows))))
    return out


def training_set(ctx: RankingContext, train: Sequence[EvalQuery], table: GradeTable,
                 labels: LabelSet, *, progress: bool = True) -> TrainingSet:
    """The round's graded groups (see :class:`TrainingSet`)."""
    return TrainingSet(tuple(training_groups(ctx, train, table, labels.grades,
                                             progress=progress)),
                       tuple(labelled_groups(ctx, labels)))
