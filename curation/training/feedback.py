"""Relevance labels become training examples (issue 11's loop, step 1).

Grades map to EDEL examples as follows (:class:`LabelMapping` holds the numbers):

* **complete** -> a positive with mu 0 (class ``label:complete``);
* **partial** -> a noisy positive: the margin of the positive class its g pattern gives (which of
  the query's entities and known answers the abstract mentions; the schema's margin table), or
  ``partial_mu`` when the pattern is complete or the query has no KB record to take entities from
  (class ``label:partial:<pattern>`` / ``label:partial``);
* **irrelevant** -> a hard negative with ``irrelevant_mu`` (default 0.8, EDEL's hard-negative
  margin; class ``label:irrelevant``);
* **skip** -> nothing.

Which labels a round takes is decided by :func:`curation.training.label_plan.plan_labels` (the
sidebar's counter uses the same function): a user's current label only (a relabel supersedes, the
audit keeps the old one); of several users' labels of one (query, document) the most senior role
wins (admin > curator > annotator), among equals the latest; an **adjudicated** final grade
(Review page, disagreements) replaces the winning label's grade. A label beats a KB-derived
example for the same (query, document). Labels of **every split** train, those of dev and test
relations included; the gate leaves the queries of the groups a version learned labels of out of
its measurement (:mod:`curation.training.round_gate`), so it measures on queries no label touched.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from curation.access.users import Role
from curation.evaluation.harness import EvalQuery, EvalTask
from curation.matching.matcher import EntityMatcher
from curation.store.documents import Documents, document_text
from curation.store.labels import Grade, Label
from curation.store.workspace import Workspace
from curation.training.label_plan import (  # noqa: F401 (re-exported)
    NOT_USED_REASONS,
    SENIORITY,
    current_labels,
    groups_of,
    plan_labels,
    resolve_conflicts,
    split_counts,
)
from curation.training.recipes.edel.examples import Example, ExampleSet, manifest_digest
from curation.training.recipes.edel.margins import MarginTable
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LabelMapping:
    """Margins given to labelled examples.

    Attributes:
        partial_mu: mu of a partial label whose g pattern is complete or unknown.
        irrelevant_mu: mu of an irrelevant label (a hard negative).
    """

    partial_mu: float = 0.6
    irrelevant_mu: float = 0.8

    def __post_init__(self) -> None:
        for name in ("partial_mu", "irrelevant_mu"):
            value = getattr(self, name)
            if not 0.0 <= value <= 2.0:
                raise CurationError(f"{name} must lie in [0, 2] (a margin class), got {value}")


@dataclass(frozen=True)
class LabelExamples:
    """The examples made from labels and what happened to each label.

    ``held_out`` is empty since labels of every split train (kept for older readers and
    plug-ins); ``groups`` holds each used label's (query group, split).
    """

    examples: tuple[Example, ...]
    texts: dict[str, str]
    used: tuple[int, ...]  # label ids that became examples
    held_out: tuple[int, ...]  # labels not trained on because of their split (none now)
    overruled: tuple[int, ...]  # labels that lost a conflict
    skipped: tuple[int, ...]  # grade skip
    missing: tuple[int, ...]  # document no longer in the workspace
    last_label_id: int = 0  # the newest label read
    groups: dict[int, tuple[str, str]] = field(default_factory=dict)

    def used_examples(self) -> list[tuple[int, Example]]:
        """(label id, example) of every label that became an example."""
        return list(zip(self.used, self.examples, strict=True))

    def provenance(self, used: Iterable[int]) -> dict[str, Any]:
        """What a version trained on the labels ``used`` (a recipe may take fewer than
        :attr:`used`) keeps in its manifest as ``examples.labels``: the ids used, per split,
        the query groups learned (the gate leaves their queries out), the ids not used and why.
        """
        ids = sorted(set(used))
        not_used = {"overruled": self.overruled, "skip": self.skipped,
                    "no document": self.missing,
                    "recipe": tuple(sorted(set(self.used) - set(ids)))}
        return {"used": ids, "by_split": split_counts(self.groups, ids),
                "learned_groups": groups_of(self.groups, ids),
                "held_out": list(self.held_out), "overruled": list(self.overruled),
                "skipped": list(self.skipped), "missing": list(self.missing),
                "not_used": {k: len(v) for k, v in not_used.items() if v},
                "reasons": {k: NOT_USED_REASONS[k] for k, v in not_used.items() if v},
                "last_label_id": self.last_label_id}


def label_examples(ws: Workspace, sch: Schema, task: EvalTask, table: MarginTable,
                   labels: Sequence[Label], *, roles: Mapping[str, Role | str] | None = None,
                   mapping: LabelMapping | None = None, document_format: str,
                   matcher: EntityMatcher | None = None) -> LabelExamples:
    """Examples from the labels :func:`plan_labels` selects (see the module docstring)."""
    mapping = mapping or LabelMapping()
    matcher = matcher or EntityMatcher()
    plan = plan_labels(ws, sch, labels, roles=roles, task=task)
    queries = {q.qid: q for q in task.queries}
    docs = _documents(ws, {lb.doc_id for lb in plan.used})
    out: list[Example] = []
    used: list[int] = []
    missing = list(plan.not_used.get("no document", ()))
    for lb in plan.used:
        if lb.doc_id not in docs:  # deleted between the plan and now
            missing.append(lb.id)
            continue
        raw = docs[lb.doc_id][0]
        mu, cls = _margin(lb.grade, queries.get(lb.query_key), raw, sch, table, mapping, matcher)
        out.append(Example(lb.query_key, lb.query_text, lb.doc_id, lb.grade is not Grade.IRRELEVANT,
                           mu, cls))
        used.append(lb.id)
    texts = {d: document_format.format(title=t, abstract=a).strip()
             for d, (_, t, a) in docs.items()}
    made = LabelExamples(tuple(out), texts, tuple(used), (), plan.not_used.get("overruled", ()),
                         plan.not_used.get("skip", ()), tuple(sorted(missing)),
                         plan.last_label_id, {i: plan.groups[i] for i in used})
    logger.info("labels -> examples: %d used %s, %d overruled, %d skip, %d missing", len(used),
                split_counts(made.groups, used), len(made.overruled), len(made.skipped),
                len(made.missing))
    return made


def merge_examples(kb: ExampleSet, labelled: LabelExamples,
                   extra: Mapping[str, Any] | None = None) -> ExampleSet:
    """KB examples plus label examples; a label replaces a KB example of the same pair.

    The manifest gains ``labels`` (:meth:`LabelExamples.provenance`) and its hash covers the
    merged examples.
    """
    pairs = {(e.qid, e.doc_id) for e in labelled.examples}
    kept = [e for e in kb.examples if (e.qid, e.doc_id) not in pairs]
    examples = tuple(kept) + labelled.examples
    texts = {**kb.texts, **{e.doc_id: labelled.texts[e.doc_id] for e in labelled.examples}}
    manifest = dict(kb.manifest)
    classes = Counter(e.cls for e in examples)
    manifest.update({
        "examples": len(examples), "positives": sum(e.positive for e in examples),
        "negatives": sum(not e.positive for e in examples),
        "classes": dict(sorted(classes.items())),
        "sha256": manifest_digest(examples),
        "labels": {**labelled.provenance(labelled.used),
                   "replaced_kb_examples": len(kb.examples) - len(kept), **(extra or {})},
    })
    return replace(kb, examples=examples, texts=texts, manifest=manifest)


def _margin(grade: Grade, query: EvalQuery | None, text: str, sch: Schema, table: MarginTable,
            mapping: LabelMapping, matcher: EntityMatcher) -> tuple[float, str]:
    if grade is Grade.COMPLETE:
        return 0.0, "label:complete"
    if grade is Grade.IRRELEVANT:
        return mapping.irrelevant_mu, "label:irrelevant"
    if query is None:
        return mapping.partial_mu, "label:partial"
    bits = [any(matcher.mentions(e, text) for e in query.query.get(s, ()))
            for s in sch.query_slots]
    bits.append(any(matcher.mentions(a, text) for a in query.answers))
    pattern = "".join("1" if b else "0" for b in bits)
    if all(bits) or pattern not in table.positive:
        return mapping.partial_mu, f"label:partial:{pattern}"
    return table.positive[pattern], f"label:partial:{pattern}"


def _documents(ws: Workspace, ids: set[str]) -> dict[str, tuple[str, str, str]]:
    """doc_id -> (raw text, title, abstract) of the labelled documents still in the workspace."""
    return {doc_id: (document_text(title, abstract), title, abstract)
            for doc_id, (title, abstract) in Documents(ws).parts(sorted(ids)).items()}
