"""Registry of readers: KB readers (-> relations, and documents where a corpus doubles as a KB)
and corpus readers (-> documents).

Entries name their implementing function as ``module:function`` and are imported lazily, so
listing readers (``kbcurate --help``) does not import parsers. The readers of each kind are a
:class:`~kb_sources.plugins.Registry`; an installed distribution adds a reader by declaring a
``ReaderSpec`` in the entry-point group ``kbcurate.kb_readers`` or ``kbcurate.doc_readers``.

A reader is ``read(path, *, stats=None, **options) -> Iterator[Relation | Document]``. It only
reads local files, raises :class:`~kb_sources.errors.InputFormatError` on bad input, notes what it
skips in ``stats`` (a :class:`~kb_sources.read_stats.ReadStats`), and never touches a workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kb_sources.errors import CurationError, UnknownNameError
from kb_sources.plugins import Registry, load_target
from kb_sources.read_stats import ReadResult, ReadStats
from kb_sources.types import Document, Relation

ReaderKind = Literal["kb", "docs"]
ReadFunc = Callable[..., Iterator[Relation | Document]]


@dataclass(frozen=True)
class ReaderSpec:
    """One registered reader.

    Attributes:
        name: Name used on the command line (``kbcurate import kb civic FILE``).
        kind: "kb" (relations, possibly with documents) or "docs" (documents only).
        target: ``module:function`` implementing the reader.
        description: One line for ``--help``.
        options: Names of keyword options the reader accepts (``mapping`` for the generic TSV).
    """

    name: str
    kind: ReaderKind
    target: str
    description: str
    options: tuple[str, ...] = ()

    def load(self) -> ReadFunc:
        return load_target(self.target)

    def read(self, path: str | Path, **options: object) -> ReadResult[Relation | Document]:
        """Read ``path``; the result iterates over the records and carries the read's issues.

        Raises:
            CurationError: An option this reader does not take (the message lists its options).
            InputFormatError: The file is malformed (raised while iterating).
        """
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            available = ", ".join(self.options) or "none"
            raise CurationError(
                f"Reader {self.kind} {self.name!r} does not take option(s) "
                f"{', '.join(unknown)}. Available options: {available}")
        stats = ReadStats(path)
        return ReadResult(self.load()(Path(path), stats=stats, **options), stats)


_SPECS: tuple[ReaderSpec, ...] = (
    ReaderSpec("civic", "kb", "kb_sources.civic:read_civic",
               "CIViC ClinicalEvidenceSummaries TSV (2021 v1 and current columns) -> PO"),
    ReaderSpec("oncokb", "kb", "kb_sources.oncokb:read_oncokb",
               "OncoKB allActionableVariants / allAnnotatedVariants TSV -> PO"),
    ReaderSpec("uniprot", "kb", "kb_sources.uniprot:read_uniprot",
               "UniProt Swiss-Prot flat file (MOD_RES 'by X') -> PTM",
               options=("source", "include_without_catalyst")),
    ReaderSpec("pubtator", "kb", "kb_sources.pubtator:read_pubtator_kb",
               "PubTator corpus -> documents, annotations and document-level relations",
               options=("source", "mismatch")),
    ReaderSpec("tsv", "kb", "kb_sources.generic_tsv:read_generic_tsv",
               "Any TSV + a column-mapping TOML (--mapping FILE) -> relations of any schema",
               options=("mapping", "source", "schema_dirs")),
    ReaderSpec("pubmed-xml", "docs", "kb_sources.pubmed_xml:read_pubmed_xml",
               "PubMed XML (efetch output or baseline/update files, gzip ok)",
               options=("source", "abstract_labels")),
    ReaderSpec("medline", "docs", "kb_sources.medline:read_medline",
               "MEDLINE text format (PubMed 'MEDLINE' export)", options=("source",)),
    ReaderSpec("pubtator", "docs", "kb_sources.pubtator:read_pubtator_docs",
               "PubTator text format (title/abstract lines + annotations)",
               options=("source", "mismatch")),
    ReaderSpec("jsonl", "docs", "kb_sources.jsonl:read_jsonl",
               "JSON Lines: pmid, title, abstract, optional mesh/journal/year/references",
               options=("source",)),
)


#: The entry-point groups of plug-in readers (a ReaderSpec, or a tuple of them, of that kind).
ENTRY_POINT_GROUPS: dict[ReaderKind, str] = {"kb": "kbcurate.kb_readers",
                                             "docs": "kbcurate.doc_readers"}
_LABELS: dict[ReaderKind, str] = {"kb": "KB reader", "docs": "document reader"}


def _accept(kind: ReaderKind):
    def check(entry: object) -> str | None:
        if not isinstance(entry, ReaderSpec) or entry.kind != kind:
            return f"expected a ReaderSpec of kind {kind!r}"
        return None
    return check


#: One registry per kind: the name "pubtator" is both a KB reader and a document reader.
READERS: dict[ReaderKind, Registry[ReaderSpec]] = {
    kind: Registry(_LABELS[kind], [s for s in _SPECS if s.kind == kind],
                   group=ENTRY_POINT_GROUPS[kind], accept=_accept(kind),
                   error=lambda label, name, available: UnknownNameError(label, name, available))
    for kind in ("kb", "docs")}


def readers(kind: ReaderKind) -> list[ReaderSpec]:
    """All readers of one kind: built-ins in registration order, then plug-ins."""
    return READERS[kind].entries()


def get_reader(kind: ReaderKind, name: str) -> ReaderSpec:
    """Look up a reader by kind and name.

    Raises:
        UnknownNameError: No such reader; the message lists the available ones.
    """
    return READERS[kind].get(name)
