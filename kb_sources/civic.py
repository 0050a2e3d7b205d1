"""CIViC ClinicalEvidenceSummaries TSV -> PO relations (Gene + Variant -> Treatment).

Two column layouts are read, detected from the header:

- **v1** (CIViC 1, e.g. the ``01-Aug-2021`` monthly export): ``gene``, ``entrez_id``, ``variant``,
  ``drugs``, ``drug_interaction_type``, ``clinical_significance``, ...
- **v2** (current CIViC exports): ``molecular_profile`` ("BRAF V600E"), ``therapies``,
  ``therapy_interaction_type``, ``significance``, ...

Only Predictive evidence that names therapies becomes a relation. A combination (or sequential)
therapy is one relation whose treatment slot holds every drug; substitutes (or several drugs with no
interaction type) become one relation per drug. Evidence from ASCO/ASH abstracts is kept but has no
PMIDs, so it is marked as non-PubMed through its ``source_type`` attribute.

Pipeline: :func:`read_civic` (the only I/O) -> :func:`normalise_row` (pure) ->
:func:`evidence_relations` (pure).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kb_sources.checks import is_ascii_int, is_pmid, vocabulary_problem
from kb_sources.errors import InputFormatError
from kb_sources.io import iter_tsv, read_header
from kb_sources.read_stats import DuplicateCheck, IssueKind, ReadStats
from kb_sources.types import Entity, Relation

logger = logging.getLogger(__name__)

SOURCE = "civic"
SCHEMA = "PO"
FORMAT_NAME = "CIViC ClinicalEvidenceSummaries"

#: Interaction types whose drugs are given together: one relation holds them all.
JOINT_INTERACTIONS = frozenset({"combination", "sequential"})

#: Drug lists are comma-separated, but a comma between two digits belongs to a chemical name
#: ("2,4-pyrimidinediamine", "HER2 Inhibitor CP-724,714").
_DRUG_SEPARATOR = re.compile(r"(?<!\d),|,(?!\d)")
#: Operators joining the parts of a compound v2 molecular profile.
_PROFILE_OPERATOR = re.compile(r"\s+(?:AND|OR)\s+")


@dataclass(frozen=True)
class Layout:
    """Column names of one CIViC export layout, keyed by their v2 (canonical) names."""

    name: str
    required: tuple[str, ...]
    columns: Mapping[str, str]

    def get(self, row: Mapping[str, str], field: str) -> str:
        """Stripped value of a canonical field in ``row`` ("" when the column is absent)."""
        return row.get(self.columns.get(field, field), "").strip()


V1 = Layout(
    name="v1 (2021)",
    required=("gene", "variant", "disease", "drugs", "drug_interaction_type", "evidence_type",
              "evidence_level", "clinical_significance", "citation_id", "source_type",
              "evidence_id"),
    columns={"therapies": "drugs", "therapy_interaction_type": "drug_interaction_type",
             "significance": "clinical_significance"},
)
V2 = Layout(
    name="v2 (current)",
    required=("molecular_profile", "disease", "therapies", "therapy_interaction_type",
              "evidence_type", "evidence_level", "significance", "citation_id", "source_type",
              "evidence_id"),
    columns={},
)
LAYOUTS = (V1, V2)

#: Values CIViC uses in its controlled columns (canonical names; v1 and v2 exports, compared
#: without case; an empty cell is allowed). A row with another value is skipped and counted.
VOCABULARY: dict[str, tuple[str, ...]] = {
    "evidence_level": ("A", "B", "C", "D", "E"),
    "significance": (
        "Sensitivity/Response", "Resistance", "Adverse Response", "Reduced Sensitivity",
        "Sensitivity", "Resistance or Non-Response", "Positive", "Negative", "Better Outcome",
        "Poor Outcome", "Pathogenic", "Likely Pathogenic", "Benign", "Likely Benign",
        "Uncertain Significance", "Predisposition", "Protectiveness", "Oncogenicity",
        "Gain of Function", "Loss of Function", "Unaltered Function", "Neomorphic",
        "Dominant Negative", "Unknown", "N/A", "NA",
    ),
    "therapy_interaction_type": ("Combination", "Sequential", "Substitutes"),
}

#: Optional columns copied into the attributes when present and non-empty (canonical names).
_OPTIONAL_ATTRIBUTES = ("evidence_direction", "rating", "evidence_status", "asco_abstract_id")


@dataclass(frozen=True)
class CivicEvidence:
    """One CIViC evidence item in layout-neutral form.

    Attributes:
        evidence_id: Numeric evidence id as text ("15").
        genes: Gene symbols (one, or several for a compound v2 molecular profile).
        entrez_id: Entrez gene id ("" when the layout has none).
        variants: Variant names ("D842V"); several for a compound molecular profile.
        therapies: Drug names in file order.
        interaction: Lower-cased therapy interaction type ("" when not given).
        evidence_type: "Predictive", "Diagnostic", ...; only Predictive evidence gives relations.
        pmids: The PubMed id, or () for ASCO/ASH abstracts.
        attributes: Display facts (disease, evidence_level, source_type, ...).
    """

    evidence_id: str
    genes: tuple[str, ...]
    entrez_id: str
    variants: tuple[str, ...]
    therapies: tuple[str, ...]
    interaction: str
    evidence_type: str
    pmids: tuple[str, ...]
    attributes: dict[str, str]


def read_civic(path: Path, *, stats: ReadStats | None = None) -> Iterator[Relation]:
    """Read a CIViC ClinicalEvidenceSummaries TSV (plain or gzip) into PO relations.

    An evidence id repeated with an identical row is skipped and counted in ``stats``; repeated
    with a different row it is refused (one of the two would silently replace the other). A row
    whose evidence level, significance or interaction type is not a CIViC value
    (:data:`VOCABULARY`) is skipped and counted.

    Args:
        path: The evidence export (v1 or v2 column layout).
        stats: Collects skipped repeats and rows (see :mod:`kb_sources.read_stats`).

    Returns:
        An iterator of relations (schema "PO", source "civic") in file order.

    Raises:
        InputFormatError: Unreadable file, a header of neither layout, a row without a numeric
            evidence id, gene or variant, a PubMed citation that is not a PMID, or an evidence id
            repeated with different content.
    """
    path = Path(path)
    stats = stats if stats is not None else ReadStats(path)
    layout = detect_layout(path)
    logger.info("Reading %s as CIViC layout %s", path, layout.name)
    repeats = DuplicateCheck(path, stats, what="evidence id",
                             fix="keep one row per evidence id (re-export the file from CIViC)")
    count = 0
    for line_no, row in iter_tsv(path, layout.required, format_name=f"{FORMAT_NAME} {layout.name}"):
        evidence = normalise_row(row, layout, path=path, line=line_no)
        problem = vocabulary_issue(row, layout)
        if problem:
            stats.note(IssueKind.UNKNOWN_VALUE, problem, line=line_no,
                       record=f"EID{evidence.evidence_id}")
            continue
        if repeats.is_repeat(evidence.evidence_id, repr(evidence), line=line_no):
            continue
        for relation in evidence_relations(evidence):
            count += 1
            yield relation
    logger.info("Read %d PO relations from %s", count, path)
    stats.log_summary()


def vocabulary_issue(row: Mapping[str, str], layout: Layout) -> str | None:
    """Why a row's controlled values are not CIViC's (:data:`VOCABULARY`), or None (pure)."""
    for field, accepted in VOCABULARY.items():
        column = layout.columns.get(field, field)
        problem = vocabulary_problem(column, layout.get(row, field), accepted, "a CIViC value")
        if problem:
            return problem
    return None


def detect_layout(path: Path) -> Layout:
    """Pick the column layout from the first non-blank line of ``path``.

    Each layout scores the columns only it has (``drugs`` vs ``therapies``, ...), found as words
    whatever the delimiter, so that a comma-separated file or one missing a column still reaches
    :func:`~kb_sources.io.iter_tsv`, whose message names the delimiter or the missing column.

    Raises:
        InputFormatError: The header names none of either layout's own columns.
    """
    header = read_header(path)
    words = set(re.findall(r"\w+", header))
    v1_score = len(words & (set(V1.required) - set(V2.required)))
    v2_score = len(words & (set(V2.required) - set(V1.required)))
    if v1_score or v2_score:
        return V2 if v2_score > v1_score else V1
    raise InputFormatError(
        path, f"header matches neither CIViC layout (it starts {header[:80]!r})", line=1,
        expected=f"a {FORMAT_NAME} header with either the v1 columns {', '.join(V1.required)} "
        f"or the v2 columns {', '.join(V2.required)}",
        fix="export the evidence summaries from civicdb.org "
        "(Downloads > ClinicalEvidenceSummaries)",
    )


def normalise_row(
    row: Mapping[str, str], layout: Layout, *, path: Path, line: int
) -> CivicEvidence:
    """Turn one TSV row of either layout into a :class:`CivicEvidence` (pure).

    Raises:
        InputFormatError: No numeric evidence id, no gene or variant, or a PubMed citation that
            is not a PMID.
    """
    evidence_id = layout.get(row, "evidence_id")
    if not is_ascii_int(evidence_id):
        problem = f"evidence_id {evidence_id[:40]!r} is not a number" if evidence_id else \
            "row has no evidence_id"
        raise InputFormatError(path, problem, line=line,
                               expected="a numeric evidence_id (ASCII digits) in every row",
                               fix="re-export the file or delete the incomplete row")
    record = f"EID{evidence_id}"
    if layout is V2:
        genes, variants, profile = _profile_slots(layout.get(row, "molecular_profile"), path, line,
                                                  record)
    else:
        genes, variants, profile = _v1_slots(row, path, line, record)
    source_type = layout.get(row, "source_type")
    citation_id = layout.get(row, "citation_id")
    pmids = _pmids(source_type, citation_id, path, line, record)
    attributes = {
        "disease": layout.get(row, "disease"),
        "evidence_level": layout.get(row, "evidence_level"),
        "significance": layout.get(row, "significance"),
        "evidence_type": layout.get(row, "evidence_type"),
        "interaction": layout.get(row, "therapy_interaction_type").lower(),
        "source_type": source_type,
        "citation_id": citation_id,
        "molecular_profile": profile,
    }
    attributes.update({k: layout.get(row, k) for k in _OPTIONAL_ATTRIBUTES})
    return CivicEvidence(
        evidence_id=evidence_id, genes=genes, entrez_id=layout.get(row, "entrez_id"),
        variants=variants, therapies=split_drugs(layout.get(row, "therapies")),
        interaction=attributes["interaction"], evidence_type=attributes["evidence_type"],
        pmids=pmids, attributes={k: v for k, v in attributes.items() if v},
    )


def _v1_slots(
    row: Mapping[str, str], path: Path, line: int, record: str
) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    gene, variant = row.get("gene", "").strip(), row.get("variant", "").strip()
    missing = [name for name, value in (("gene", gene), ("variant", variant)) if not value]
    if missing:
        raise InputFormatError(path, f"row has no {' or '.join(missing)}", line=line,
                               record=record, expected="a gene and a variant in every row",
                               fix="fill in the gene and variant columns or delete the row")
    return (gene,), (variant,), ""


def _profile_slots(
    profile: str, path: Path, line: int, record: str
) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """Genes and variants of a v2 molecular profile; the profile text is kept when compound."""
    try:
        genes, variants = parse_molecular_profile(profile)
    except ValueError as exc:
        raise InputFormatError(
            path, str(exc), line=line, record=record,
            expected="a molecular_profile of the form 'GENE VARIANT' (e.g. 'BRAF V600E')",
            fix="fill in the molecular_profile column or delete the row",
        ) from exc
    return genes, variants, profile if len(variants) > 1 else ""


def parse_molecular_profile(profile: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split a CIViC molecular profile name into genes and variants.

    A simple profile "BRAF V600E" gives ``(("BRAF",), ("V600E",))``: the first token is the gene and
    the rest the variant. A compound profile "EGFR L858R AND EGFR T790M" gives every part (genes
    without repeats); parts negated with NOT are left out and parentheses are ignored.

    Raises:
        ValueError: The profile is empty or a part has no variant after the gene.
    """
    parts = _PROFILE_OPERATOR.split(profile.replace("(", " ").replace(")", " ").strip())
    genes: list[str] = []
    variants: list[str] = []
    for part in (p.strip() for p in parts):
        if part.startswith("NOT "):
            continue
        gene, _, variant = part.partition(" ")
        if not gene or not variant.strip():
            raise ValueError(f"molecular_profile {profile!r} has no variant after the gene"
                             if gene else "row has no molecular_profile")
        if gene not in genes:
            genes.append(gene)
        variants.append(variant.strip())
    if not variants:
        raise ValueError(f"molecular_profile {profile!r} names only negated variants")
    return tuple(genes), tuple(variants)


def split_drugs(value: str) -> tuple[str, ...]:
    """Split a CIViC drug list on commas, except commas inside chemical names ("2,4-...").

    Repeated names are dropped, so each drug of a substitutes list has its own record id.
    """
    return tuple(dict.fromkeys(d.strip() for d in _DRUG_SEPARATOR.split(value) if d.strip()))


def _pmids(
    source_type: str, citation_id: str, path: Path, line: int, record: str
) -> tuple[str, ...]:
    if source_type.lower() != "pubmed":
        return ()
    if not is_pmid(citation_id):
        raise InputFormatError(path, f"PubMed citation_id {citation_id!r} is not a PMID",
                               line=line, record=record, expected="1-10 ASCII digits",
                               fix="correct the citation_id or the source_type of the row")
    return (citation_id,)


def therapy_groups(therapies: tuple[str, ...], interaction: str) -> list[tuple[str, ...]]:
    """Drugs given together: one group for a combination/sequential therapy, else one per drug."""
    if not therapies:
        return []
    if interaction.lower() in JOINT_INTERACTIONS:
        return [therapies]
    return [(drug,) for drug in therapies]


def evidence_relations(evidence: CivicEvidence) -> list[Relation]:
    """PO relations of one evidence item (pure): none unless it is Predictive with therapies."""
    if evidence.evidence_type.lower() != "predictive":
        return []
    groups = therapy_groups(evidence.therapies, evidence.interaction)
    gene_id = evidence.entrez_id if len(evidence.genes) == 1 else ""
    base_slots = {
        "gene": tuple(Entity(g, "gene", gene_id) for g in evidence.genes),
        "variant": tuple(Entity(v, "variant") for v in evidence.variants),
    }
    relations = []
    for group in groups:
        record_id = f"EID{evidence.evidence_id}"
        if len(groups) > 1:
            record_id += f":{group[0]}"
        relations.append(Relation(
            schema=SCHEMA, source=SOURCE, record_id=record_id,
            slots={**base_slots, "treatment": tuple(Entity(d, "drug") for d in group)},
            pmids=evidence.pmids, attributes=dict(evidence.attributes),
        ))
    return relations
