"""The worklist across relations: which partial relations still have unlabelled top-k abstracts,
in the order the curator picks, with labelling progress per relation and per user.

:func:`worklist` ranks the abstracts of many partial relations with the Curate page's own query
(the relation's template, :meth:`PartialRelation.render`) and counts, per relation, how many of
its top-k abstracts nobody (or the given user) has labelled yet. Priorities (:class:`Priority`):

* ``evidence``: the relation's best KB evidence level first (CIViC A before B; OncoKB 1 before
  2A; see :func:`level_rank`); relations without a level last.
* ``new_answers``: most new answers suggested first: distinct answers of the relation's pending
  source suggestions (status ``new``, not yet accepted or rejected) that the KB does not list for
  it yet; then pending suggestions; then new answer candidates found in its top-k abstracts
  (:func:`~curation.search.candidates.answer_candidates`), always counted for this order (else
  few suggestions tie every relation: silently the KB order), over the returned rows only;
  :func:`new_answers_ties` says when nothing separated them.
* ``fewest_labels``: fewest current labels on the relation (anyone's) first.

Ties keep the KB list order (most cited PMIDs first, then most records, then the query key), so
the order is deterministic. Under every priority a vague relation (a query of position-less
variants only, "G-to-A -> ?": :func:`~curation.search.relation_table.vague_relation`) comes last:
it merges unrelated genes.

Cost: every priority key comes from the database without retrieval, so the relations are sorted
first and ranked in that order, in batches of :data:`BATCH` (``Retriever.search_batch``: one
encoder call per batch for a dense model), until ``limit`` rows with unlabelled abstracts are
found (more only when finished ones are skipped). Measured on the demo data (12,393 abstracts,
CIViC 2021: 917 PO relations) on the shared 2-core CPU under load: listing the relations 0.7 s;
BM25 worklist of 200 rows 1.0 s, of all 917 1.7 s; the entity-aware rerank (the matcher over 50
hits per relation) 3.3 s for 200; counting answer candidates (the matcher over the top-k with
every KB answer entity of the schema), so the ``new_answers`` order, 5.7-9.1 s for 200 rows and
25-29 s for all 917 (load 2.8), off by default for the other orders. A dense model adds its query
encoding, ~10 ms a query unloaded (DESIGN.md), less in batches (~2 s for 200).

Labels: current labels only (a relabelled label's earlier versions are left out); a ``skip``
counts as labelled, as on the Curate page; labels waiting in the outbox are not counted yet.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import pandas as pd

from curation.matching.matcher import EntityMatcher
from curation.search.candidates import answer_candidates, kb_answer_entities
from curation.search.relation_table import vague_relation
from curation.search.rerank import EntityReranker, RerankConfig
from curation.search.session import RERANK_DEPTH, relation_label
from curation.store.documents import DocumentRow, Documents
from curation.store.labels import Labels
from curation.store.relations import PartialRelation, Relations
from curation.store.suggestions import Suggestions
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError, parse_choice
from kb_sources.schema import Schema, get_schema
from retrievers.base import Hit, Progress, Retriever, progress_reporter

logger = logging.getLogger(__name__)

#: Rows :func:`worklist` returns by default (after the priority pre-sort).
DEFAULT_LIMIT = 200
#: Relations ranked per ``search_batch`` call.
BATCH = 64
#: Relation attributes that hold a KB evidence level (CIViC ``evidence_level``, OncoKB ``level``).
EVIDENCE_ATTRIBUTES = ("evidence_level", "level")
_NUMBERED_LEVEL = re.compile(r"^(?:level[_ ]?)?(r?)(\d+)([a-z]?)$")


class Priority(StrEnum):
    """What the worklist puts first."""

    EVIDENCE = "evidence"  # best KB evidence level first
    NEW_ANSWERS = "new_answers"  # most suggested new answers first
    FEWEST_LABELS = "fewest_labels"  # fewest labels so far first

    @classmethod
    def parse(cls, value: str | Priority) -> Priority:
        """The member named by ``value``; unknown names list the options."""
        return parse_choice(cls, value, "worklist priority")


@dataclass(frozen=True)
class WorklistOptions:
    """Options of :func:`worklist` beyond the common ones.

    Attributes:
        source: Only relations of this KB (all when None).
        include_done: Keep relations whose top-k abstracts are all labelled.
        rerank: Rerank the top hits by query entities, as the Curate page's "Entity-aware
            rerank" does (needs a matcher).
        candidates: Count new answer candidates in each returned row's top-k (needs a
            matcher; the slow part of the worklist; always on for ``new_answers``).
    """

    source: str | None = None
    include_done: bool = False
    rerank: bool = False
    candidates: bool = False


@dataclass(frozen=True)
class WorklistRow:
    """One partial relation in the worklist.

    Attributes:
        query_key: The relation's identity (the Curate page's picker value).
        label: Readable relation ("BRAF · V600E → ? (1 known treatment, 1 PMIDs)").
        query_text: The templated query that ranked ``doc_ids``.
        evidence: Best KB evidence level of its records ("" when none has one).
        doc_ids: Top-k abstracts, best first.
        unlabelled: Top-k abstracts nobody has labelled.
        unlabelled_by_user: Top-k abstracts the user has not labelled (None without a user).
        labels: Current labels on the relation, all abstracts and users.
        labels_by_user: The user's current labels on it (None without a user).
        new_answers: Distinct answers of pending source suggestions that the KB lacks.
        pending_suggestions: Source suggestions with status ``new`` for the relation.
        new_candidates: New answer candidates in the top-k (None when not counted).
        model_version: What ranked the abstracts (the hits' retriever label).
    """

    query_key: str
    label: str
    query_text: str
    evidence: str
    doc_ids: tuple[str, ...]
    unlabelled: int
    unlabelled_by_user: int | None
    labels: int
    labels_by_user: int | None
    new_answers: int
    pending_suggestions: int
    new_candidates: int | None
    model_version: str

    @property
    def todo(self) -> int:
        """Unlabelled top-k abstracts: the user's when a user was given, else anyone's."""
        return self.unlabelled if self.unlabelled_by_user is None else self.unlabelled_by_user

    @property
    def done_fraction(self) -> float:
        """Share of the top-k already labelled (by the user when given); 1.0 for no hits."""
        return 1.0 - self.todo / len(self.doc_ids) if self.doc_ids else 1.0

    @property
    def team_fraction(self) -> float:
        """Share of the top-k labelled by anyone; 1.0 for no hits."""
        return 1.0 - self.unlabelled / len(self.doc_ids) if self.doc_ids else 1.0


def level_rank(level: str) -> tuple[int, int, str, str]:
    """Sort key of an evidence level, strongest first.

    CIViC letters A (validated) .. E (inferential) take tiers 1..5; OncoKB's numbered levels
    (``1``, ``2A``, ``3B``, ``R1``, ``LEVEL_1``) their number, a letter or ``R`` after the bare
    number of the same tier. A level of another scheme sorts after these, alphabetically.
    """
    text = level.strip().lower()
    if len(text) == 1 and "a" <= text <= "z":
        return (0, ord(text) - ord("a") + 1, "", text)
    found = _NUMBERED_LEVEL.match(text)
    if found:
        resistance, number, sub = found.groups()
        return (0, int(number), resistance + sub, text)
    return (1, 0, "", text)


def best_level(partial: PartialRelation) -> str:
    """The strongest evidence level among the relation's records ("" when none has one)."""
    levels = [v for name in EVIDENCE_ATTRIBUTES for v in partial.attributes.get(name, ()) if v]
    return min(levels, key=level_rank) if levels else ""


@dataclass(frozen=True)
class _Counts:
    """What the database says about a schema's relations, before any retrieval."""

    labels: Mapping[str, int]
    labels_by_user: Mapping[str, int]
    pending: Mapping[str, list[tuple[str, str]]]  # query_key -> (answer_key, answer)


def _counts(ws: Workspace, schema: str, user: str | None) -> _Counts:
    labels: Counter[str] = Counter()
    mine: Counter[str] = Counter()
    for key, n, n_user in Labels(ws).counts(schema, user):
        labels[key], mine[key] = n, n_user
    pending: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key, answer_key, answer in Suggestions(ws).pending_answers(schema):
        pending[key].append((answer_key, answer))
    return _Counts(labels, mine, pending)


def new_answer_count(partial: PartialRelation, suggested: Iterable[tuple[str, str]]) -> int:
    """Distinct suggested answers (``(answer_key, answer)``) the relation's KB records lack; an
    answer is known when its key or its text (case-insensitive, a combination's joined text or
    one entity's text or synonym) is."""
    known_keys = {e.key for answer in partial.answers for e in answer}
    known_texts = {t.lower() for t in partial.answer_texts()}
    known_texts |= {f.lower() for answer in partial.answers for e in answer
                    for f in (e.text, *e.synonyms)}
    new = {key or " ".join(text.lower().split()) for key, text in suggested
           if key not in known_keys and " ".join(text.lower().split()) not in known_texts}
    return len(new)


def _pre_key(priority: Priority, partial: PartialRelation, counts: _Counts) -> tuple:
    """The priority's sort key from the database alone (no retrieval)."""
    if priority is Priority.EVIDENCE:
        level = best_level(partial)
        return (not level, level_rank(level) if level else ())
    if priority is Priority.FEWEST_LABELS:
        return (counts.labels.get(partial.query_key, 0),)
    pending = counts.pending.get(partial.query_key, [])
    return (-new_answer_count(partial, pending), -len(pending))


def worklist(ws: Workspace, schema: Schema | str, retriever: Retriever, *, k: int = 10,
             user: str | None = None, limit: int = DEFAULT_LIMIT,
             priority: Priority | str = Priority.EVIDENCE, progress: Progress = True,
             matcher: EntityMatcher | None = None,
             options: WorklistOptions | None = None) -> list[WorklistRow]:
    """Partial relations with unlabelled top-k abstracts, in priority order.

    Args:
        ws: The workspace.
        schema: The schema (or its name).
        retriever: A loaded retriever with its index built (the Curate page's choice).
        k: Abstracts per relation, as the Curate page's "Abstracts to show".
        user: Count unlabelled abstracts and labels of this user too; a relation stays in the
            list while the user has not labelled its top-k (anyone's labels when None).
        limit: At most this many rows (taken in priority order).
        priority: ``evidence``, ``new_answers`` or ``fewest_labels`` (see the module).
        progress: ``True`` for a tqdm bar over the relations, ``False`` for none, or a callback
            ``fn(done, total)``.
        matcher: The entity matcher, needed for ``options.rerank``, ``options.candidates``
            and the ``new_answers`` priority (which always counts candidates).
        options: Source filter, finished relations, rerank, answer candidates.

    Returns:
        At most ``limit`` rows, highest priority first.

    Raises:
        CurationError: Unknown priority or schema, ``k`` or ``limit`` below 1, or rerank,
            candidates or the ``new_answers`` priority asked for without a matcher.
    """
    options = options or WorklistOptions()
    order = Priority.parse(priority)
    sch = schema if isinstance(schema, Schema) else get_schema(schema, ws.schemas())
    if k < 1 or limit < 1:
        raise CurationError(f"The worklist needs k >= 1 and limit >= 1 (got k={k}, "
                            f"limit={limit}); ask for at least one abstract and one relation")
    if order is Priority.NEW_ANSWERS:  # counts the candidates of each relation's top-k
        options = replace(options, candidates=True)
    if (options.rerank or options.candidates) and matcher is None:
        raise CurationError("Rerank, answer candidates and the new_answers order need the "
                            "entity matcher; pass matcher=EntityMatcher()")
    counts = _counts(ws, sch.name, user)
    relations = Relations(ws).partial(sch.name, source=options.source)
    relations.sort(key=lambda p: (vague_relation(p), *_pre_key(order, p, counts)))  # stable
    rows: list[WorklistRow] = []
    with progress_reporter(len(relations), progress, "worklist", min_bar=BATCH) as advance:
        for start in range(0, len(relations), BATCH):
            chunk = relations[start:start + BATCH]
            hits = _top_k(ws, sch, retriever, chunk, k, matcher if options.rerank else None)
            seen = _labelled(ws, sch.name, [p.query_key for p in chunk])
            for partial, ranked in zip(chunk, hits, strict=True):
                row = _row(sch, partial, ranked, seen.get(partial.query_key, {}), counts, user)
                if options.include_done or row.todo > 0:
                    rows.append(row)
            advance(len(chunk))
            if len(rows) >= limit:
                break
    rows = rows[:limit]
    if options.candidates and matcher is not None:
        rows = _with_candidates(ws, sch, rows, {p.query_key: p for p in relations}, matcher,
                                progress)
        if order is Priority.NEW_ANSWERS:  # stable: the database keys stay first
            vague = {p.query_key for p in relations if vague_relation(p)}
            rows.sort(key=lambda r: (r.query_key in vague, -r.new_answers,
                                     -r.pending_suggestions, -(r.new_candidates or 0)))
    logger.info("worklist %s by %s: %d rows", sch.name, order.value, len(rows))
    return rows


def new_answers_ties(rows: Sequence[WorklistRow]) -> bool:
    """True when no row has a suggested new answer, a pending suggestion or a counted new
    answer candidate: the ``new_answers`` order then is only the KB list order."""
    return not any(r.new_answers or r.pending_suggestions or r.new_candidates for r in rows)


def _top_k(ws: Workspace, schema: Schema, retriever: Retriever,
           chunk: Sequence[PartialRelation], k: int,
           matcher: EntityMatcher | None) -> list[list[Hit]]:
    """Top-k hits per relation for its templated query (reranked when a matcher is given,
    as :func:`curation.search.session.rank` does)."""
    queries = [p.render(schema).text for p in chunk]
    base = retriever.search_batch(queries, max(k, RERANK_DEPTH) if matcher else k)
    if matcher is None:
        return base
    texts = Documents(ws).rows_by_id([h.doc_id for hits in base for h in hits])
    reranker = EntityReranker(retriever, lambda doc_id: _text(texts.get(doc_id)), matcher,
                              RerankConfig(depth=RERANK_DEPTH))
    return [reranker.rerank(hits, [e for ents in p.query.values() for e in ents], k)
            for p, hits in zip(chunk, base, strict=True)]


def _labelled(ws: Workspace, schema: str, keys: Sequence[str]) -> dict[str, dict[str, set[str]]]:
    """query_key -> doc_id -> users with a current label on it."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for key, doc_id, user in Labels(ws).labellers(schema, keys):
        out[key][doc_id].add(user)
    return out


def _row(schema: Schema, partial: PartialRelation, hits: Sequence[Hit],
         seen: Mapping[str, set[str]], counts: _Counts, user: str | None) -> WorklistRow:
    docs = tuple(h.doc_id for h in hits)
    pending = counts.pending.get(partial.query_key, [])
    return WorklistRow(
        query_key=partial.query_key,
        label=relation_label(partial, schema),
        query_text=partial.render(schema).text,
        evidence=best_level(partial),
        doc_ids=docs,
        unlabelled=sum(1 for d in docs if not seen.get(d)),
        unlabelled_by_user=None if user is None else sum(1 for d in docs
                                                          if user not in seen.get(d, ())),
        labels=counts.labels.get(partial.query_key, 0),
        labels_by_user=None if user is None else counts.labels_by_user.get(partial.query_key, 0),
        new_answers=new_answer_count(partial, pending),
        pending_suggestions=len(pending),
        new_candidates=None,
        model_version=hits[0].retriever if hits else "",
    )


def _with_candidates(ws: Workspace, schema: Schema, rows: Sequence[WorklistRow],
                     partials: Mapping[str, PartialRelation], matcher: EntityMatcher,
                     progress: Progress) -> list[WorklistRow]:
    """Rows with ``new_candidates``: answer candidates in the top-k the relation lacks (a
    second progress phase, over the rows)."""
    entities = kb_answer_entities(ws, schema)
    texts = Documents(ws).rows_by_id([d for r in rows for d in r.doc_ids])
    out = []
    with progress_reporter(len(rows), progress, "answer candidates", min_bar=BATCH) as advance:
        for row in rows:
            docs = [(d, _text(texts.get(d))) for d in row.doc_ids]
            titles = {d: (texts[d].title or "") if d in texts else "" for d in row.doc_ids}
            found = answer_candidates(ws, schema, partials[row.query_key], docs, matcher,
                                      kb_entities=entities, titles=titles)
            out.append(replace(row, new_candidates=sum(1 for c in found if c.new)))
            advance(1)
    return out


def _text(row: DocumentRow | None) -> str:
    """Title and abstract as the matcher and the rerank read them ("" for a missing one)."""
    return "" if row is None else row.text


def data_stamp(ws: Workspace) -> str:
    """A cheap marker that changes whenever a worklist could: labels given, relabelled or
    undone; source suggestions added, removed or moderated; relations imported."""
    return Labels(ws).worklist_stamp()


# -- tables and charts ------------------------------------------------------------------------
def worklist_frame(rows: Sequence[WorklistRow]) -> pd.DataFrame:
    """The worklist as a table: relation, evidence, progress, unlabelled counts, labels, new
    answers (user columns are empty without a user; candidates when counted)."""
    return pd.DataFrame({
        "relation": [r.label for r in rows],
        "evidence": [r.evidence for r in rows],
        "progress": [r.done_fraction for r in rows],
        "team progress": [r.team_fraction for r in rows],
        "to label (you)": [r.unlabelled_by_user for r in rows],
        "to label (anyone)": [r.unlabelled for r in rows],
        "top-k": [len(r.doc_ids) for r in rows],
        "labels": [r.labels for r in rows],
        "your labels": [r.labels_by_user for r in rows],
        "new answers": [r.new_answers for r in rows],
        "pending suggestions": [r.pending_suggestions for r in rows],
        "answer candidates": [r.new_candidates for r in rows],
        "query key": [r.query_key for r in rows],
    })
