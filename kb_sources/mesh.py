"""MeSH: the descriptor tree (NLM ``mtreesYYYY.bin``) and MeSH headings per PMID.

The tree file has one ``Term;TreeNumber`` line per position of a descriptor in the hierarchy
(``Breast Neoplasms;C04.588.180`` and ``Breast Neoplasms;C17.800.090.500``). A tree number's
parent is the number without its last ``.NNN`` part; top-level numbers (``C04``) have depth 1.
The category letters themselves (``C`` = Diseases) are not terms in the file.

Used by the BioHiCL recipe: headings are expanded to their ancestors and weighted by depth.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn

from kb_sources.checks import is_pmid
from kb_sources.errors import InputFormatError
from kb_sources.io import iter_lines, iter_tsv

logger = logging.getLogger(__name__)

_TREE_NUMBER = re.compile(r"[A-Z][0-9]{2}(\.[0-9]{3})*")  # ASCII digits only


@dataclass(frozen=True)
class MeshTree:
    """The MeSH descriptor hierarchy (read-only).

    Attributes:
        term_numbers: Descriptor name -> its tree numbers, in file order.
        number_terms: Tree number -> descriptor name.
    """

    term_numbers: Mapping[str, tuple[str, ...]]
    number_terms: Mapping[str, str]

    @classmethod
    def from_entries(cls, entries: Iterable[tuple[str, str]]) -> MeshTree:
        """Build a tree from ``(term, tree_number)`` pairs (as :func:`iter_mesh_entries` yields)."""
        numbers: dict[str, list[str]] = {}
        terms: dict[str, str] = {}
        for term, number in entries:
            numbers.setdefault(term, []).append(number)
            terms[number] = term
        return cls(
            MappingProxyType({t: tuple(dict.fromkeys(n)) for t, n in numbers.items()}),
            MappingProxyType(terms),
        )

    def __contains__(self, term: object) -> bool:
        return term in self.term_numbers

    def __len__(self) -> int:
        return len(self.term_numbers)

    def tree_numbers(self, term: str) -> tuple[str, ...]:
        """Tree numbers of a descriptor.

        Raises:
            KeyError: Unknown descriptor (check with ``term in tree`` first; check tags such as
                ``Female`` have no tree number).
        """
        try:
            return self.term_numbers[term]
        except KeyError:
            raise KeyError(f"unknown MeSH descriptor {term!r}") from None

    def ancestors(self, term: str) -> list[str]:
        """Ancestor descriptors over all tree positions, nearest first, without duplicates.

        Ancestors at the same distance follow the order of the term's tree numbers.
        ``ancestors("Breast Neoplasms")`` starts ``["Neoplasms by Site", "Breast Diseases",
        "Neoplasms", "Skin Diseases", ...]``.

        Raises:
            KeyError: Unknown descriptor.
        """
        paths = [number.split(".") for number in self.tree_numbers(term)]
        seen = {term}
        found: list[str] = []
        for distance in range(1, max(len(p) for p in paths)):
            for parts in paths:
                if len(parts) <= distance:
                    continue
                ancestor = self.number_terms.get(".".join(parts[: len(parts) - distance]))
                if ancestor is not None and ancestor not in seen:
                    seen.add(ancestor)
                    found.append(ancestor)
        return found

    def depth(self, term: str) -> int:
        """Smallest depth over the term's tree numbers (``C04`` -> 1, ``C04.588.180`` -> 3).

        Raises:
            KeyError: Unknown descriptor.
        """
        return min(number.count(".") + 1 for number in self.tree_numbers(term))


def read_mesh_trees(path: str | Path) -> MeshTree:
    """Read a MeSH tree file (``mtreesYYYY.bin``, plain or gzip).

    Raises:
        InputFormatError: See :func:`iter_mesh_entries`.
    """
    return MeshTree.from_entries(iter_mesh_entries(path))


def iter_mesh_entries(path: str | Path) -> Iterator[tuple[str, str]]:
    """Yield ``(term, tree_number)`` for each line of a MeSH tree file (blank lines skipped).

    Raises:
        InputFormatError: Missing/empty/truncated file, invalid UTF-8, a line that is not
            ``Term;TreeNumber``, a malformed tree number, or a tree number listed twice for
            different terms; the message names the file and line.
    """
    p = Path(path)
    owners: dict[str, str] = {}
    for line_no, line in iter_lines(p):
        if not line.strip():
            continue
        term, sep, number = line.rpartition(";")
        term, number = term.strip(), number.strip()
        if not sep or not term:
            _fail(p, line_no, f"line {line[:60]!r} is not 'Term;TreeNumber'")
        if not _TREE_NUMBER.fullmatch(number):
            _fail(p, line_no, f"tree number {number!r} is malformed")
        previous = owners.setdefault(number, term)
        if previous != term:
            _fail(p, line_no, f"tree number {number} is listed for {previous!r} and {term!r}")
        yield term, number


def _fail(path: Path, line: int, problem: str) -> NoReturn:
    raise InputFormatError(
        path, problem, line=line,
        expected="MeSH tree lines such as 'Breast Neoplasms;C04.588.180' (letter, two digits, "
        "then '.NNN' parts)",
        fix="use the NLM mtreesYYYY.bin file unchanged",
    )


def read_mesh_headings(path: str | Path) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Read MeSH headings per PMID from a TSV with columns ``pmid`` and ``descriptor``.

    Rows of one PMID need not be adjacent; PMIDs come in order of first appearance and each
    PMID's descriptors in file order, duplicates dropped. Other columns (``descriptor_ui``,
    ``major_topic``, ``qualifiers``, ``source``) are ignored.

    Raises:
        InputFormatError: Missing columns, a non-numeric PMID or an empty descriptor (with line).
    """
    p = Path(path)
    headings: dict[str, dict[str, None]] = {}
    for line_no, row in iter_tsv(p, ("pmid", "descriptor"), format_name="MeSH headings TSV"):
        pmid, descriptor = row["pmid"].strip(), row["descriptor"].strip()
        if not is_pmid(pmid):
            raise InputFormatError(p, f"pmid {pmid[:40]!r} is not a PMID", line=line_no,
                                   expected="1-10 ASCII digits", fix="fix or drop the row")
        if not descriptor:
            raise InputFormatError(p, "empty descriptor", line=line_no,
                                   expected="a MeSH descriptor name", fix="fix or drop the row")
        headings.setdefault(pmid, {})[descriptor] = None
    for pmid, descriptors in headings.items():
        yield pmid, tuple(descriptors)
