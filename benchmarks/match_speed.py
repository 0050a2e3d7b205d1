"""Speed of entity matching: highlighting the top 50 abstracts, and g(e, d) over the pool.

Usage::

    python benchmarks/match_speed.py [--pool PATH] [--repeats 5]

Measures, for one PO relation (BRAF + V600E -> vemurafenib):

* highlight: spans of all three slots + escaped HTML for 50 abstracts that mention BRAF
  (cold: a fresh matcher and freshly compiled patterns, only the scispacy pipeline loaded
  beforehand as the app does once per process; warm: the same 50 again);
* g over the pool: g(e, d) for each of the three entities over every pool abstract (cold: a
  fresh matcher, includes preparing every document; warm: a second pass; plus a second
  relation on the warm cache).

Targets (issue): highlight <= 20 ms for 50 abstracts, g over 12,393 abstracts <= 1 s.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curation.matching.abbreviations import abbreviation_pipeline  # noqa: E402
from curation.matching.highlight import render_highlighted, slot_colours  # noqa: E402
from curation.matching.matcher import EntityMatcher, compile_entity  # noqa: E402
from curation.store.config import resolve_data_dir  # noqa: E402
from kb_sources.types import Document, Entity  # noqa: E402

RELATION = {
    "gene": (Entity("BRAF", "gene", "673", ("B-raf", "BRAF1", "B-Raf proto-oncogene")),),
    "variant": (Entity("V600E", "variant"),),
    "treatment": (Entity("vemurafenib", "drug", "", ("PLX4032", "Zelboraf", "RG7204")),),
}
SECOND = {
    "gene": (Entity("EGFR", "gene", "1956", ("epidermal growth factor receptor", "ERBB1")),),
    "variant": (Entity("L858R", "variant"),),
    "treatment": (Entity("gefitinib", "drug", "", ("Iressa", "ZD1839")),),
}


def load_pool(path: Path) -> list[Document]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [Document(r["pmid"], r.get("title") or "", r.get("abstract") or "") for r in rows]


def g_pass(matcher: EntityMatcher, relation: dict, docs: list[Document]) -> tuple[float, int]:
    entities = [e for ents in relation.values() for e in ents]
    start = time.perf_counter()
    complete = 0
    for doc in docs:
        text = doc.text
        complete += all([matcher.mentions(e, text) for e in entities])
    return time.perf_counter() - start, complete


def highlight_pass(matcher: EntityMatcher, docs: list[Document]) -> float:
    colours = slot_colours(RELATION)
    start = time.perf_counter()
    for doc in docs:
        spans = matcher.find_spans(RELATION, doc.text)
        render_highlighted(doc.title, doc.abstract, spans, colours)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=Path,
                        default=resolve_data_dir() / "abstract_pool" / "abstract_pool.jsonl.gz")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    docs = load_pool(args.pool)
    abbreviation_pipeline()  # loaded once per process (as in the app), not part of the timing
    probe = EntityMatcher()
    top = [d for d in docs if probe.mentions(RELATION["gene"][0], d.text)][:50]
    cold_h, warm_h, cold_g, warm_g, second_g = [], [], [], [], []
    for _ in range(args.repeats):
        compile_entity.cache_clear()  # cold: patterns compiled inside the timing
        matcher = EntityMatcher()
        cold_h.append(highlight_pass(matcher, top))
        warm_h.append(highlight_pass(matcher, top))
        compile_entity.cache_clear()
        matcher = EntityMatcher()
        elapsed, complete = g_pass(matcher, RELATION, docs)
        cold_g.append(elapsed)
        warm_g.append(g_pass(matcher, RELATION, docs)[0])
        second_g.append(g_pass(matcher, SECOND, docs)[0])
    ms = 1000.0
    print(f"pool: {len(docs)} abstracts; top-50 = first {len(top)} abstracts mentioning BRAF")
    print(f"highlight {len(top)} abstracts (3 slots, spans + HTML): "
          f"cold {statistics.median(cold_h) * ms:.1f} ms, warm {statistics.median(warm_h) * ms:.1f}"
          " ms (median of %d)" % args.repeats)
    print(f"g over the pool, BRAF + V600E + vemurafenib: cold {statistics.median(cold_g):.3f} s, "
          f"warm {statistics.median(warm_g):.3f} s; abstracts mentioning all three: {complete}")
    print(f"g over the pool, a second relation (EGFR + L858R + gefitinib) on the warm cache: "
          f"{statistics.median(second_g):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
