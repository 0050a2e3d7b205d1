"""PubMed baseline import: documents/s, peak memory against the number of files, kill -9 and resume.

Writes a synthetic NLM-like corpus (``benchmarks/synthetic_baseline.py``: ``--files`` gzip files of
``--per-file`` citations, the last ``--updates`` of them update files with revisions and
deletions), then:

1. **Long run**: ``kbcurate import docs pubmed-baseline DIR -q`` in a child process, from an empty
   workspace, while this script samples the child's resident memory (``/proc/PID/status``) and
   the ledger (how many files are done) twice a second. Prints documents/s and the peak resident
   memory after 1, 2, 5, 10, ... files: flat memory means the peak does not grow with the count.
2. **kill -9 and resume** on the first ``--resume-files`` files: one clean import for reference;
   then an import killed (SIGKILL) half-way through file ``--kill-in``, a check that opening the
   workspace rolls that file back (documents = the files before it, exactly), and a rerun that
   must end with exactly the reference's documents (same ids and content hashes) and ledger.

Usage:
    python benchmarks/baseline_import.py --files 50 --per-file 20000
    python benchmarks/baseline_import.py --files 4 --per-file 2000 --resume-files 3 --kill-in 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from synthetic_baseline import Plan, write_corpus

from curation.store.baseline_files import BaselineFiles
from curation.store.documents import Documents
from curation.store.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB; zeros once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return 0.0, 0.0
    values = {ln.split(":")[0]: ln.split()[1] for ln in text.splitlines()
              if ln.startswith(("VmRSS", "VmHWM"))}
    return int(values.get("VmRSS", 0)) / 1024, int(values.get("VmHWM", 0)) / 1024


def ledger(root: Path) -> tuple[int, int]:
    """(files done, documents) of the workspace at ``root``, read without writing."""
    try:
        with Workspace.open(root, read_only=True) as ws:
            done = sum(r.status == "done" for r in BaselineFiles(ws).rows())
            return done, Documents(ws).counts()[0]
    except Exception:  # the database is being created or locked: try again at the next sample
        return -1, -1


def start_import(folder: Path, root: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "curation.cli.main", "import", "docs", "pubmed-baseline",
           str(folder), "-w", str(root), "-q"]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def fresh_workspace(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    Workspace.init(root).close()


def long_run(folder: Path, root: Path, files: int) -> dict:
    """Import everything while sampling memory; returns the figures."""
    fresh_workspace(root)
    t0 = time.perf_counter()
    proc = start_import(folder, root)
    peak_at: dict[int, float] = {}
    marks = sorted({1, 2, 5, 10, 20, 25, 30, 40, 50, 75, 100, files} & set(range(1, files + 1)))
    done = 0
    while proc.poll() is None:
        rss, hwm = rss_mb(proc.pid)
        done = max(done, ledger(root)[0])
        for m in marks:
            if done >= m and m not in peak_at:
                peak_at[m] = hwm
                print(f"  {m:>4} files done, {time.perf_counter() - t0:7.1f} s: process "
                      f"resident {rss:6.0f} MB, peak so far {hwm:6.0f} MB "
                      f"(load {os.getloadavg()[0]:.2f})", flush=True)
        time.sleep(0.5)
    seconds = time.perf_counter() - t0
    out, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"import failed:\n{err[-3000:]}")
    _, docs = ledger(root)
    records, in_files = _records(out)
    return {"seconds": seconds, "records": records, "documents": docs,
            "records_per_s": records / seconds, "import_s": in_files,
            "import_records_per_s": records / in_files, "peak_mb_at_files": peak_at,
            "summary": out.strip().splitlines()[-1]}


def _records(stdout: str) -> tuple[int, float]:
    """Citations read and seconds spent in the files, from the CLI's per-file lines
    (``NAME: +added ~updated =unchanged -deleted ... in S s``)."""
    total, seconds = 0, 0.0
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[1].startswith("+") and parts[2].startswith("~"):
            total += sum(int(p[1:]) for p in parts[1:4])
            seconds += float(parts[-2])
    return total, seconds


def resume_run(folder: Path, root: Path, kill_in: int, per_file: int) -> dict:
    """Kill -9 an import half-way through file ``kill_in``, reopen, resume; returns figures."""
    fresh_workspace(root)
    proc = start_import(folder, root)
    target = (kill_in - 1) * per_file + per_file // 2
    while proc.poll() is None:
        _, docs = ledger(root)
        if docs >= target:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.2)
    proc.wait()
    killed_at = ledger(root)
    with Workspace.open(root) as ws:  # opening rolls the killed import back
        after_open = Documents(ws).counts()[0]
        statuses = [(r.name, r.status) for r in BaselineFiles(ws).rows()]
    t0 = time.perf_counter()
    rerun = start_import(folder, root)
    out, err = rerun.communicate()
    if rerun.returncode:
        raise SystemExit(f"resume failed:\n{err[-3000:]}")
    return {"returncode": proc.returncode, "documents_when_killed": killed_at[1],
            "files_done_when_killed": killed_at[0], "documents_after_reopen": after_open,
            "ledger_after_reopen": statuses, "resume_s": time.perf_counter() - t0,
            "resume_summary": out.strip().splitlines()[-1]}


def snapshot(root: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str, int, int, int]]]:
    with Workspace.open(root, read_only=True) as ws:
        rows = [(r.name, r.status, r.added, r.updated, r.deleted)
                for r in BaselineFiles(ws).rows()]
        return Documents(ws).corpus_hashes(), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--per-file", type=int, default=20_000)
    parser.add_argument("--updates", type=int, default=2, help="update files among --files")
    parser.add_argument("--resume-files", type=int, default=4)
    parser.add_argument("--kill-in", type=int, default=3, help="file killed half-way")
    parser.add_argument("--skip-long", action="store_true", help="only kill -9 and resume")
    parser.add_argument("--tmp", type=Path, default=Path("/tmp/baseline_bench"))
    parser.add_argument("--data", default=os.environ.get("KBCURATE_DATA", "../shared/data"))
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    plan = Plan(args.files - args.updates, args.updates, args.per_file,
                revised=args.per_file // 20, deleted=args.per_file // 100)
    corpus = args.tmp / f"corpus-{args.files}x{args.per_file}"
    if not (corpus / "plan.json").is_file():
        t0 = time.perf_counter()
        expected = write_corpus(corpus, plan, Path(args.data))
        (corpus / "plan.json").write_text(json.dumps(expected))
        print(f"wrote {corpus} in {time.perf_counter() - t0:.0f} s: {expected}", flush=True)
    xml_mb = sum(p.stat().st_size for p in corpus.rglob("*.xml.gz")) / 2**20
    print(f"corpus {corpus}: {args.files} files x {args.per_file:,} citations, {xml_mb:.0f} MB "
          f"gzip; load {os.getloadavg()[0]:.2f}", flush=True)
    figures: dict[str, object] = {}
    if not args.skip_long:
        figures["long"] = long = long_run(corpus, args.tmp / "ws-long", args.files)
        print(f"long run: {long['records']:,} citations in {long['seconds']:.0f} s = "
              f"{long['records_per_s']:,.0f} documents/s with the CLI's start, "
              f"{long['import_records_per_s']:,.0f} in the files; {long['documents']:,} documents "
              f"in the workspace; peak MB by files done: {long['peak_mb_at_files']}", flush=True)
    subset = args.tmp / f"subset-{args.resume_files}"
    shutil.rmtree(subset, ignore_errors=True)
    (subset / "baseline").mkdir(parents=True)
    for path in sorted((corpus / "baseline").glob("*.xml.gz"))[: args.resume_files]:
        for link in (path, path.with_name(path.name + ".md5")):
            (subset / "baseline" / link.name).symlink_to(link)
    reference = args.tmp / "ws-reference"
    fresh_workspace(reference)
    subprocess.run([sys.executable, "-m", "curation.cli.main", "import", "docs",
                    "pubmed-baseline", str(subset), "-w", str(reference), "-q"], cwd=REPO,
                   check=True, capture_output=True)
    figures["resume"] = res = resume_run(subset, args.tmp / "ws-resume", args.kill_in,
                                         args.per_file)
    same = snapshot(reference) == snapshot(args.tmp / "ws-resume")
    res["identical_to_clean_run"] = same
    print(f"kill -9 in file {args.kill_in} of {args.resume_files}: exit {res['returncode']}, "
          f"{res['documents_when_killed']:,} documents committed when killed "
          f"({res['files_done_when_killed']} files done); after reopening "
          f"{res['documents_after_reopen']:,} (the killed file rolled back); resumed in "
          f"{res['resume_s']:.0f} s: {res['resume_summary']}; identical to a clean run "
          f"(ids, content hashes, ledger): {same}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
