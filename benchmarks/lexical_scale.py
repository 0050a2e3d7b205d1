"""Lexical search at scale: bm25s (the ``bm25`` retriever) against Tantivy (``tantivy``), same run.

Same synthetic corpus as ``benchmarks/bm25_scaling.py`` (pool abstracts, then sentence mixes of
three of them, seeded), same tokenizer (the project's), both through their retriever classes as
the product uses them. For each size and engine, two child processes:

* **build**: generate the corpus, ``index`` it (bm25s: tokenize + build its sparse matrix;
  Tantivy: tokenize + write and merge segments), ``save`` it; prints build and save time, the
  process's peak resident memory (the corpus text included) and the index size on disk;
* **serve**: ``load_retriever`` the saved folder in a fresh process (as the app or a worker does),
  then time ``--queries`` one-at-a-time searches (k = ``--k``); prints load time, resident memory
  after load and after the queries, query p50 / p95, and writes the top-10 of each query so the
  parent prints how far the two engines' rankings agree (mean top-10 overlap).

Queries are entity-centred, built from real CIViC evidence rows: ``GENE VARIANT DISEASE [DRUG]``
(``BRAF V600E Melanoma Vemurafenib``), seeded. Then each engine's figures are projected to
``--target`` documents (36M, all of PubMed): time, disk and memory linearly; query p50 linearly
and with the growth exponent fitted between the two largest sizes measured.

Tantivy is an optional extra (``pip install 'kbcurate[scale]'``); without it only bm25s runs.

``--keep`` leaves the saved indexes in ``--tmp``; ``--compare A,B`` then loads them side by side
and times the same queries on each, interleaved, so that other jobs on the machine slow both alike.

Usage:
    python benchmarks/lexical_scale.py --sizes 100k,1M
    python benchmarks/lexical_scale.py --sizes 1M --keep --tmp /tmp/lex
    python benchmarks/lexical_scale.py --compare /tmp/lex/bm25s-1000000,/tmp/lex/tantivy-1000000
    python benchmarks/lexical_scale.py --sizes 20k --queries 50 --engines tantivy   # quick
"""

from __future__ import annotations

import argparse
import csv
import gc
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bm25_scaling import folder_mb, load_pool, parse_size, peak_rss_mb, rss_mb, synth_corpus

ENGINES = {"bm25s": "bm25", "tantivy": "tantivy"}  # engine -> registered retriever name
CIVIC = "civic/01-Aug-2021-ClinicalEvidenceSummaries.tsv.gz"


def entity_queries(data_dir: Path, n: int, seed: int) -> list[str]:
    """``n`` distinct ``GENE VARIANT DISEASE [DRUG]`` queries from CIViC evidence rows."""
    with gzip.open(data_dir / CIVIC, "rt", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    rng = np.random.default_rng(seed)
    seen: dict[str, None] = {}
    for i in rng.permutation(len(rows)):
        row = rows[int(i)]
        drug = (row.get("drugs") or "").split(",")[0].strip()
        text = " ".join(x for x in (row["gene"], row["variant"], row["disease"], drug) if x)
        seen.setdefault(text, None)
        if len(seen) == n:
            break
    return list(seen)


def child_build(engine: str, size: int, folder: Path, args: argparse.Namespace) -> dict:
    from retrievers import build_retriever

    pool = load_pool(Path(args.data))
    t0 = time.perf_counter()
    docs = synth_corpus(pool, size, args.seed)
    gen_s = time.perf_counter() - t0
    del pool
    base = rss_mb()
    retriever = build_retriever(ENGINES[engine])
    t0 = time.perf_counter()
    retriever.index(((str(30_000_000 + i), d) for i, d in enumerate(docs)), progress=False)
    if engine == "bm25s":
        retriever._scorer()  # bm25s builds its matrix lazily: count it in the build
    build_s = time.perf_counter() - t0
    built_rss = rss_mb()
    del docs
    gc.collect()
    t0 = time.perf_counter()
    retriever.save(folder)
    save_s = time.perf_counter() - t0
    return {"engine": engine, "docs": size, "generate_s": gen_s, "build_s": build_s,
            "docs_per_s": size / build_s, "save_s": save_s, "build_rss_mb": built_rss - base,
            "build_peak_mb": peak_rss_mb(), "disk_mb": folder_mb(folder)}


def child_serve(engine: str, folder: Path, args: argparse.Namespace) -> dict:
    from retrievers import load_retriever

    queries = entity_queries(Path(args.data), args.queries, args.seed)
    base = rss_mb()
    t0 = time.perf_counter()
    retriever = load_retriever(folder)
    load_s = time.perf_counter() - t0
    loaded_rss = rss_mb()
    for q in queries[:5]:
        retriever.search(q, k=args.k)  # warm
    times, tops = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = retriever.search(q, k=args.k)
        times.append((time.perf_counter() - t0) * 1000)
        tops.append([h.doc_id for h in hits[:10]])
    return {"load_s": load_s, "serve_rss_mb": loaded_rss - base,
            "rss_after_queries_mb": rss_mb() - base, "queries": len(queries),
            "p50_ms": float(np.percentile(times, 50)), "p95_ms": float(np.percentile(times, 95)),
            "tops": tops}


def compare(folders: list[Path], args: argparse.Namespace) -> None:
    """Load saved indexes side by side and time the same queries on each, interleaved (query by
    query, rotating the order), so that the other jobs on the machine slow each engine alike."""
    from retrievers import load_retriever

    queries = entity_queries(Path(args.data), args.queries, args.seed)
    loaded = {}
    for folder in folders:
        before, t0 = rss_mb(), time.perf_counter()
        loaded[folder] = load_retriever(folder)
        print(f"{folder}: {len(loaded[folder]):,} documents, loaded in "
              f"{time.perf_counter() - t0:.1f} s, +{rss_mb() - before:.0f} MB", flush=True)
        for q in queries[:5]:
            loaded[folder].search(q, k=args.k)
    times: dict[Path, list[float]] = {f: [] for f in folders}
    for n, q in enumerate(queries):
        for folder in folders[n % len(folders):] + folders[:n % len(folders)]:
            t0 = time.perf_counter()
            loaded[folder].search(q, k=args.k)
            times[folder].append((time.perf_counter() - t0) * 1000)
    for folder, ms in times.items():
        print(f"{folder}: p50 {np.percentile(ms, 50):.2f} ms, p95 {np.percentile(ms, 95):.2f} "
              f"ms over {len(ms)} queries, k={args.k} (load {os.getloadavg()[0]:.2f})",
              flush=True)


def run_child(args: argparse.Namespace) -> None:
    folder = Path(args.folder)
    out = (child_build(args.engine, parse_size(args.child_size), folder, args)
           if args.child == "build" else child_serve(args.engine, folder, args))
    print("RESULT " + json.dumps(out), flush=True)


def spawn(args: argparse.Namespace, *extra: str) -> dict:
    cmd = [sys.executable, __file__, "--data", args.data, "--seed", str(args.seed),
           "--queries", str(args.queries), "--k", str(args.k), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"child {' '.join(extra)} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    shared = [len(set(x) & set(y)) / max(1, min(len(x), len(y), 10))
              for x, y in zip(a, b, strict=True) if x and y]
    return float(np.mean(shared)) if shared else float("nan")


def project(rows: list[dict], target: int) -> dict:
    """Linear projection of the largest size to ``target``; p50 also by a fitted exponent."""
    last = rows[-1]
    scale = target / last["docs"]
    exponent = 1.0
    if len(rows) >= 2 and rows[-2]["p50_ms"] > 0:
        prev = rows[-2]
        exponent = math.log(last["p50_ms"] / prev["p50_ms"]) / math.log(last["docs"] / prev["docs"])
    return {"build_h": last["build_s"] * scale / 3600, "disk_gb": last["disk_mb"] * scale / 1024,
            "serve_rss_gb": last["serve_rss_mb"] * scale / 1024,
            "build_rss_gb": last["build_rss_mb"] * scale / 1024,
            "p50_linear_ms": last["p50_ms"] * scale, "p50_exponent": exponent,
            "p50_fitted_ms": last["p50_ms"] * scale ** max(exponent, 0.0)}


def available(engine: str) -> bool:
    from importlib.util import find_spec

    return engine == "bm25s" or find_spec("tantivy") is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k,1M")
    parser.add_argument("--engines", default="bm25s,tantivy")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--target", default="36M")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--data", default=os.environ.get("KBCURATE_DATA", "../shared/data"))
    parser.add_argument("--tmp", default="/tmp/lexical_scale", help="where indexes are saved")
    parser.add_argument("--keep", action="store_true", help="keep the saved indexes")
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--compare", help="FOLDER,FOLDER,...: time saved indexes side by side "
                                          "(interleaved queries) instead of building")
    parser.add_argument("--child", choices=("build", "serve"), help=argparse.SUPPRESS)
    parser.add_argument("--child-size", help=argparse.SUPPRESS)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return
    if args.compare:
        compare([Path(f) for f in args.compare.split(",")], args)
        return
    engines = [e for e in args.engines.split(",") if available(e)]
    skipped = sorted(set(args.engines.split(",")) - set(engines))
    print(f"load {os.getloadavg()[0]:.2f}; engines {', '.join(engines)}"
          + (f" ({', '.join(skipped)} not installed)" if skipped else "")
          + f"; {args.queries} entity queries, k={args.k}", flush=True)
    head = (f"{'engine':<8} {'docs':>10} {'build s':>8} {'docs/s':>7} {'save s':>7} "
            f"{'peak MB':>8} {'disk MB':>8} {'load s':>7} {'serve MB':>8} {'p50 ms':>7} "
            f"{'p95 ms':>7}")
    print(head, flush=True)
    results: dict[str, list[dict]] = {e: [] for e in engines}
    for size in (parse_size(s) for s in args.sizes.split(",")):
        tops = {}
        for engine in engines:
            folder = Path(args.tmp) / f"{engine}-{size}"
            shutil.rmtree(folder, ignore_errors=True)
            row = spawn(args, "--child", "build", "--engine", engine, "--child-size", str(size),
                        "--folder", str(folder))
            row.update(spawn(args, "--child", "serve", "--engine", engine,
                             "--folder", str(folder)))
            tops[engine] = row.pop("tops")
            results[engine].append(row)
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
            print(f"{engine:<8} {size:>10,} {row['build_s']:>8.1f} {row['docs_per_s']:>7.0f} "
                  f"{row['save_s']:>7.1f} {row['build_peak_mb']:>8.0f} {row['disk_mb']:>8.0f} "
                  f"{row['load_s']:>7.2f} {row['serve_rss_mb']:>8.0f} {row['p50_ms']:>7.2f} "
                  f"{row['p95_ms']:>7.2f}  (load {os.getloadavg()[0]:.2f})", flush=True)
        if len(tops) == 2:
            print(f"  mean top-10 overlap bm25s/tantivy at {size:,}: "
                  f"{overlap(tops['bm25s'], tops['tantivy']):.3f}", flush=True)
    target = parse_size(args.target)
    projections = {}
    for engine, rows in results.items():
        p = projections[engine] = project(rows, target)
        print(f"{engine} projected to {target:,}: build {p['build_h']:.1f} h, disk "
              f"{p['disk_gb']:.0f} GB, resident {p['serve_rss_gb']:.1f} GB serving ("
              f"{p['build_rss_gb']:.0f} GB growth while building), p50 "
              f"{p['p50_linear_ms']:.0f} ms linear / "
              f"{p['p50_fitted_ms']:.0f} ms at the measured growth N^{p['p50_exponent']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": results, "projections": projections},
                                             indent=2))


if __name__ == "__main__":
    main()
