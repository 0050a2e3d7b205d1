"""Core value types: entities, relations, documents and annotations.

Small frozen dataclasses shared by the readers (this floor) and the curation layer above.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entity:
    """One slot filler of a relation.

    Attributes:
        text: Preferred surface form ("BRAF", "V600E", "Vemurafenib").
        type: Entity type ("gene", "variant", "drug", "residue", ...).
        id: Normalised identifier (Entrez id, MeSH id, UniProt accession); "" when unknown.
        synonyms: Other surface forms known for this entity (aliases, protein names).
    """

    text: str
    type: str
    id: str = ""
    synonyms: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Identity used to group relations: the normalised id, else the lower-cased text."""
        return f"{self.type}:{self.id}" if self.id else f"{self.type}:{self.text.strip().lower()}"


@dataclass(frozen=True)
class Relation:
    """One KB record: an n-ary relation instance.

    A slot holds one or more entities: a combination therapy fills the treatment slot with all of
    its drugs; substitutable therapies become separate relations.

    Attributes:
        schema: Name of the relation schema ("PO", "PTM").
        source: Source knowledge base ("civic", "oncokb", "uniprot", ...).
        record_id: Identifier of the record within the source (stable across imports).
        slots: Slot name -> entities filling it.
        pmids: PubMed ids cited as evidence.
        attributes: Free key/value facts kept for display and filtering (evidence level, disease).
    """

    schema: str
    source: str
    record_id: str
    slots: dict[str, tuple[Entity, ...]]
    pmids: tuple[str, ...] = ()
    attributes: dict[str, str] = field(default_factory=dict)

    def slot_text(self, slot: str, joiner: str = " + ") -> str:
        """Display text of a slot ("Dabrafenib + Trametinib" for a combination)."""
        return joiner.join(e.text for e in self.slots.get(slot, ()))

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (stable key order) used for storage and hashing."""
        return {
            "schema": self.schema,
            "source": self.source,
            "record_id": self.record_id,
            "slots": {k: [asdict(e) for e in v] for k, v in sorted(self.slots.items())},
            "pmids": list(self.pmids),
            "attributes": dict(sorted(self.attributes.items())),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Relation:
        """Inverse of :meth:`to_json`."""
        slots = {
            k: tuple(
                Entity(e["text"], e["type"], e.get("id", ""), tuple(e.get("synonyms", ())))
                for e in v
            )
            for k, v in data["slots"].items()
        }
        return cls(
            schema=data["schema"],
            source=data["source"],
            record_id=data["record_id"],
            slots=slots,
            pmids=tuple(data.get("pmids", ())),
            attributes=dict(data.get("attributes", {})),
        )

    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON form: equal records hash equal."""
        return _hash(self.to_json())


@dataclass(frozen=True)
class Annotation:
    """An entity mention (PubTator style): offsets into ``title + " " + abstract``."""

    start: int
    end: int
    text: str
    type: str
    ids: tuple[str, ...] = ()


def joined_text(title: str, abstract: str) -> str:
    """A document's text: title and abstract joined by one space, or whichever is non-empty.

    The one definition of document text (issue 27): span offsets of the matcher and PubTator,
    the BM25 and dense indexes and every training recipe read a document this way
    (:func:`curation.store.documents.document_text` applies a recipe's format on top).
    """
    if title and abstract:
        return f"{title} {abstract}"
    return title or abstract


@dataclass(frozen=True)
class Document:
    """A citable text: a PubMed abstract or similar.

    Attributes:
        doc_id: Stable identifier; the PMID for PubMed records.
        title: Title (may be empty).
        abstract: Abstract text (may be empty when only a title exists).
        source: Where it came from ("pubmed-xml", "biored", ...).
        journal: Journal name, when known.
        year: Publication year, when known.
        mesh: MeSH descriptor names.
        references: PMIDs this document cites.
        annotations: Entity mentions (offsets into :attr:`text`).
    """

    doc_id: str
    title: str
    abstract: str
    source: str = ""
    journal: str = ""
    year: int | None = None
    mesh: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    annotations: tuple[Annotation, ...] = ()

    @property
    def text(self) -> str:
        """Title and abstract joined by one space (the PubTator offset convention)."""
        return joined_text(self.title, self.abstract)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict used for storage and hashing."""
        data = asdict(self)
        data["mesh"] = list(self.mesh)
        data["references"] = list(self.references)
        data["annotations"] = [asdict(a) for a in self.annotations]
        return data

    def content_hash(self) -> str:
        """SHA-256 over the content, not the source label."""
        data = self.to_json()
        data.pop("source")
        return _hash(data)


def _hash(data: dict[str, Any]) -> str:
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
