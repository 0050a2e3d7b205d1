"""Helpers for ``stress.py --import-docs N``: a synthetic JSONL file of N documents, the one
process that imports it while the labelers run, and the label figures for that time window.

The documents are PubMed-like: a PMID (``70000000 + i``, clear of the fixtures' ids), a title,
an abstract of about 1,200 characters (sentences of 8-26 words), a journal, a year and 3-8 MeSH
terms, all drawn from a word list made by a seeded random generator (Zipf-like word
frequencies), so the import reads, checks, hashes and writes as much as for real abstracts.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import string
import time
from pathlib import Path

FIRST_PMID = 70_000_000
ABSTRACT_CHARS = 1_200


def vocabulary(rng: random.Random, size: int = 6_000) -> tuple[list[str], list[float]]:
    """``size`` made-up lowercase words and cumulative Zipf weights for ``random.choices``."""
    words = sorted({"".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 12)))
                    for _ in range(size)})
    rng.shuffle(words)
    cum, total = [], 0.0
    for rank in range(len(words)):
        total += 1.0 / (rank + 1)
        cum.append(total)
    return words, cum


def _sentences(rng: random.Random, words: list[str], cum: list[float], chars: int) -> str:
    parts, size = [], 0
    while size < chars:
        sentence = " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(8, 26)))
        parts.append(sentence[0].upper() + sentence[1:] + ".")
        size += len(parts[-1]) + 1
    return " ".join(parts)


def write_docs(path: Path, n: int, seed: int = 0) -> int:
    """Write ``n`` synthetic documents as JSON Lines to ``path``; returns the file's bytes."""
    rng = random.Random(seed)
    words, cum = vocabulary(rng)
    journals = [_sentences(rng, words, cum, 1).rstrip(".").title()[:40] for _ in range(60)]
    mesh = sorted({w.capitalize() for w in rng.sample(words, 400)})
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            doc = {"pmid": str(FIRST_PMID + i),
                   "title": _sentences(rng, words, cum, 1)[:-1],
                   "abstract": _sentences(rng, words, cum,
                                          int(rng.gauss(ABSTRACT_CHARS - 80, 120)))[:1_600],
                   "journal": rng.choice(journals), "year": rng.randint(1990, 2025),
                   "mesh": rng.sample(mesh, rng.randint(3, 8))}
            out.write(json.dumps(doc) + "\n")
    return path.stat().st_size


def importer(root: str, path: str, out: str, ready: mp.synchronize.Barrier) -> None:
    """Import ``path`` once every process is ready; write the outcome to ``out`` (JSON)."""
    from curation.store.importer import import_file
    from curation.store.workspace import Workspace

    with Workspace.open(root) as ws:
        ready.wait()
        start = time.time()
        try:
            report = import_file(ws, "docs", "jsonl", path, progress=False)
            result = {"completed": True, "added": report.documents_added, "error": ""}
        except Exception as exc:  # noqa: BLE001 - reported and checked, not raised
            result = {"completed": False, "added": 0, "error": f"{type(exc).__name__}: {exc}"}
        result.update(start=start, end=time.time())
    Path(out).write_text(json.dumps(result), encoding="utf-8")


def read_result(out: Path, exitcode: int | None) -> dict:
    """The importer's outcome; not completed when it wrote none (killed, crashed)."""
    if out.exists():
        return json.loads(out.read_text(encoding="utf-8"))
    return {"completed": False, "added": 0, "start": 0.0, "end": 0.0,
            "error": f"import process ended with exit code {exitcode} and no result"}


def during(writes: list[list[tuple]], result: dict) -> dict:
    """Acknowledged label calls whose time overlapped the import: latencies and pending count.

    A writer row is ``(outcome, seconds, detail, started)``; ``started`` is ``time.time()``.
    """
    start, end = result["start"], result["end"]
    calls = [(o, s) for w in writes for o, s, _, t in w
             if o in ("ok", "pending") and t < end and t + s > start]
    return {"latency": [s for _, s in calls], "pending": sum(o == "pending" for o, _ in calls)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def table_and_checks(result: dict, n: int, fixture_docs: int, documents: int,
                     writes: list[list[tuple]]) -> tuple[list[tuple[str, str]], dict[str, bool]]:
    """The import's rows for the printed table and its checks (name -> passed)."""
    seconds = max(result["end"] - result["start"], 1e-9)
    calls = during(writes, result)
    lat = calls["latency"]
    last = max((t + s for w in writes for _, s, _, t in w), default=result["start"])
    covered = min(1.0, max(0.0, last - result["start"]) / seconds)
    p99 = percentile(lat, .99)
    target = "met" if lat and p99 < 1.0 else "NOT met" if lat else "no calls to judge"
    rows = [
        ("import: documents / wall time / rate",
         f"{n:,} / {seconds:.1f} s / {n / seconds:,.0f} documents/s"),
        ("import completed", "yes" if result["completed"] else f"no ({result['error'][:160]})"),
        ("documents in the workspace", f"{documents:,} (expected {fixture_docs:,} fixtures + "
                                       f"{n:,} = {fixture_docs + n:,})"),
        ("label calls during the import (kept in outbox)",
         f"{len(lat):,} ({calls['pending']:,}); labelers ran for {covered:.0%} of the import"),
        ("label latency during the import p50 / p99 / max",
         f"{percentile(lat, .5) * 1000:.0f} / {p99 * 1000:.0f} / "
         f"{max(lat, default=0) * 1000:.0f} ms (issue 12: p99 < 1,000 ms: {target})"),
    ]
    checks = {"import completed": bool(result["completed"]),
              "documents == fixtures + imported": documents == fixture_docs + n}
    return rows, checks
