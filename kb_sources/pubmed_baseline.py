"""NLM's PubMed baseline and daily update files: which files, in which order, and what each says.

NLM publishes PubMed once a year as a baseline (``baseline/pubmed25n0001.xml.gz`` ...
``pubmed25n1274.xml.gz``, ~30,000 citations each) and then daily update files that continue the
numbering (``updatefiles/pubmed25n1275.xml.gz`` ...). Each file is a ``<PubmedArticleSet>`` of
``<PubmedArticle>`` records (new citations and revised versions of earlier ones) followed by one
``<DeleteCitation>`` block listing PMIDs to remove. Applying the files in number order gives
today's PubMed: a later record of a PMID replaces the earlier one, a deletion removes it.

This module only reads (the workspace side is :mod:`curation.store.baseline`):

* :func:`baseline_files` lists a folder's files in NLM's order (``DIR`` itself, and NLM's
  ``baseline/`` and ``updatefiles/`` subfolders when present), natural name order;
* :func:`check_md5` verifies a file against NLM's ``NAME.md5`` sidecar when there is one;
* :func:`read_baseline_file` streams one file (defusedxml ``iterparse``, every record cleared
  once used, so memory does not grow with the file) as :class:`Citation` and :class:`Deletion`
  items, in file order.

A citation's ``<PMID Version="N">`` is kept: NLM's rare versioned citations carry several
versions under one PMID, and the workspace keeps the highest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kb_sources.checks import is_pmid
from kb_sources.errors import InputFormatError
from kb_sources.io import open_binary
from kb_sources.pubmed_xml import (
    RECORD_TAGS,
    article_to_document,
    flat_text,
    iter_article_elements,
    refuse_non_pubmed,
)
from kb_sources.types import Document

#: Source label of the documents a baseline import writes (``--source`` changes it).
SOURCE = "pubmed-baseline"
#: NLM's subfolders, read after ``DIR`` itself.
SUBFOLDERS = ("baseline", "updatefiles")
_SUFFIXES = (".xml.gz", ".xml")
_DIGITS = re.compile(r"(\d+)")
_MD5 = re.compile(r"\b([0-9a-fA-F]{32})\b")


@dataclass(frozen=True)
class Citation:
    """One ``PubmedArticle`` of a baseline or update file.

    Attributes:
        document: The citation as a document.
        version: ``<PMID Version>`` (1 for nearly every citation).
    """

    document: Document
    version: int = 1


@dataclass(frozen=True)
class Deletion:
    """One PMID of a ``<DeleteCitation>`` block."""

    pmid: str
    version: int = 1


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key comparing the digit runs of a name as numbers (``n999`` before ``n1000``)."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def baseline_files(folder: str | Path) -> list[Path]:
    """The ``.xml.gz`` / ``.xml`` files of ``folder`` (and of its ``baseline/`` and
    ``updatefiles/`` subfolders), in NLM's order: natural order of the file names.

    Raises:
        InputFormatError: ``folder`` is not a folder, holds no PubMed file, or two of its
            subfolders hold files of the same name (the order would be ambiguous).
    """
    root = Path(folder)
    if not root.is_dir():
        raise InputFormatError(root, "not a folder", expected="a folder of NLM's PubMed "
                               "baseline and update files (pubmed25n0001.xml.gz, ...)",
                               fix="give the folder that holds the downloaded files")
    found: dict[str, Path] = {}
    for where in (root, *(root / s for s in SUBFOLDERS)):
        for path in sorted(where.glob("*.xml*")) if where.is_dir() else ():
            if not path.is_file() or not path.name.endswith(_SUFFIXES):
                continue
            if path.name in found:
                raise InputFormatError(
                    path, f"a file of the same name is also at {found[path.name]}",
                    expected="each baseline or update file once",
                    fix="remove one of the two copies")
            found[path.name] = path
    if not found:
        raise InputFormatError(root, "holds no .xml.gz or .xml file", expected="NLM's PubMed "
                               "files (pubmed25n0001.xml.gz, ...) here or in baseline/ and "
                               "updatefiles/", fix="download them from NLM's PubMed FTP site")
    return [found[name] for name in sorted(found, key=natural_key)]


def check_md5(path: Path) -> bool:
    """Check ``path`` against ``PATH.md5`` (NLM's ``MD5(name)= hex`` line); False when no
    sidecar exists, True when it matches.

    Raises:
        InputFormatError: The sidecar holds no checksum, or the file does not match it.
    """
    sidecar = path.with_name(path.name + ".md5")
    if not sidecar.is_file():
        return False
    match = _MD5.search(sidecar.read_text(encoding="ascii", errors="replace"))
    if match is None:
        raise InputFormatError(sidecar, "holds no MD5 checksum",
                               expected="NLM's 'MD5(NAME)= 32 hex digits' line",
                               fix="re-download the .md5 file or delete it")
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != match.group(1).lower():
        raise InputFormatError(
            path, f"MD5 {digest.hexdigest()} differs from {match.group(1).lower()} in "
            f"{sidecar.name}", expected="the file NLM published",
            fix="the download is incomplete or damaged: download it again")
    return True


def read_baseline_file(path: str | Path, *, source: str = SOURCE
                       ) -> Iterator[Citation | Deletion]:
    """Stream one baseline or update file: its citations and deletions, in file order.

    Args:
        path: A ``PubmedArticleSet`` (or 2016-style ``MedlineCitationSet``), plain or gzip.
        source: Source label of the documents.

    Raises:
        InputFormatError: As :func:`kb_sources.pubmed_xml.read_pubmed_xml`, and a
            ``DeleteCitation`` PMID that is not a number.
    """
    p = Path(path)
    refuse_non_pubmed(p)
    tags = (*RECORD_TAGS, "DeleteCitation")
    with open_binary(p) as fh:
        for index, element in enumerate(iter_article_elements(fh, p, tags), start=1):
            if element.tag == "DeleteCitation":
                yield from _deletions(element, p)
                continue
            citation = (element if element.tag == "MedlineCitation"
                        else element.find("MedlineCitation"))
            pmid = citation.find("PMID") if citation is not None else None
            yield Citation(article_to_document(element, p, index=index, source=source),
                           _version(pmid))


def _deletions(element: object, path: Path) -> Iterator[Deletion]:
    for pmid in element.iterfind("PMID"):  # type: ignore[attr-defined]
        text = flat_text(pmid)
        if not is_pmid(text):
            raise InputFormatError(path, f"DeleteCitation holds PMID {text[:40]!r}",
                                   record="DeleteCitation", expected="<PMID>digits</PMID>",
                                   fix="re-download the file")
        yield Deletion(text, _version(pmid))


def _version(pmid: object) -> int:
    value = pmid.get("Version", "1") if pmid is not None else "1"  # type: ignore[attr-defined]
    return int(value) if value.isdigit() and value.isascii() else 1
