"""Time the Review page's adjudication work on a copy of a real workspace (issue 29 item 5).

The workspace's database is copied (SQLite backup) into a temporary folder, never written in
place; synthetic labels are added there: ``--items`` (schema, relation, abstract) items of the
largest schema, each graded by two or three annotators (about a third of them disagreeing),
and a curator's final grade on half of the disagreements. Then it prints the time of:

* ``disagreements()`` (the Disagreements tab's list) and ``final_grades()``;
* the label export with final grades, CSV and JSONL, of every label;
* one item's highlights (``item_relation`` + ``item_spans``, matcher warm and cold).

    python benchmarks/review_bench.py /work/demo-ws --items 2000
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from curation.access.adjudication import adjudicate, disagreements, final_grades
from curation.access.label_export import export_labels_with_final_grades
from curation.access.users import Role, User
from curation.matching.matcher import EntityMatcher
from curation.search.item_highlight import item_relation, item_spans
from curation.store.documents import Documents
from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace

GRADES = ("complete", "partial", "irrelevant")


def copy_workspace(source: Path, into: Path) -> Path:
    """The workspace's database and schemas in ``into`` (indexes and models left out)."""
    into.mkdir(parents=True)
    with sqlite3.connect(source / "workspace.sqlite") as src, \
            sqlite3.connect(into / "workspace.sqlite") as dst:
        src.backup(dst)
    if (source / "schemas").is_dir():
        shutil.copytree(source / "schemas", into / "schemas")
    return into


def timed(label: str, fn, repeats: int = 3):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    print(f"{label:<48} {best * 1000:9.1f} ms (best of {repeats})")
    return out


def fill(ws: Workspace, items: int, seed: int) -> tuple[str, list[tuple[str, str, str]]]:
    """Synthetic labels on ``items`` items of the schema with the most relations."""
    rng = random.Random(seed)
    schema = max(ws.schemas(), key=lambda s: len(Relations(ws).partial(s)))
    relations = Relations(ws).partial(schema)
    docs = [r[0] for r in ws.conn.execute("SELECT doc_id FROM documents ORDER BY doc_id")]
    chosen = []
    start = time.perf_counter()
    for _ in range(items):
        partial, doc = rng.choice(relations), rng.choice(docs)
        first = rng.choice(GRADES)
        for i, user in enumerate(("ann1", "ann2", "ann3")[:rng.choice((2, 3))]):
            grade = first if i == 0 or rng.random() > 0.2 else rng.choice(GRADES)
            Labels(ws).record(user=user, schema=schema, query_key=partial.query_key,
                              query_text="q", doc_id=doc, grade=grade, note=f"note {i}")
        chosen.append((schema, partial.query_key, doc))
    print(f"{len(Labels(ws).find()):,} labels on {items:,} items of {schema} written in "
          f"{time.perf_counter() - start:.1f} s")
    curator = User("cur", Role.CURATOR)
    for d in disagreements(ws)[::2]:
        adjudicate(ws, *d.item, rng.choice(GRADES), "benchmark", user=curator)
    return schema, chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_workspace(args.workspace, Path(tmp) / "ws")
        with Workspace.open(root) as ws:
            schema, chosen = fill(ws, args.items, args.seed)
            found = timed("disagreements()", lambda: disagreements(ws))
            open_items = sum(not d.resolved for d in found)
            print(f"  {len(found):,} disagreements, {open_items:,} open")
            finals = timed("final_grades()", lambda: final_grades(ws))
            print(f"  {len(finals):,} items with a final grade")
            labels = Labels(ws).find()
            for fmt in ("csv", "jsonl"):
                out = Path(tmp) / f"labels.{fmt}"
                timed(f"export {len(labels):,} labels with final grades ({fmt})",
                      lambda out=out: export_labels_with_final_grades(ws, labels, out))
            sch = ws.schemas()[schema]
            item = chosen[0]
            text = Documents(ws).rows_by_id([item[2]])[item[2]].text
            partial = timed("item_relation (one item)", lambda: item_relation(ws, sch, item[1]))
            start = time.perf_counter()
            spans = item_spans(ws, sch, partial, item[2], text, EntityMatcher())
            print(f"{'item_spans, new matcher (cold)':<48} "
                  f"{(time.perf_counter() - start) * 1000:9.1f} ms ({len(spans)} spans)")
            matcher = EntityMatcher()
            item_spans(ws, sch, partial, item[2], text, matcher)
            timed("item_spans, warm matcher", lambda: item_spans(ws, sch, partial, item[2],
                                                                 text, matcher))


if __name__ == "__main__":
    main()
