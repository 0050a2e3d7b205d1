"""UniProtKB/Swiss-Prot flat files -> PTM relations (Substrate + PTM + Residue -> Catalyst).

Each ``FT MOD_RES`` feature whose description names a catalyst ("Phosphoserine; by CDK1 and
CDK2") becomes one :class:`~kb_sources.types.Relation` of schema ``PTM`` per catalyst. Both feature
layouts are understood:

* modern (2019+): ``FT   MOD_RES  3291`` + ``/note="Phosphoserine; by CDK1 and CDK2"`` +
  ``/evidence="ECO:0000269|PubMed:15800615"``;
* old 3-column: ``FT   MOD_RES  65  65  Phosphoserine; by PINK1. {ECO:0000269|PubMed:23754282}.``

Design choices:

* Features without a catalyst have no answer, so by default they yield no relation; pass
  ``include_without_catalyst=True`` to get them with an empty ``catalyst`` slot (for browsing).
* "by X and Y" / "by X, Y and Z" / "by X or Y" give one relation per catalyst (substitutable
  enzymes, not a complex).
* "by PKC/PRKCD" (UniProt's "family/specific enzyme") is ONE catalyst: text = the last, most
  specific alternative ("PRKCD"), synonyms = the others and the raw form ("PKC", "PKC/PRKCD").
* "by autocatalysis": the catalyst is the substrate itself, ``attributes["autocatalysis"] = "yes"``.
* PMIDs come from every ``PubMed:`` evidence tag of the feature (any ECO code; a tag that is not
  1-10 ASCII digits is dropped and counted in the read's stats); the raw evidence is
  kept in ``attributes["evidence"]``.
* The residue letter comes from the canonical sequence; for isoform-specific features from the
  modification name ("Phosphoserine" -> S). A canonical feature whose position is unknown or
  beyond the sequence ("MOD_RES 999999" on a 480-aa protein) is skipped and counted in the read's
  stats, and so is a "by" that names no catalyst ("Phosphoserine; by ").

Layers: :func:`read_uniprot` (I/O, streaming) -> ``parse_*`` / ``normalise_*`` (pure) ->
:func:`entry_relations` (pure).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from Bio import SwissProt

from kb_sources.checks import is_pmid
from kb_sources.errors import InputFormatError
from kb_sources.io import iter_lines
from kb_sources.ptm_vocab import ONE_LETTER_NAMES, normalise_ptm, residue_from_name
from kb_sources.read_stats import IssueKind, ReadStats
from kb_sources.types import Entity, Relation

logger = logging.getLogger(__name__)

SCHEMA = "PTM"
SOURCE = "uniprot"
_FORMAT = "a UniProtKB/Swiss-Prot flat file (ID/AC/DE/GN/FT/SQ lines, entries ending with '//')"

_EVIDENCE_BRACES = re.compile(r"\s*\{[^}]*\}")
_PUBMED = re.compile(r"PubMed:([^\s,;|}]*)")
_CATALYST_SPLIT = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+")
_DE_PREFIX = re.compile(r"^(?:(?:RecName|AltName|SubName|Contains|Includes|Flags):\s*)+")
_DE_NAME_KEYS = frozenset({"Full", "Short", "CD_antigen", "INN", "Allergen", "Biotech"})
_OLD_QUALIFIERS = re.compile(r"\s*\((By similarity|Probable|Potential)\)")


@dataclass(frozen=True)
class ModRes:
    """One parsed MOD_RES feature.

    Attributes:
        position: 1-based residue position.
        residue: One-letter amino acid ("S"); "" when unknown.
        modification: Raw modification name ("Phosphoserine").
        catalysts: Raw catalyst names after "by" ("CDK1", "autocatalysis", "PKC/PRKCD").
        notes: Other note parts ("alternate", "in vitro").
        pmids: PubMed ids from the evidence tags, in order of appearance.
        evidence: Raw evidence string.
    """

    position: int
    residue: str
    modification: str
    catalysts: tuple[str, ...]
    notes: tuple[str, ...]
    pmids: tuple[str, ...]
    evidence: str


# ----------------------------------------------------------------------------------------- read


def read_uniprot(
    path: str | Path, *, source: str | None = None, include_without_catalyst: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Relation]:
    """Read a Swiss-Prot flat file (plain or gzip) and yield PTM relations, streaming.

    Args:
        path: Flat file with one or more entries.
        source: Source label (default "uniprot").
        include_without_catalyst: Also yield catalyst-less MOD_RES features with an empty
            ``catalyst`` slot.
        stats: Counts ``PubMed:`` evidence tags that are not PMIDs (dropped).

    Returns:
        An iterator of ``PTM`` relations, one per (feature, catalyst).

    Raises:
        InputFormatError: Empty, truncated or corrupt file, invalid UTF-8, or an entry that
            Biopython cannot parse (the message names the line).
    """
    stats = stats if stats is not None else ReadStats(path)
    for record in _iter_records(Path(path)):
        yield from entry_relations(record, source=source or SOURCE, stats=stats,
                                   include_without_catalyst=include_without_catalyst)
    stats.log_summary()


class _NumberedHandle:
    """A text handle over :func:`iter_lines` that remembers the current line number."""

    def __init__(self, path: Path) -> None:
        self._lines = iter_lines(path)
        self.line_no = 0

    def read(self, size: int = -1) -> str:  # Biopython probes the handle with read(0)
        if size == 0:
            return ""
        raise NotImplementedError("read() is not supported; iterate over lines")

    def __iter__(self) -> _NumberedHandle:
        return self

    def __next__(self) -> str:
        self.line_no, text = next(self._lines)
        return text + "\n"


def _iter_records(path: Path) -> Iterator[Any]:
    handle = _NumberedHandle(path)
    entry = None
    try:
        for record in SwissProt.parse(handle):
            entry = record.entry_name
            yield record
    except (ValueError, AssertionError, IndexError, KeyError) as exc:
        problem = str(exc) or type(exc).__name__
        if "Unexpected end of stream" in problem:
            problem = "the last entry is incomplete (no '//' terminator)"
        after = f" (after entry {entry})" if entry else ""
        raise InputFormatError(
            path, f"cannot parse Swiss-Prot entry{after}: {problem}", line=handle.line_no,
            expected=_FORMAT, fix="download the entry again in UniProt 'Text' format",
        ) from exc


# ------------------------------------------------------------------------------------ normalise


def strip_evidence(text: str) -> str:
    """Drop ``{ECO:...}`` evidence braces and surrounding blanks."""
    return _EVIDENCE_BRACES.sub("", text).strip()


def parse_note(note: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """Split a MOD_RES note into (modification, catalysts, other notes).

    "Phosphoserine; by CDK1 and CDK2" -> ("Phosphoserine", ("CDK1", "CDK2"), ()). A "by" with
    no name after it gives the catalyst "" (reported by :func:`entry_relations`).
    """
    parts = [p.strip() for p in note.split(";") if p.strip()]
    if not parts:
        return "", (), ()
    catalysts: list[str] = []
    notes: list[str] = []
    for part in parts[1:]:
        if part.lower() == "by" or part.lower().startswith("by "):
            names = [c for c in _CATALYST_SPLIT.split(part[2:].strip()) if c.strip(" ,")]
            catalysts.extend(names or [""])  # "" marks a "by" that names no catalyst
        else:
            notes.append(part)
    return parts[0], tuple(catalysts), tuple(notes)


def _note_and_evidence(qualifiers: dict[str, str]) -> tuple[str, str]:
    """(note, evidence) of a feature in either the modern or the old 3-column layout."""
    if "note" in qualifiers or "evidence" in qualifiers:
        return qualifiers.get("note", ""), qualifiers.get("evidence", "")
    description = qualifiers.get("description", "")
    evidence = " ".join(re.findall(r"\{([^}]*)\}", description))
    note = _EVIDENCE_BRACES.sub("", description).strip().rstrip(".").strip()
    qualifier = _OLD_QUALIFIERS.search(note)
    if qualifier:
        evidence = " ".join(filter(None, (evidence, qualifier.group(1))))
        note = _OLD_QUALIFIERS.sub("", note).strip()
    return note, evidence


def parse_mod_res(feature: Any, sequence: str) -> ModRes | None:
    """Parse a Biopython MOD_RES feature; None when its position is unknown."""
    try:
        position = int(feature.location.end)
    except (TypeError, ValueError):
        return None
    note, evidence = _note_and_evidence(feature.qualifiers)
    modification, catalysts, notes = parse_note(note)
    on_canonical = feature.location.ref is None and 1 <= position <= len(sequence)
    residue = sequence[position - 1] if on_canonical else residue_from_name(modification)
    pmids = tuple(dict.fromkeys(_PUBMED.findall(evidence)))
    return ModRes(position, residue, modification, catalysts, notes, pmids, evidence)


def _checked_pmids(mod: ModRes, record: Any, stats: ReadStats | None) -> ModRes:
    """``mod`` without ``PubMed:`` tags that are not PMIDs, each one noted in ``stats``."""
    bad = [p for p in mod.pmids if not is_pmid(p)]
    for pmid in bad if stats is not None else ():
        stats.note(IssueKind.NOT_A_PMID, f"MOD_RES {mod.position} evidence 'PubMed:{pmid[:40]}' "
                   "is not a PMID (1-10 ASCII digits); dropped", record=record.entry_name)
    return replace(mod, pmids=tuple(p for p in mod.pmids if is_pmid(p))) if bad else mod


def position_problem(feature: Any, mod: ModRes | None, sequence: str) -> str | None:
    """Why a MOD_RES has no residue to point at (unknown, or beyond the sequence), or None."""
    if mod is None:
        return f"MOD_RES at {feature.location} has no known position; the feature is skipped"
    if feature.location.ref is not None or not sequence or 1 <= mod.position <= len(sequence):
        return None  # isoform features are checked against no sequence here
    where = "beyond the end of" if mod.position > len(sequence) else "before the start of"
    return (f"MOD_RES {mod.position} ({mod.modification}) is {where} the {len(sequence)}-residue "
            "sequence; the feature is skipped")


def _checked_catalysts(mod: ModRes, record: Any, stats: ReadStats | None,
                       include_without_catalyst: bool) -> ModRes:
    """``mod`` without the "" of a "by" that names no catalyst, noted in ``stats``."""
    if "" not in mod.catalysts:
        return mod
    outcome = ("kept with an empty catalyst slot" if include_without_catalyst
               else "no relation without include_without_catalyst")
    _note(stats, IssueKind.NO_CATALYST, f"MOD_RES {mod.position} ({mod.modification}) has 'by' "
          f"but no catalyst after it; {outcome}", record)
    return replace(mod, catalysts=tuple(c for c in mod.catalysts if c))


def _note(stats: ReadStats | None, kind: IssueKind, detail: str, record: Any) -> None:
    if stats is not None:
        stats.note(kind, detail, record=record.entry_name)
    else:
        logger.warning("record %s: %s", record.entry_name, detail)


def residue_entity(residue: str, position: int) -> Entity:
    """Residue entity "S473" with synonyms "Ser473", "Ser-473", "Ser 473", "serine 473"."""
    if residue not in ONE_LETTER_NAMES:
        return Entity(f"{residue}{position}", "residue")
    name, three = ONE_LETTER_NAMES[residue]
    synonyms = (f"{three}{position}", f"{three}-{position}", f"{three} {position}",
                f"{name} {position}")
    return Entity(f"{residue}{position}", "residue", synonyms=synonyms)


def _gene_names(record: Any) -> tuple[str, list[str]]:
    """(primary gene name, other gene names) of an entry; ("", []) when it has none."""
    primary = ""
    others: list[str] = []
    for gene in record.gene_name or []:
        if not isinstance(gene, dict):
            continue
        name = strip_evidence(gene.get("Name", ""))
        if name and not primary:
            primary = name
        elif name:
            others.append(name)
        for key in ("Synonyms", "OrderedLocusNames", "ORFNames"):
            others.extend(strip_evidence(s) for s in gene.get(key, []))
    return primary, [o for o in others if o]


def protein_names(description: str) -> list[str]:
    """Protein names (Full/Short/CD_antigen/...) from a DE block; EC numbers and flags dropped."""
    names = []
    for part in strip_evidence(description).split(";"):
        part = _DE_PREFIX.sub("", part.strip())
        key, sep, value = part.partition("=")
        if sep and key.strip() in _DE_NAME_KEYS and value.strip():
            names.append(value.strip())
    return names


def substrate_entity(record: Any) -> Entity:
    """The entry as a gene entity: gene name, accession, and every other name as synonym."""
    gene, other_genes = _gene_names(record)
    proteins = protein_names(record.description or "")
    text = gene or (proteins[0] if proteins else record.entry_name)
    synonyms = [*other_genes, *proteins, record.entry_name]
    unique = tuple(dict.fromkeys(s for s in synonyms if s and s != text))
    return Entity(text, "gene", record.accessions[0] if record.accessions else "", unique)


def catalyst_entity(name: str, substrate: Entity) -> tuple[Entity, bool]:
    """Catalyst entity of one "by" name and whether it is autocatalysis.

    "PKC/PRKCD" -> Entity("PRKCD", synonyms=("PKC", "PKC/PRKCD")).
    """
    if name.lower() == "autocatalysis":
        return substrate, True
    alternatives = [a.strip() for a in name.split("/") if a.strip()]
    if len(alternatives) < 2:
        return Entity(name, "gene"), False
    synonyms = tuple(dict.fromkeys([*alternatives[:-1], name]))
    return Entity(alternatives[-1], "gene", synonyms=synonyms), False


# ------------------------------------------------------------------------------------ relations


def entry_relations(
    record: Any, *, source: str = SOURCE, include_without_catalyst: bool = False,
    stats: ReadStats | None = None,
) -> Iterator[Relation]:
    """PTM relations of one parsed Swiss-Prot record (pure).

    Args:
        record: A ``Bio.SwissProt.Record``.
        source: Source label of the relations.
        include_without_catalyst: Also yield MOD_RES features without "by ..." (empty catalyst).
        stats: Where skipped features, "by" without a catalyst and evidence PMIDs that are not
            PMIDs are noted (None: logged as warnings).
    """
    substrate = substrate_entity(record)
    context = {"entry_name": record.entry_name, "organism": (record.organism or "").rstrip(".")}
    sequence = record.sequence or ""
    for feature in record.features:
        if feature.type != "MOD_RES":
            continue
        mod = parse_mod_res(feature, sequence)
        problem = position_problem(feature, mod, sequence)
        if problem:
            _note(stats, IssueKind.POSITION_OUTSIDE, problem, record)
            continue
        if mod is None or not mod.modification:
            continue
        mod = _checked_pmids(mod, record, stats)
        mod = _checked_catalysts(mod, record, stats, include_without_catalyst)
        if mod.catalysts or include_without_catalyst:
            yield from mod_res_relations(mod, substrate, source=source, context=context)


def mod_res_relations(
    mod: ModRes, substrate: Entity, *, source: str = SOURCE,
    context: dict[str, str] | None = None,
) -> Iterator[Relation]:
    """One relation per catalyst of a MOD_RES (one with an empty catalyst slot if it has none)."""
    base = {
        "substrate": (substrate,),
        "ptm": (Entity(normalise_ptm(mod.modification), "ptm"),),
        "residue": (residue_entity(mod.residue, mod.position),),
    }
    attributes = {**(context or {}), "modification": mod.modification}
    if mod.evidence:
        attributes["evidence"] = mod.evidence
    if mod.notes:
        attributes["note"] = "; ".join(mod.notes)
    for name in _unique(mod.catalysts) or ("",):
        slots = dict(base)
        extra: dict[str, str] = {}
        if name:
            catalyst, auto = catalyst_entity(name, substrate)
            slots["catalyst"] = (catalyst,)
            if auto:
                extra["autocatalysis"] = "yes"
        else:
            slots["catalyst"] = ()
        yield Relation(
            schema=SCHEMA, source=source,
            record_id=f"{substrate.id}:{mod.position}:{mod.modification}:{name}",
            slots=slots, pmids=mod.pmids, attributes={**attributes, **extra},
        )


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
