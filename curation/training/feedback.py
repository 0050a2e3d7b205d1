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

Only a user's current label counts (a relabel supersedes, the audit keeps the old one). When
several users labelled the same (query, document) differently, the most senior role wins (admin >
curator > annotator), and among equals the latest decision. A label beats a KB-derived example for
the same (query, document). An **adjudicated** final grade (Review page, disagreements) replaces
the winning label's grade for its item. Labels of queries whose entity lies in the **dev or test
split** are never trained on (they are counted as held out), so the gate's held-out queries stay
untouched.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from curation.access.adjudication import current_adjudications
from curation.access.users import Role
from curation.evaluation.harness import EvalQuery, EvalTask
from curation.matching.matcher import EntityMatcher
from curation.store.documents import Documents, document_text
from curation.store.labels import Grade, Label, Labels
from curation.store.workspace import Workspace
from curation.training.recipes.edel.examples import Example, ExampleSet, manifest_digest
from curation.training.recipes.edel.margins import MarginTable
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

logger = logging.getLogger(__name__)

#: Seniority of roles when labels conflict (higher wins).
SENIORITY: dict[Role, int] = {Role.ANNOTATOR: 0, Role.CURATOR: 1, Role.ADMIN: 2}


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
    """The examples made from labels and what happened to each label."""

    examples: tuple[Example, ...]
    texts: dict[str, str]
    used: tuple[int, ...]  # label ids that became examples
    held_out: tuple[int, ...]  # labels on dev/test queries (never trained on)
    overruled: tuple[int, ...]  # labels that lost a conflict
    skipped: tuple[int, ...]  # grade skip
    missing: tuple[int, ...]  # document no longer in the workspace
    last_label_id: int = 0  # the newest label read (the next round starts after it)

    def used_examples(self) -> list[tuple[int, Example]]:
        """(label id, example) of every label that became an example."""
        return list(zip(self.used, self.examples, strict=True))


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


def label_examples(ws: Workspace, sch: Schema, task: EvalTask, table: MarginTable,
                   labels: Sequence[Label], *, roles: Mapping[str, Role | str] | None = None,
                   mapping: LabelMapping | None = None, document_format: str,
                   matcher: EntityMatcher | None = None) -> LabelExamples:
    """Examples from labels (see the module docstring)."""
    mapping = mapping or LabelMapping()
    matcher = matcher or EntityMatcher()
    winners, overruled = resolve_conflicts(labels, roles or {})
    final = current_adjudications(ws, sch.name)  # a curator's final grade beats every label
    winners = [replace(lb, grade=final[item].grade)
               if (item := (lb.schema, lb.query_key, lb.doc_id)) in final else lb
               for lb in winners]
    queries = {q.qid: q for q in task.queries}
    splits = {q.group: q.split for q in task.queries}
    docs = _documents(ws, {lb.doc_id for lb in winners})
    out: list[Example] = []
    used, held, skipped, missing = [], [], [], []
    for lb in winners:
        if lb.grade is Grade.SKIP:
            skipped.append(lb.id)
            continue
        if lb.doc_id not in docs:
            missing.append(lb.id)
            continue
        if splits.get(_group(sch, lb.query_key), "train") != "train":
            held.append(lb.id)
            continue
        raw = docs[lb.doc_id][0]
        mu, cls = _margin(lb.grade, queries.get(lb.query_key), raw, sch, table, mapping, matcher)
        out.append(Example(lb.query_key, lb.query_text, lb.doc_id, lb.grade is not Grade.IRRELEVANT,
                           mu, cls))
        used.append(lb.id)
    texts = {d: document_format.format(title=t, abstract=a).strip()
             for d, (_, t, a) in docs.items()}
    logger.info("labels -> examples: %d used, %d held out, %d overruled, %d skip, %d missing",
                len(used), len(held), len(overruled), len(skipped), len(missing))
    return LabelExamples(tuple(out), texts, tuple(used), tuple(held),
                         tuple(lb.id for lb in overruled), tuple(skipped), tuple(missing),
                         max((lb.id for lb in labels), default=0))


def merge_examples(kb: ExampleSet, labelled: LabelExamples,
                   extra: Mapping[str, Any] | None = None) -> ExampleSet:
    """KB examples plus label examples; a label replaces a KB example of the same pair.

    The manifest gains ``labels`` (ids used, held out, overruled, counts per class) and its hash
    covers the merged examples.
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
        "labels": {"used": list(labelled.used), "held_out": list(labelled.held_out),
                   "overruled": list(labelled.overruled), "skipped": list(labelled.skipped),
                   "missing": list(labelled.missing),
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


def _group(sch: Schema, query_key: str) -> str:
    """The split group of a query key: its first query slot's entity keys (as the harness)."""
    first = sch.query_slots[0]
    for part in query_key.split("|"):
        slot, _, keys = part.partition("=")
        if slot == first:
            return ",".join(sorted(k for k in keys.split(",") if k))
    return ""


def _documents(ws: Workspace, ids: set[str]) -> dict[str, tuple[str, str, str]]:
    """doc_id -> (raw text, title, abstract) of the labelled documents still in the workspace."""
    return {doc_id: (document_text(title, abstract), title, abstract)
            for doc_id, (title, abstract) in Documents(ws).parts(sorted(ids)).items()}
