"""``kbcurate import docs pubmed-baseline DIR``: NLM's baseline and update files, resumable.

The work is :func:`curation.store.baseline.import_baseline`; this module prints its report. Run
it again after a stop (kill, full disk, a bad file): it resumes at the first file not done.
"""

from __future__ import annotations

import argparse

from curation.cli.common import workspace_path
from curation.store.baseline import import_baseline
from curation.store.workspace import Workspace
from kb_sources.pubmed_baseline import SOURCE

#: The reader name that ``import docs`` routes here.
READER = "pubmed-baseline"
HELP = ("NLM's PubMed baseline + daily update files in DIR (or DIR/baseline, DIR/updatefiles): "
        "file order, resumable, applies DeleteCitation")
_SHOWN = 10


def cmd_import_baseline(args: argparse.Namespace) -> int:
    """Import the folder ``args.file``; prints one line per file imported and a summary."""
    with Workspace.open(workspace_path(args)) as ws:
        report = import_baseline(ws, args.file, source=args.source or SOURCE,
                                 progress=not args.quiet)
    for f in report.files:
        if not f.skipped:
            print(f"{f.name}: +{f.added} ~{f.updated} ={f.unchanged} -{f.deleted}"
                  + (f", {len(f.kept)} kept (labelled)" if f.kept else "")
                  + (", md5 ok" if f.md5_checked else "") + f" in {f.seconds:.1f} s")
    print(report.summary())
    if report.kept:
        shown = ", ".join(report.kept[:_SHOWN]) + (" ..." if len(report.kept) > _SHOWN else "")
        print(f"NLM deleted {len(report.kept)} labelled document(s); they stay in the workspace "
              f"with their labels (PMIDs {shown})")
    return 0
