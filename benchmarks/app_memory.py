"""Resident memory of the app's retrievers: libraries, each loaded index, its model after a query.

Loads retrievers the way the app does (``app_pages/common.py`` ``get_retriever``: the menu
entry's index folder from ``curation.search.choices.index_location``, then
``retrievers.registry.load_retriever``), without Streamlit, and prints the process's resident set
size (RSS) after each step: Python, the retrieval libraries (torch, sentence-transformers,
faiss, bm25s), the app's UI libraries (streamlit, pandas, plotly), then per retriever the loaded
index and the first query (which loads the encoder's weights). Never builds an index: a menu
entry whose index is not built is reported and skipped (build it with ``kbcurate index``).

Usage:
    python benchmarks/app_memory.py -w /tmp/demo_ws --schema disease_gene
    python benchmarks/app_memory.py -w WS --retriever bm25 --retriever "dense · active"
    python benchmarks/app_memory.py -w WS --folder WS/indexes/dense-a4e7a7d1da   # a saved index
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from curation.store.models import Models

QUERY = "Genes associated with breast cancer?"


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB (psutil, else /proc)."""
    try:
        import psutil

        info = psutil.Process().memory_info()
        peak = getattr(info, "peak_wset", None)  # Windows only; /proc below elsewhere
        current = info.rss / 2**20
    except ImportError:
        current, peak = None, None
    status = Path("/proc/self/status")
    fields = {}
    if status.is_file():
        for line in status.read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024  # kB -> MB
    current = current if current is not None else fields.get("VmRSS", float("nan"))
    peak = peak / 2**20 if peak else fields.get("VmHWM", float("nan"))
    return current, peak


def folder_mb(folder: Path) -> float:
    """Size of the files of a saved index in MB."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


class Report:
    """Prints one line per step: RSS, its change since the previous step, and a note."""

    def __init__(self) -> None:
        self.last = rss_mb()[0]
        print(f"{'step':<44} {'RSS MB':>8} {'+MB':>8}  note")

    def step(self, name: str, note: str = "") -> None:
        now = rss_mb()[0]
        print(f"{name[:44]:<44} {now:>8.0f} {now - self.last:>+8.0f}  {note}", flush=True)
        self.last = now


def choices_to_folders(ws: object, schema: str | None, choices: list[str]
                       ) -> list[tuple[str, Path]]:
    """(label, index folder) per app menu entry, as the app resolves it."""
    from curation.search.choices import (
        index_location,
        parse_retriever_choice,
        resolve_retriever_choice,
    )

    out = []
    for choice in choices:
        pinned = resolve_retriever_choice(ws, schema, choice) if schema else choice
        name, options = parse_retriever_choice(pinned)
        out.append((pinned, index_location(ws, name, options)))
    return out


def default_choices(ws: object, schema: str | None) -> list[str]:
    """bm25 and dense (over the schema's active version when it has one)."""

    active = Models(ws).active(schema) if schema else None
    return ["bm25", "dense · active" if active is not None else "dense"]


def main(argv: list[str] | None = None) -> None:
    """Parse options, load each retriever, print the memory table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", "-w", default=os.environ.get("KBCURATE_WORKSPACE"))
    parser.add_argument("--schema", help="schema whose active version 'dense · active' means")
    parser.add_argument("--retriever", action="append", default=[], metavar="CHOICE",
                        help="app menu entry (repeatable): bm25, dense, 'dense · active', "
                             "'hybrid · disease_gene-edel@2' ...; default bm25 + dense")
    parser.add_argument("--folder", action="append", default=[], type=Path,
                        help="a saved index folder to load as well (repeatable)")
    args = parser.parse_args(argv)
    report = Report()
    report.step("python", "interpreter and argparse")
    import bm25s  # noqa: F401
    import faiss  # noqa: F401
    import sentence_transformers  # noqa: F401
    import torch  # noqa: F401

    from curation.store.workspace import Workspace
    from retrievers.registry import load_retriever

    report.step("+ torch, sentence-transformers, faiss, bm25s", "the retrieval libraries")
    import pandas  # noqa: F401
    import plotly.express  # noqa: F401
    import streamlit  # noqa: F401

    report.step("+ streamlit, pandas, plotly", "the app's UI libraries")
    targets: list[tuple[str, Path]] = []
    if args.workspace:
        with Workspace.open(args.workspace) as ws:
            choices = args.retriever or ([] if args.folder else default_choices(ws, args.schema))
            targets = choices_to_folders(ws, args.schema, choices)
    targets += [(f"folder {f.name}", f) for f in args.folder]
    keep = []  # every retriever stays loaded, as in the app's cache
    for label, folder in targets:
        if not folder.is_dir():
            print(f"{label}: not built ({folder}); build it with kbcurate index", flush=True)
            continue
        start = time.perf_counter()
        retriever = load_retriever(folder)
        keep.append(retriever)
        report.step(f"+ load {label}", f"{len(retriever):,} docs, {folder_mb(folder):.0f} MB "
                                        f"on disk, {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        retriever.search(QUERY, k=50)
        report.step(f"  + first query {label}", f"{(time.perf_counter() - start) * 1000:.0f} ms "
                                                "(loads the encoder, if any)")
    current, peak = rss_mb()
    print(f"total RSS {current:.0f} MB, peak {peak:.0f} MB, {len(keep)} retriever(s) loaded")


if __name__ == "__main__":
    main()
