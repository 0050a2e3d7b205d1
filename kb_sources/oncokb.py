"""OncoKB variant lists -> PO relations (Gene + Variant -> Treatment).

Two OncoKB TSV files are read, told apart by their header:

- **allActionableVariants** (``Gene``/``Hugo Symbol``, ``Alteration``, ``Cancer Type``, ``Level``,
  ``Drugs(s)``, ``PMIDs for drug``, ...): one relation per row and drug group. ``Drugs(s)`` lists
  alternatives separated by commas; a ``+`` inside an item ("Dabrafenib + Trametinib") is a
  combination, which fills the treatment slot with all of its drugs.
- **allAnnotatedVariants** (``Gene``, ``Alteration``, ``Oncogenicity``, ``Mutation Effect``,
  ``PMIDs for Mutation Effect``, ...): no drug, so each row is a *partial* PO relation with only the
  gene and variant slots filled; the curator can browse the pairs that still lack a treatment.

OncoKB content is licence-restricted (OncoKB Terms of Use): read local copies, never ship them.

Pipeline: :func:`read_oncokb` (the only I/O) -> :func:`normalise_row` (pure) ->
:func:`variant_relations` (pure).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from kb_sources.checks import is_pmid, vocabulary_problem
from kb_sources.errors import InputFormatError
from kb_sources.io import iter_tsv, read_header, split_list
from kb_sources.read_stats import IssueKind, ReadStats
from kb_sources.types import Entity, Relation

logger = logging.getLogger(__name__)

SOURCE = "oncokb"
SCHEMA = "PO"


class OncokbFile(StrEnum):
    """Which OncoKB list a file is."""

    ACTIONABLE = "allActionableVariants"
    ANNOTATED = "allAnnotatedVariants"


#: Required columns besides the gene column ("Gene", or "Hugo Symbol" in newer exports).
REQUIRED: dict[OncokbFile, tuple[str, ...]] = {
    OncokbFile.ACTIONABLE: ("Alteration", "Cancer Type", "Level", "Drugs(s)", "PMIDs for drug"),
    OncokbFile.ANNOTATED: ("Alteration", "Oncogenicity", "Mutation Effect",
                           "PMIDs for Mutation Effect"),
}
#: Attribute name -> column, per file; copied when the column is present and non-empty.
ATTRIBUTES: dict[OncokbFile, dict[str, str]] = {
    OncokbFile.ACTIONABLE: {"cancer_type": "Cancer Type", "level": "Level",
                            "protein_change": "Protein Change", "abstracts": "Abstracts for drug"},
    OncokbFile.ANNOTATED: {"oncogenicity": "Oncogenicity", "mutation_effect": "Mutation Effect",
                           "abstracts": "Abstracts for Mutation Effect"},
}
_PMID_COLUMN = {OncokbFile.ACTIONABLE: "PMIDs for drug",
                OncokbFile.ANNOTATED: "PMIDs for Mutation Effect"}
_GENE_COLUMNS = ("Hugo Symbol", "Gene")
#: OncoKB levels of evidence (therapeutic, resistance, diagnostic, prognostic; older exports
#: used 2A/2B and 3), compared without case. A row with another level is skipped and counted.
LEVELS = ("1", "2", "2A", "2B", "3", "3A", "3B", "4", "R1", "R2", "R3", "Dx1", "Dx2", "Dx3",
          "Px1", "Px2", "Px3")


@dataclass(frozen=True)
class Layout:
    """A detected OncoKB file: its kind and the name of its gene column."""

    kind: OncokbFile
    gene_column: str

    @property
    def required(self) -> tuple[str, ...]:
        return (self.gene_column, *REQUIRED[self.kind])

    @property
    def format_name(self) -> str:
        return f"OncoKB {self.kind.value}"


@dataclass(frozen=True)
class OncokbVariant:
    """One OncoKB row in neutral form.

    Attributes:
        kind: The file it came from.
        gene: Hugo gene symbol.
        entrez_id: Entrez gene id ("" when the file has none).
        alteration: OncoKB alteration name ("V600E", "Oncogenic Mutations").
        drug_groups: Alternative treatments; each a tuple of drugs given together (empty for
            allAnnotatedVariants).
        pmids: PubMed ids, in file order without repeats.
        attributes: Display facts (cancer_type, level, oncogenicity, ...).
        rejected_pmids: Items of the PMID cell that are not PMIDs (dropped, reported).
    """

    kind: OncokbFile
    gene: str
    entrez_id: str
    alteration: str
    drug_groups: tuple[tuple[str, ...], ...]
    pmids: tuple[str, ...]
    attributes: dict[str, str]
    rejected_pmids: tuple[str, ...] = ()


def read_oncokb(path: Path, *, stats: ReadStats | None = None) -> Iterator[Relation]:
    """Read an OncoKB allActionableVariants or allAnnotatedVariants TSV (plain or gzip).

    Items of a PMID cell that are not PMIDs ("PMID pending", "abc;-5") are dropped; each one is
    counted in ``stats`` (the first logged as a warning) so the import summary can report them.
    A row whose ``Level`` is not an OncoKB level (:data:`LEVELS`) is skipped and counted.

    Args:
        path: The OncoKB file.
        stats: Collects dropped PMID items and skipped rows (see :mod:`kb_sources.read_stats`).

    Returns:
        An iterator of PO relations (source "oncokb"); rows of allAnnotatedVariants give partial
        relations without a treatment slot.

    Raises:
        InputFormatError: Unreadable file, a header of neither file, or a row without a gene or
            alteration.
    """
    path = Path(path)
    stats = stats if stats is not None else ReadStats(path)
    layout = detect_layout(path)
    logger.info("Reading %s as %s", path, layout.format_name)
    count = 0
    for line_no, row in iter_tsv(path, layout.required, format_name=layout.format_name):
        variant = normalise_row(row, layout, path=path, line=line_no)
        problem = vocabulary_problem("Level", variant.attributes.get("level", ""), LEVELS,
                                     "an OncoKB level")
        if problem:
            stats.note(IssueKind.UNKNOWN_VALUE, problem, line=line_no)
            continue
        for item in variant.rejected_pmids:
            stats.note(IssueKind.NOT_A_PMID, f"{item[:40]!r} in column "
                       f"{_PMID_COLUMN[layout.kind]!r} is not a PMID (1-10 ASCII digits); dropped",
                       line=line_no)
        for relation in variant_relations(variant):
            count += 1
            yield relation
    logger.info("Read %d PO relations from %s", count, path)
    stats.log_summary()


def detect_layout(path: Path) -> Layout:
    """Tell allActionableVariants from allAnnotatedVariants by the header of ``path``.

    Raises:
        InputFormatError: The header has the key columns of neither file.
    """
    header = read_header(path)
    gene_column = next((c for c in _GENE_COLUMNS if c in header), "Gene")
    if "Drugs(s)" in header or "PMIDs for drug" in header:
        return Layout(OncokbFile.ACTIONABLE, gene_column)
    if "Oncogenicity" in header or "Mutation Effect" in header:
        return Layout(OncokbFile.ANNOTATED, gene_column)
    expected = " or ".join(
        f"{kind.value} columns {', '.join(Layout(kind, 'Gene').required)}" for kind in OncokbFile
    )
    raise InputFormatError(
        path, f"header matches neither OncoKB file (it starts {header[:80]!r})", line=1,
        expected=f"an OncoKB header with the {expected}",
        fix="download allActionableVariants.txt or allAnnotatedVariants.txt from oncokb.org",
    )


def normalise_row(
    row: Mapping[str, str], layout: Layout, *, path: Path, line: int
) -> OncokbVariant:
    """Turn one TSV row into an :class:`OncokbVariant` (pure).

    Raises:
        InputFormatError: The row has no gene or no alteration.
    """
    gene = row.get(layout.gene_column, "").strip()
    alteration = row.get("Alteration", "").strip()
    missing = [name for name, value in ((layout.gene_column, gene), ("Alteration", alteration))
               if not value]
    if missing:
        raise InputFormatError(
            path, f"row has no {' or '.join(repr(m) for m in missing)}", line=line,
            expected=f"a gene and an alteration in every {layout.format_name} row",
            fix="fill in the missing value or delete the row",
        )
    groups: tuple[tuple[str, ...], ...] = ()
    if layout.kind is OncokbFile.ACTIONABLE:
        groups = drug_groups(row.get("Drugs(s)", ""))
    attributes = {name: row.get(column, "").strip()
                  for name, column in ATTRIBUTES[layout.kind].items()}
    pmids, rejected = split_pmids(row.get(_PMID_COLUMN[layout.kind], ""))
    return OncokbVariant(
        kind=layout.kind, gene=gene, entrez_id=row.get("Entrez Gene ID", "").strip(),
        alteration=alteration, drug_groups=groups, pmids=pmids,
        attributes={k: v for k, v in attributes.items() if v}, rejected_pmids=rejected,
    )


def drug_groups(value: str) -> tuple[tuple[str, ...], ...]:
    """Alternatives of a ``Drugs(s)`` cell; "A + B" is one group of two drugs given together.

    >>> drug_groups("Vemurafenib, Dabrafenib + Trametinib")
    (('Vemurafenib',), ('Dabrafenib', 'Trametinib'))
    """
    groups = (tuple(split_list(item, "+")) for item in split_list(value, ","))
    return tuple(dict.fromkeys(g for g in groups if g))


def split_pmids(value: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(PMIDs, other items) of a comma-separated cell; PMIDs in order, without repeats.

    >>> split_pmids("24478319, abc;-5, 24478319")
    (('24478319',), ('abc;-5',))
    """
    items = split_list(value, ",")
    pmids = tuple(dict.fromkeys(item for item in items if is_pmid(item)))
    return pmids, tuple(item for item in items if not is_pmid(item))


def parse_pmids(value: str) -> tuple[str, ...]:
    """PMIDs of a comma-separated cell (ASCII-digit items), in order, without repeats."""
    return split_pmids(value)[0]


def variant_relations(variant: OncokbVariant) -> list[Relation]:
    """PO relations of one OncoKB row (pure).

    allActionableVariants: one relation per drug group, record id
    ``"{gene}:{alteration}:{cancer type}:{level}:{drugs}"``. allAnnotatedVariants: one partial
    relation (gene and variant only), record id ``"{gene}:{alteration}"``.
    """
    slots = {
        "gene": (Entity(variant.gene, "gene", variant.entrez_id),),
        "variant": (Entity(variant.alteration, "variant"),),
    }
    base = f"{variant.gene}:{variant.alteration}"
    if variant.kind is OncokbFile.ANNOTATED:
        return [Relation(SCHEMA, SOURCE, base, slots, variant.pmids, dict(variant.attributes))]
    prefix = (f"{base}:{variant.attributes.get('cancer_type', '')}:"
              f"{variant.attributes.get('level', '')}")
    return [
        Relation(
            schema=SCHEMA, source=SOURCE, record_id=f"{prefix}:{' + '.join(group)}",
            slots={**slots, "treatment": tuple(Entity(d, "drug") for d in group)},
            pmids=variant.pmids, attributes=dict(variant.attributes),
        )
        for group in variant.drug_groups
    ]
