"""Time to a usable model version (issue 26 item 7): from the Activate request to the version
serving searches.

Works in a **copy** of the workspace (its database through SQLite's online backup, its schema,
ranker and margin files; never the original, whose registry and settings stay as they are). In
the copy it registers the weights of ``--version`` again as a new version: a new id, so none of
its vectors are cached and the whole corpus is encoded, as for a freshly trained version. With
``--backend`` the copy's encoding default is set first (what ``kbcurate bench --backends
--set-default`` stores). Then, as the app's Activate button does:

1. ``start_activation`` (the request: role and reason checks, the job queued): its wall time;
2. the ``activate`` job in a worker process, followed every second until it ends (its progress
   messages are printed every ``--every`` seconds): the time to the switch and the job's
   figures (documents, encoded, documents/s, backend);
3. the first search with "dense · active" pinned to the schema's active version (loading the
   index and the model, one query): the time until the new version serves searches.

Usage:
    python benchmarks/activation_bench.py -w /work/demo-ws --version disease_gene-edel@1
    python benchmarks/activation_bench.py -w WS --version V --backend openvino/int8
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from curation.store.models import Models

QUERY = "Genes associated with breast cancer?"


def clone(source: Path, dest: Path) -> None:
    """The workspace's database (no jobs) and its schema, margin and ranker folders, into
    ``dest``."""
    from curation.store.transfer import clone_database
    from curation.store.workspace import DB_NAME, Workspace

    dest.mkdir(parents=True)
    with Workspace.open(source) as ws:
        clone_database(ws, dest / DB_NAME, empty=("jobs",))
    for sub in ("schemas", "margins", "rankers"):
        if (source / sub).is_dir():
            shutil.copytree(source / sub, dest / sub)


def run(args: argparse.Namespace) -> dict:
    from curation.access.users import Role, User
    from curation.jobs.queue import get_job
    from curation.search.choices import parse_retriever_choice
    from curation.search.indexing import get_index, set_default_backend
    from curation.store.workspace import Workspace
    from curation.training.activation import start_activation

    admin = User("bench", Role.ADMIN)
    source = Path(args.workspace).resolve()
    dest = Path(tempfile.mkdtemp(prefix="activation-bench-", dir=args.tmp)) / "ws"
    started = time.perf_counter()
    clone(source, dest)
    print(f"copied {source} -> {dest} in {time.perf_counter() - started:.1f} s", flush=True)
    with Workspace.open(source) as ws:
        original = Models(ws).get(args.version)
    with Workspace.open(dest) as ws:
        if args.backend:
            set_default_backend(ws, *args.backend.split("/"), actor="bench")
        fresh = Models(ws).register(schema=original.schema, recipe=original.recipe,
                                    base_model=original.base_model, model_dir=original.model_dir,
                                    manifest={k: v for k, v in original.manifest.items()
                                              if k not in ("files", "sha256", "id")},
                                    created_by="bench")
        before = Models(ws).active(fresh.schema)
        print(f"registered {fresh.id} (weights of {original.id}); active: "
              f"{before.id if before else 'none'}; load {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs", flush=True)
        clicked = time.perf_counter()
        job = start_activation(ws, admin, fresh.id, "activation benchmark")
        request_s = time.perf_counter() - clicked
        print(f"request returned in {request_s * 1000:.0f} ms: job {job.id} {job.status.value}",
              flush=True)
        said = 0.0
        while not job.finished:
            time.sleep(1.0)
            job = get_job(ws, job.id)
            if time.perf_counter() - said >= args.every:
                said = time.perf_counter()
                print(f"  {said - clicked:7.0f} s  {job.progress:5.1%}  {job.message}",
                      flush=True)
        switched_s = time.perf_counter() - clicked
        if job.error:
            raise SystemExit(f"job {job.id} {job.status.value}: {job.error}")
        name, options = parse_retriever_choice("dense · active", ws=ws, schema=fresh.schema)
        hits = get_index(ws, name, options, progress=False).search(QUERY, 10)
        serving_s = time.perf_counter() - clicked
        figures = {"documents": job.result["documents"], "encoded": job.result["encoded"],
                   "backend": job.result["backend"], "docs_per_s": job.result["docs_per_s"],
                   "dense_s": job.result["dense_s"], "hybrid_s": job.result["hybrid_s"],
                   "request_ms": round(request_s * 1000, 1), "switched_s": round(switched_s, 1),
                   "serving_s": round(serving_s, 1), "first_hit_by": hits[0].retriever,
                   "active_now": Models(ws).active(fresh.schema).id, "copy": str(dest),
                   "load_end": round(os.getloadavg()[0], 1), "cpus": os.cpu_count()}
    if not args.keep:
        shutil.rmtree(dest.parent, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", "-w", required=True, help="the workspace to copy")
    parser.add_argument("--version", required=True, help="whose weights the new version gets")
    parser.add_argument("--backend", help="encoding default of the copy, e.g. openvino/int8")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between progress lines")
    parser.add_argument("--tmp", help="folder for the copy (default: the system's temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the copy")
    figures = run(parser.parse_args())
    print(json.dumps(figures, indent=2))
    minutes = figures["serving_s"] / 60
    print(f"request {figures['request_ms']:.0f} ms; serving searches after {minutes:.1f} min "
          f"({figures['documents']:,} documents, {figures['docs_per_s']} documents/s, "
          f"{figures['backend']})")


if __name__ == "__main__":
    main()
