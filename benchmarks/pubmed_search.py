"""Search PubMed for a relation (issue 37, item 1): time from "Search PubMed" to ranked results,
and the request rate kept, against the loopback E-utilities of tests/eutils_server.py with a
realistic delay per request (default 0.3 s, NCBI's usual answer time).

For each hit count (default 200 and 1,000) a fresh workspace holds ``--background`` synthetic
abstracts (BM25 built), the fake PubMed holds that many synthetic BRAF V600E records, and

- ``service``: :func:`curation.pubmed.search.search_pubmed` in this process (what ``kbcurate
  pubmed search`` runs), with the time of each stage (found, fetched, imported, indexed+ranked);
- ``job`` (unless ``--no-job``): the app's path, a ``pubmed_search`` job submitted as the button
  does and followed until done (worker start-up included), in a second fresh workspace.

Then the requests per second the server saw: overall, and the most in any 1 s window, against
NCBI's limit (3/s, 10/s with ``--api-key``).

Usage:
    python benchmarks/pubmed_search.py
    python benchmarks/pubmed_search.py --hits 200,1000 --delay 0.3 --background 5000
    python benchmarks/pubmed_search.py --api-key KEY --no-job
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from eutils_server import EutilsServer, synthetic_corpus  # noqa: E402

from curation.access.users import Role, User  # noqa: E402
from curation.jobs.queue import wait_for_job  # noqa: E402
from curation.pubmed.jobs import submit_pubmed_search  # noqa: E402
from curation.pubmed.search import SearchProgress, search_pubmed  # noqa: E402
from curation.search.indexing import get_index  # noqa: E402
from curation.store.importer import import_items  # noqa: E402
from curation.store.workspace import Workspace  # noqa: E402
from kb_sources.fetch import EntrezSettings  # noqa: E402
from kb_sources.types import Document  # noqa: E402

SLOTS = {"gene": "BRAF", "variant": "V600E"}
WORDS = ("melanoma", "lung", "colon", "thyroid", "kinase", "therapy", "response", "cohort",
         "mutation", "resistance", "survival", "trial", "patients", "tumour", "inhibitor")


def background(n: int) -> list[Document]:
    """``n`` synthetic abstracts that never name BRAF V600E."""
    out = []
    for i in range(n):
        words = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 30))
        out.append(Document(f"97{i:06d}", f"Background study {i} of {WORDS[i % len(WORDS)]}.",
                            f"In cohort {i}, {words}.", source="bench"))
    return out


def workspace(root: Path, n: int) -> Workspace:
    ws = Workspace.init(root)
    import_items(ws, background(n), reader="docs:bench", path="background", progress=False)
    get_index(ws, "bm25", progress=False)
    return ws


def rates(server: EutilsServer) -> tuple[int, float, int]:
    """(requests, the shortest gap between two arrivals in s, most arrivals in any 1 s
    window)."""
    times = sorted(r.at for r in server.log)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    return len(times), min(gaps, default=0.0), server.max_rate(1.0)


def run_service(hits: int, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    with EutilsServer(synthetic_corpus(hits), delay=args.delay) as server:
        ws = workspace(tmp / f"service-{hits}", args.background)
        settings = EntrezSettings(email="bench@example.org", api_key=args.api_key,
                                  base_url=server.base_url, cache_dir=ws.root / "cache/entrez")
        marks: dict[str, float] = {}
        start = time.perf_counter()

        def seen(p: SearchProgress) -> None:
            marks[p.stage] = time.perf_counter() - start

        result = search_pubmed(ws, ws.schemas()["PO"], SLOTS, settings=settings, actor="bench",
                               max_hits=hits, progress=seen)
        total = time.perf_counter() - start
        ws.close()
        n, gap, window = rates(server)
    assert result.imported == hits, result
    return {"total": total, "found": marks["found"], "fetched": marks["fetched"],
            "imported": marks["imported"], "ranked": marks["ranked"], "requests": n,
            "gap": gap, "window": window, "top_from_pubmed": sum(
                h.from_pubmed for h in result.hits[:10])}


def run_job(hits: int, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    with EutilsServer(synthetic_corpus(hits), delay=args.delay) as server:
        os.environ["KBCURATE_EUTILS_URL"] = server.base_url
        ws = workspace(tmp / f"job-{hits}", args.background)
        start = time.perf_counter()
        job = submit_pubmed_search(ws, ws.schemas()["PO"], SLOTS, user=User("bench",
                                   Role.CURATOR), max_hits=hits)
        done = wait_for_job(ws, job.id, timeout=600, poll=0.1)
        total = time.perf_counter() - start
        ws.close()
        n, gap, window = rates(server)
    assert done.status.value == "done", done.error
    return {"total": total, "requests": n, "gap": gap, "window": window}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hits", default="200,1000", help="hit counts (comma-separated)")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds per request")
    parser.add_argument("--background", type=int, default=5000,
                        help="abstracts already in the workspace (default 5,000)")
    parser.add_argument("--api-key", help="send a key: the limit is 10/s instead of 3/s")
    parser.add_argument("--no-job", action="store_true", help="time the service only")
    args = parser.parse_args()
    os.environ.setdefault("NCBI_EMAIL", "bench@example.org")
    if args.api_key:
        os.environ["NCBI_API_KEY"] = args.api_key
    limit = 10 if args.api_key else 3
    print(f"loopback E-utilities, {args.delay:.2f} s per request; {args.background:,} "
          f"abstracts in the workspace; NCBI's limit {limit}/s; load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for hits in (int(h) for h in args.hits.split(",")):
            s = run_service(hits, args, Path(tmp))
            print(f"service, {hits:>5,} hits: {s['total']:6.2f} s to ranked results (found "
                  f"{s['found']:.2f}, fetched {s['fetched']:.2f}, imported {s['imported']:.2f}, "
                  f"indexed+ranked {s['ranked']:.2f}); {s['requests']:.0f} requests, "
                  f"{s['requests'] / s['total']:.2f}/s over the search, at most "
                  f"{s['window']:.0f} in any 1 s (limit {limit}), shortest gap "
                  f"{s['gap']:.3f} s; {s['top_from_pubmed']:.0f} of the top 10 from PubMed")
            if not args.no_job:
                j = run_job(hits, args, Path(tmp))
                print(f"job,     {hits:>5,} hits: {j['total']:6.2f} s from submit to done "
                      f"(worker start-up included); {j['requests']:.0f} requests, at most "
                      f"{j['window']:.0f} in any 1 s (limit {limit}), shortest gap "
                      f"{j['gap']:.3f} s")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
