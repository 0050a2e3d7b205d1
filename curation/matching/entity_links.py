"""Links a curator expects for an entity (NCBI Gene, UniProt, MeSH, ...) and for a KB record.

Pure functions, no I/O. Identifiers come from input files and are untrusted: a URL is only ever
built from an id that matches its family's pattern in full, on a fixed ``https://`` prefix, with
the id percent-quoted into the path or query. Anything else gets no link.

Id families (:func:`entity_links`):

========================  ==========================================  ============================
id                        entity types                                link
========================  ==========================================  ============================
``673``                   gene, protein                               NCBI Gene
``P04637`` (accession)    gene, protein (UniProt PTM substrates)      UniProtKB entry
``9606``                  species, organism                           NCBI Taxonomy
``D009369``, ``C534883``  any (``MESH:`` prefix optional)             MeSH browser
``OMIM:114480``           any                                         OMIM entry
``rs113488022``           any (tmVar's ``RS#:113488022`` too)         dbSNP
``CVCL_0023``             any                                         Cellosaurus
========================  ==========================================  ============================

An id of several parts (PubTator's ``D007859|D008569``, ``673,674``) links each part that
matches (at most :data:`MAX_LINKS`); tmVar parts such as ``p|SUB|V|600|E`` match nothing.

KB records (:func:`record_link`): CIViC ``EID1425`` / ``EID1425:Dabrafenib`` -> the evidence
item, OncoKB ``BRAF:V600E:...`` -> the gene's alteration page, UniProt
``P04637:15:Phosphoserine:...`` -> the entry; other sources -> none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

__all__ = ["MAX_LINKS", "Link", "entity_links", "record_link"]

#: Most links :func:`entity_links` gives for one id.
MAX_LINKS = 5

GENE_TYPES = frozenset({"gene", "protein", "geneorgeneproduct", "gene_or_protein"})
SPECIES_TYPES = frozenset({"species", "organism", "organismtaxon", "taxon"})

_DIGITS = re.compile(r"(?:NCBIGene:|EntrezGene:)?([1-9][0-9]{0,9})")  # not "gene:673": a key
_TAXON = re.compile(r"(?:NCBITaxon:|txid)?([1-9][0-9]{0,9})")
#: UniProt's accession format (https://www.uniprot.org/help/accession_numbers).
_UNIPROT = re.compile(r"(?:UniProtKB:|UniProt:)?"
                      r"([OPQ][0-9][A-Z0-9]{3}[0-9]|[A-NR-Z][0-9](?:[A-Z][A-Z0-9]{2}[0-9]){1,2})")
_MESH = re.compile(r"(?:MESH:)?([DC][0-9]{6}(?:[0-9]{3})?)", re.IGNORECASE)
_OMIM = re.compile(r"(?:OMIM|MIM):([0-9]{6})", re.IGNORECASE)
_DBSNP = re.compile(r"(?:rs|RS#:)([0-9]{1,12})", re.IGNORECASE)
_CELLOSAURUS = re.compile(r"CVCL_([A-Z0-9]{4})", re.IGNORECASE)
_PARTS = re.compile(r"[|,;]")

_CIVIC = re.compile(r"EID([1-9][0-9]{0,9})(?::.*)?", re.DOTALL)
_ONCOKB_GENE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,39}")
_ONCOKB_ALTERATION = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.*+/()>-]{0,99}")


@dataclass(frozen=True)
class Link:
    """One link of a tooltip.

    Attributes:
        label: What the curator reads ("NCBI Gene 673", "CIViC EID1425"); plain text.
        url: An ``https://`` URL built from a validated id.
    """

    label: str
    url: str


def _q(part: str) -> str:
    return quote(part, safe="")


def _gene(ident: str) -> Link | None:
    m = _DIGITS.fullmatch(ident)
    if m:
        return Link(f"NCBI Gene {m.group(1)}", f"https://www.ncbi.nlm.nih.gov/gene/{_q(m.group(1))}")
    return uniprot_link(ident)


def uniprot_link(ident: str) -> Link | None:
    """The UniProtKB entry of an accession (``P04637``, ``UniProtKB:P04637``), else None."""
    m = _UNIPROT.fullmatch(ident)
    if not m:
        return None
    acc = m.group(1)
    return Link(f"UniProt {acc}", f"https://www.uniprot.org/uniprotkb/{_q(acc)}/entry")


def _species(ident: str) -> Link | None:
    m = _TAXON.fullmatch(ident)
    if not m:
        return None
    return Link(f"NCBI Taxonomy {m.group(1)}",
                f"https://www.ncbi.nlm.nih.gov/Taxonomy/Browser/wwwtax.cgi?id={_q(m.group(1))}")


def _any_type(ident: str) -> Link | None:
    """Links of ids whose form names their database, whatever the entity type."""
    if m := _MESH.fullmatch(ident):
        ui = m.group(1).upper()
        return Link(f"MeSH {ui}", f"https://meshb.nlm.nih.gov/record/ui?ui={_q(ui)}")
    if m := _OMIM.fullmatch(ident):
        return Link(f"OMIM {m.group(1)}", f"https://www.omim.org/entry/{_q(m.group(1))}")
    if m := _DBSNP.fullmatch(ident):
        rs = f"rs{m.group(1)}"
        return Link(f"dbSNP {rs}", f"https://www.ncbi.nlm.nih.gov/snp/{_q(rs)}")
    if m := _CELLOSAURUS.fullmatch(ident):
        cvcl = f"CVCL_{m.group(1).upper()}"
        return Link(f"Cellosaurus {cvcl}", f"https://www.cellosaurus.org/{_q(cvcl)}")
    return None


def _one(etype: str, ident: str) -> Link | None:
    if etype in GENE_TYPES:
        found = _gene(ident)
    elif etype in SPECIES_TYPES:
        found = _species(ident)
    else:
        found = None
    return found or _any_type(ident)


def entity_links(etype: str, entity_id: str) -> tuple[Link, ...]:
    """The external links of an entity from its type and normalised id.

    Args:
        etype: Entity type ("gene", "disease", "species", ...; case-insensitive).
        entity_id: Its normalised id (untrusted); "" or an entity key (``variant:v600e``) for
            an entity without one.

    Returns:
        One link per id part that matches its family's pattern in full, in order, without
        repeats, at most :data:`MAX_LINKS`; () when none does.

    Example:
        >>> entity_links("gene", "673")[0].url
        'https://www.ncbi.nlm.nih.gov/gene/673'
    """
    kind = etype.strip().lower()
    links: dict[str, Link] = {}
    for part in _PARTS.split(entity_id) if entity_id else ():
        link = _one(kind, part)
        if link is not None:
            links.setdefault(link.url, link)
        if len(links) >= MAX_LINKS:
            break
    return tuple(links.values())


def record_link(source: str, record_id: str) -> Link | None:
    """The page of one KB record, or None for a source or record id without one.

    Args:
        source: The record's KB ("civic", "oncokb", "uniprot"; case-insensitive).
        record_id: Its record id as the reader builds it (untrusted).

    Example:
        >>> record_link("civic", "EID1425:Dabrafenib").url
        'https://civicdb.org/evidence/1425/summary'
    """
    kind = source.strip().lower()
    if kind == "civic":
        m = _CIVIC.fullmatch(record_id)
        if m:
            return Link(f"CIViC EID{m.group(1)}",
                        f"https://civicdb.org/evidence/{_q(m.group(1))}/summary")
    elif kind == "oncokb":
        gene, _, rest = record_id.partition(":")
        alteration = rest.partition(":")[0]
        if _ONCOKB_GENE.fullmatch(gene) and _ONCOKB_ALTERATION.fullmatch(alteration):
            return Link(f"OncoKB {gene} {alteration}",
                        f"https://www.oncokb.org/gene/{_q(gene)}/{_q(alteration)}")
    elif kind == "uniprot":
        found = uniprot_link(record_id.partition(":")[0])
        if found is not None:
            return found
    return None
