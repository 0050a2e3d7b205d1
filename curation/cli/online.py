"""Online steps that write into a workspace: PubMed by PMID, citation links, CIViC nightly.

The network code lives in :mod:`kb_sources.fetch`; this module adds the workspace (cache folder
``WS/cache/entrez``, one transaction per import). The NCBI contact email and API key come from
the options, else ``$NCBI_EMAIL`` / ``$NCBI_API_KEY``, else the workspace's settings
(:mod:`curation.pubmed.ncbi`); the E-utilities base URL from ``$KBCURATE_EUTILS_URL``.
"""

from __future__ import annotations

from pathlib import Path

from curation.pubmed.ncbi import ncbi_settings
from curation.store.citations import Citations
from curation.store.importer import ImportReport, import_file, import_items
from curation.store.workspace import Workspace
from kb_sources.fetch import (
    EntrezSettings,
    download_civic_nightly,
    elink_citations,
    fetch_pubmed,
)


def entrez_settings(ws: Workspace, email: str | None, api_key: str | None) -> EntrezSettings:
    """Settings with the workspace's on-disk cache and contact (options win).

    Raises:
        CurationError: No contact email in the options, the environment or the workspace.
    """
    return ncbi_settings(ws, email=email, api_key=api_key)


def fetch_pubmed_into(ws: Workspace, pmids: list[str], *, email: str | None,
                      api_key: str | None = None, progress: bool = True) -> ImportReport:
    """Fetch PubMed records by PMID and import them (cached; one transaction)."""
    settings = entrez_settings(ws, email, api_key)
    return import_items(ws, fetch_pubmed(pmids, settings), reader="docs:efetch",
                        path=f"efetch:{len(pmids)} PMIDs", progress=progress)


def fetch_citations_into(ws: Workspace, pmids: list[str], *, email: str | None,
                         api_key: str | None = None) -> int:
    """Fetch the PMIDs each PMID cites (elink) and store the edges; returns edges added."""
    settings = entrez_settings(ws, email, api_key)
    return Citations(ws).insert(elink_citations(pmids, settings), reader="elink",
                                path=f"elink:{len(pmids)} PMIDs", actor="cli")


def fetch_civic(ws: Workspace, dest: str | Path | None, *, do_import: bool = False,
                progress: bool = True) -> tuple[Path, ImportReport | None]:
    """Download the CIViC nightly evidence TSV, optionally importing it."""
    target = Path(dest) if dest else ws.root / "cache" / "civic-nightly.tsv"
    path = download_civic_nightly(target)
    report = import_file(ws, "kb", "civic", path, progress=progress) if do_import else None
    return path, report
