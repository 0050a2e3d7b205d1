"""The PubMed client against a hostile E-utilities server (issue 42): what it keeps, how long it
waits, how much memory it spends, how fast it asks, with the client's default limits.

Each case runs on the loopback server of tests/eutils_server.py and prints one row:

- ``extra records``: an efetch for 1 PMID answered with 4 records (3 unasked, 1 forged copy);
  documents kept and files cached;
- ``20,000 ids``: an esearch asked for 200 answered with 20,000 ids; ids kept, documents a
  search (``find_and_import``) imports and its time;
- ``14,000 copies``: an efetch for 1 PMID answered with 14,000 copies of its record; documents
  kept and the time;
- ``trickle``: an answer sent one byte every ``--trickle-s`` seconds; the time until the client
  gives up (its deadline, ``--deadline``, default the client's own);
- ``huge body``: an answer of ``--huge-mb`` MB without Content-Length; the time until refused
  and the peak RSS growth of this process;
- ``3 processes``: three processes searching at once with one workspace cache; requests in the
  busiest second (NCBI's limit without an API key: 3).

Usage:
    python benchmarks/pubmed_hostile.py                # defaults: deadline 120 s, 200 MB
    python benchmarks/pubmed_hostile.py --deadline 10  # a quicker trickle case
"""

from __future__ import annotations

import argparse
import logging
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from eutils_server import EutilsServer, Fault, synthetic_corpus  # noqa: E402

from curation.pubmed.search import SearchTracker, find_and_import  # noqa: E402
from curation.store.documents import Documents  # noqa: E402
from curation.store.workspace import Workspace  # noqa: E402
from kb_sources.errors import CurationError  # noqa: E402
from kb_sources.eutils import DEFAULT_DEADLINE_S  # noqa: E402
from kb_sources.fetch import EntrezSettings, Throttle, esearch, fetch_pubmed  # noqa: E402

EMAIL = "bench@example.org"
ASKED = "99200016"
UNASKED = ("99200001", "99200002", "99200003")
CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from kb_sources.fetch import EntrezSettings, esearch
    base, cache, go = sys.argv[1:4]
    settings = EntrezSettings(email="a@b.org", base_url=base, cache_dir=Path(cache))
    Path(go + "." + sys.argv[4]).touch()
    while not Path(go).exists():
        time.sleep(0.002)
    for _ in range(3):
        esearch("BRAF", settings)
""")


def rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def extra_records(tmp: Path) -> str:
    with EutilsServer() as server:
        server.faults.append(Fault("extra", endpoint="efetch.fcgi", pmids=(*UNASKED, ASKED)))
        settings = EntrezSettings(email=EMAIL, base_url=server.base_url, cache_dir=tmp / "c1")
        docs = list(fetch_pubmed([ASKED], settings))
    cached = sorted(p.stem for p in (tmp / "c1" / "pubmed").glob("*.xml"))
    return f"asked 1, answered 5: kept {len(docs)} ({docs[0].doc_id}), cached {cached}"


def many_ids(tmp: Path) -> str:
    records = synthetic_corpus(20_000)
    ids = tuple(r.pmid for r in records)
    with EutilsServer(records) as server, Workspace.init(tmp / "ws") as ws:
        server.faults.append(Fault("ids", endpoint="esearch.fcgi", pmids=ids,
                                   tags={"Count": "20000"}))
        settings = EntrezSettings(email=EMAIL, base_url=server.base_url, cache_dir=tmp / "c2")
        start = time.perf_counter()
        done = find_and_import(ws, "PO", "bench", "BRAF", settings=settings, actor="bench",
                               max_hits=200, tracker=SearchTracker(),
                               throttle=Throttle.for_settings(settings))
        took = time.perf_counter() - start
        docs = Documents(ws).counts()[0]
        efetches = len(server.requests("efetch.fcgi"))
    return (f"retmax 200, answered 20,000: kept {len(done.found.ids)} ids, {efetches} efetch "
            f"request(s), {docs} documents in the workspace, {took:.1f} s")


def copies(tmp: Path) -> str:
    with EutilsServer() as server:
        server.faults.append(Fault("extra", endpoint="efetch.fcgi", pmids=(ASKED,) * 14_000))
        settings = EntrezSettings(email=EMAIL, base_url=server.base_url, cache_dir=tmp / "c3")
        start = time.perf_counter()
        try:
            docs = list(fetch_pubmed([ASKED], settings))
            what = f"kept {len(docs)}"
        except CurationError as exc:
            what = f"refused: {str(exc)[:90]}"
        took = time.perf_counter() - start
    return f"asked 1, answered 14,001 copies: {what}, {took:.1f} s"


def trickle(deadline: float, every: float) -> str:
    with EutilsServer() as server:
        server.faults.append(Fault("trickle", seconds=every))
        settings = EntrezSettings(email=EMAIL, base_url=server.base_url, deadline=deadline)
        start = time.perf_counter()
        try:
            esearch("BRAF", settings)
            what = "answered"
        except CurationError as exc:
            what = f"gave up: {str(exc)[:80]}"
        took = time.perf_counter() - start
        sent = len(server.requests())
    return f"1 byte every {every:g} s, deadline {deadline:g} s: {what} after {took:.1f} s, " \
           f"{sent} request(s)"


def huge(mb: int) -> str:
    before = rss_mb()
    with EutilsServer() as server:
        server.faults.append(Fault("huge", endpoint="efetch.fcgi", size=mb << 20, declare=False))
        settings = EntrezSettings(email=EMAIL, base_url=server.base_url)
        start = time.perf_counter()
        try:
            list(fetch_pubmed([ASKED], settings))
            what = "read"
        except CurationError as exc:
            what = f"refused: {str(exc)[:70]}"
        took = time.perf_counter() - start
    return f"{mb} MB, no Content-Length: {what} after {took:.2f} s, peak RSS +" \
           f"{rss_mb() - before:.0f} MiB"


def processes(tmp: Path) -> str:
    go = tmp / "go"
    with EutilsServer() as server:
        children = [subprocess.Popen([sys.executable, "-c", CHILD, server.base_url,
                                      str(tmp / "c4"), str(go), str(n)], cwd=REPO)
                    for n in range(3)]
        while len(list(tmp.glob("go.*"))) < 3:
            time.sleep(0.01)
        start = time.perf_counter()
        go.touch()
        codes = [c.wait(timeout=120) for c in children]
        took = time.perf_counter() - start
        busiest, total = server.max_rate(1.0), len(server.requests())
    return f"3 x 3 esearch at once (rc {codes}): {total} requests in {took:.1f} s, busiest " \
           f"second {busiest} (limit 3)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S,
                        help="the client's deadline for the trickle case (default: its own)")
    parser.add_argument("--trickle-s", type=float, default=5.0)
    parser.add_argument("--huge-mb", type=int, default=200)
    parser.add_argument("--quiet", action="store_true", help="only the table")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR if args.quiet else logging.WARNING)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for name, case in (("extra records", lambda: extra_records(tmp)),
                           ("20,000 ids", lambda: many_ids(tmp)),
                           ("14,000 copies", lambda: copies(tmp)),
                           ("3 processes", lambda: processes(tmp)),
                           ("huge body", lambda: huge(args.huge_mb)),
                           ("trickle", lambda: trickle(args.deadline, args.trickle_s))):
            rows.append((name, case()))
            if not args.quiet:
                print(f"{name:>14} | {rows[-1][1]}", flush=True)
    if args.quiet:
        for name, text in rows:
            print(f"{name:>14} | {text}")


if __name__ == "__main__":
    main()
