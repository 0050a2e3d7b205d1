"""Answer suggestions against held-out KB answers: is the gold answer among the top suggestions?

Usage::

    python benchmarks/suggestion_bench.py -w WORKSPACE [--schema PO --schema PTM]
        [--relations 20] [--k 10] [--top 5]

For each schema, ``--relations`` partial relations with at least one known answer and one cited
PMID (evenly spaced over the list sorted by query key, so the sample is fixed) are searched as the
Curate page does by default (BM25, entity rerank, top ``--k`` abstracts, the schema's first
template). Two views of each relation:

* held out: every known answer is removed from the partial relation, and from the KB's answer
  entities when no other relation of the schema has it, so the tool cannot know it; the figure is
  how often a gold answer is among the first ``--top`` suggestions (``hit@top``), and the share of
  gold answers found there (``recall@top``, of at most ``--top`` gold answers);
* as stored: the NEW flags the curator sees, and how many of them name a class or a generic
  therapy (:func:`curation.search.answer_classes.answer_kind`).

"Suggestions" are the candidates in the order the panel lists them; with ``--evidence-only``
(the default where candidates say so) only those supported by an evidence sentence.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curation.matching.matcher import EntityMatcher  # noqa: E402
from curation.search.answer_classes import answer_kind  # noqa: E402
from curation.search.candidates import answer_candidates, kb_answer_entities  # noqa: E402
from curation.search.indexing import get_index  # noqa: E402
from curation.search.session import rank  # noqa: E402
from curation.store.documents import Documents  # noqa: E402
from curation.store.relations import (
    PartialRelation,  # noqa: E402
    Relations,
)
from curation.store.workspace import Workspace  # noqa: E402
from curation.templates import render_query  # noqa: E402
from kb_sources.schema import Schema  # noqa: E402


def sample(partials: list[PartialRelation], n: int) -> list[PartialRelation]:
    usable = sorted((p for p in partials if p.answers and p.pmids), key=lambda p: p.query_key)
    if len(usable) <= n:
        return usable
    step = len(usable) / n
    return [usable[int(i * step)] for i in range(n)]


def gold_keys(partial: PartialRelation) -> set[str]:
    return {e.key for answer in partial.answers for e in answer}


def suggestions(ws: Workspace, schema: Schema, partial: PartialRelation, docs, matcher,
                pool, evidence_only: bool, titles) -> list:
    try:
        found = answer_candidates(ws, schema, partial, docs, matcher, kb_entities=pool,
                                  titles=titles)
    except TypeError:  # a version without titles (to measure the one before)
        found = answer_candidates(ws, schema, partial, docs, matcher, kb_entities=pool)
    if evidence_only:
        found = [c for c in found if getattr(c, "sentences", True)]
    return found


def run_schema(ws: Workspace, schema: Schema, args: argparse.Namespace, retriever,
               matcher: EntityMatcher) -> dict[str, float]:
    partials = Relations(ws).partial(schema.name, limit=100_000)
    answer_use = Counter(k for p in partials for k in gold_keys(p))
    entities = kb_answer_entities(ws, schema)
    answer_type = schema.slot(schema.answer).type
    stats = Counter()
    for partial in sample(partials, args.relations):
        text = render_query(schema, partial.query).text
        hits, _ = rank(retriever, text, args.k, entities=[e for es in partial.query.values()
                                                          for e in es],
                       rerank=True, matcher=matcher, doc_text=lambda d: _text(ws, d))
        rows = Documents(ws).rows_by_id([h.doc_id for h in hits])
        docs = [(h.doc_id, rows[h.doc_id].text if h.doc_id in rows else "") for h in hits]
        titles = {h.doc_id: rows[h.doc_id].title if h.doc_id in rows else "" for h in hits}
        gold = gold_keys(partial)
        gold_forms = {f.lower() for answer in partial.answers for e in answer
                      for f in (e.text, *e.synonyms)}
        own = {k for k in gold if answer_use[k] == 1}
        held = replace(partial, answers=())
        pool = [e for e in entities if e.key not in own]
        top = suggestions(ws, schema, held, docs, matcher, pool, args.evidence_only,
                          titles)[:args.top]
        found = {c.key for c in top if c.key in gold or c.text.lower() in gold_forms}
        stats["relations"] += 1
        stats["hit"] += bool(found)
        stats["recall"] += len(found) / min(len(gold), args.top)
        shown = suggestions(ws, schema, partial, docs, matcher, entities, False, titles)
        new = [c for c in shown if c.new]
        stats["new"] += len(new)
        stats["new_generic"] += sum(answer_kind(c.text, answer_type).generic for c in new)
        stats["candidates"] += len(shown)
        print(f"  {schema.name} {partial.query_key[:60]:<60} gold {len(gold):>2} "
              f"top{args.top} {[c.text for c in top]} hit={bool(found)} "
              f"NEW {len(new)} ({sum(answer_kind(c.text, answer_type).generic for c in new)} "
              f"generic)", flush=True)
    n = max(stats["relations"], 1)
    return {"relations": stats["relations"], f"hit@{args.top}": stats["hit"] / n,
            f"recall@{args.top}": stats["recall"] / n, "NEW flags": stats["new"],
            "NEW class/generic": stats["new_generic"], "candidates": stats["candidates"]}


def _text(ws: Workspace, doc_id: str) -> str:
    row = Documents(ws).rows_by_id([doc_id]).get(doc_id)
    return "" if row is None else row.text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workspace", type=Path, required=True)
    parser.add_argument("--schema", action="append", default=None)
    parser.add_argument("--relations", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--all-candidates", dest="evidence_only", action="store_false",
                        help="count candidates without an evidence sentence too")
    args = parser.parse_args(argv)
    with Workspace.open(args.workspace) as ws:
        retriever = get_index(ws, "bm25", progress=False)
        matcher = EntityMatcher()
        for name in args.schema or ["PO", "PTM"]:
            start = time.perf_counter()
            figures = run_schema(ws, ws.schemas()[name], args, retriever, matcher)
            took = time.perf_counter() - start
            print(f"{name}: " + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in figures.items()) + f" ({took:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
