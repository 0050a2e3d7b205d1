"""The sample workspace built by ``kbcurate demo`` from the real data folder.

Imports (each idempotent, so running the demo twice adds nothing): the 12,393-abstract pool,
CIViC 01-Aug-2021 evidence (PO), the Swiss-Prot sample (PTM), BioRED (documents, annotations and
document-level relations), the MEDLINE XML sample (MeSH headings, references), MeSH trees and
citation edges. OncoKB files are licence-restricted and are not part of the demo.

Then each schema's ranker is trained as the system and the measured best recorded as its
default (issue 36 item 6; :mod:`curation.training.defaults`): before ``kbcurate demo
--no-serve`` returns, or, when the demo serves the app, in a background job started right after
the imports (issue 44 item 12: the app answers at once; the sidebar says what is still being
built, and the schemas rank by bm25 + rerank until the job ends). A schema that already has a
recorded default (a second run) is left as it is.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from curation.store.importer import (
    import_citations,
    import_file,
    import_mesh_headings,
    import_mesh_tree,
)
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: (kind, reader, path relative to the data folder, options)
DEMO_IMPORTS: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("docs", "jsonl", "abstract_pool/abstract_pool.jsonl.gz", {}),
    ("docs", "pubmed-xml", "medline_sample/medline16n0902_sample.xml.gz", {}),
    ("kb", "civic", "civic/01-Aug-2021-ClinicalEvidenceSummaries.tsv.gz", {}),
    ("kb", "uniprot", "uniprot_sample/swissprot_entries_sample.dat.gz", {}),
    ("kb", "pubtator", "biored/Train.PubTator.gz", {"source": "biored"}),
    ("kb", "pubtator", "biored/Dev.PubTator.gz", {"source": "biored"}),
    ("kb", "pubtator", "biored/Test.PubTator.gz", {"source": "biored"}),
    ("mesh", "", "mesh_trees/mtrees2019.bin.gz", {}),
    ("mesh-headings", "", "abstract_pool/pmid_mesh_headings.tsv.gz", {}),
    ("citations", "", "citations/xml_sample_citation_edges.tsv.gz", {}),
    ("citations", "", "citations/pubmed_diabetes_cites.tsv.gz", {}),
)


@dataclass(frozen=True)
class DemoSummary:
    """What the demo build did: one line per import, one per schema's ranker and default."""

    root: Path
    seconds: float
    lines: tuple[str, ...]
    ranking: tuple[str, ...] = ()

    def __str__(self) -> str:
        body = "\n".join(f"  {line}" for line in (*self.lines, *self.ranking))
        return f"demo workspace {self.root} ready in {self.seconds:.1f} s\n{body}"


def default_demo_path() -> Path:
    """``./kbcurate-demo`` in the current folder."""
    return Path.cwd() / "kbcurate-demo"


def build_demo_workspace(root: str | Path, data_dir: Path, *, progress: bool = True,
                         rank: bool = True) -> DemoSummary:
    """Create (or update) the sample workspace at ``root`` from ``data_dir``; ``rank``: then
    train each schema's ranker and record its measured default (:func:`rank_demo_workspace`).

    Raises:
        CurationError: The data folder or one of its files is missing.
    """
    if not data_dir.is_dir():
        raise CurationError(
            f"sample data folder {data_dir} not found; pass --data-dir DIR or set KBCURATE_DATA")
    missing = [rel for _, _, rel, _ in DEMO_IMPORTS if not (data_dir / rel).is_file()]
    if missing:
        raise CurationError(f"{data_dir} lacks {', '.join(missing)}; point --data-dir at the "
                            "shared data folder")
    start = time.perf_counter()
    lines = []
    with Workspace.init(root) as ws:
        for kind, reader, rel, options in DEMO_IMPORTS:
            path = data_dir / rel
            if kind == "mesh":
                lines.append(f"{rel}: {import_mesh_tree(ws, path, progress=progress)} added")
            elif kind == "mesh-headings":
                n = import_mesh_headings(ws, path, progress=progress)
                lines.append(f"{rel}: {n} documents given MeSH headings")
            elif kind == "citations":
                lines.append(f"{rel}: {import_citations(ws, path, progress=progress)} added")
            else:
                report = import_file(ws, kind, reader, path, progress=progress,  # type: ignore[arg-type]
                                     actor="demo", **options)
                lines.append(report.summary().replace(str(data_dir) + "/", ""))
        root_path = ws.root
        ranking = rank_demo_workspace(ws, progress=progress) if rank else []
    return DemoSummary(root_path, time.perf_counter() - start, tuple(lines), tuple(ranking))


def rank_demo_workspace(ws: Workspace, *, progress: bool = True) -> list[str]:
    """Train each schema's ranker and record its measured default, one line per schema
    (:func:`curation.training.defaults.rank_and_measure`)."""
    from curation.training.defaults import rank_and_measure

    return rank_and_measure(ws, progress=progress)
