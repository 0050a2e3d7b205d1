"""PubTator text format -> documents with entity annotations, and document-level relations.

The format (BioRED, tmVar, NCBI-disease, BC5CDR, PubTator exports)::

    PMID|t|title
    PMID|a|abstract
    PMID<TAB>start<TAB>end<TAB>mention<TAB>type<TAB>id[s][<TAB>extra]   # annotation
    PMID<TAB>relation type<TAB>id1<TAB>id2[<TAB>novel]                  # relation
    <blank line between documents>

Offsets are character offsets into ``title + " " + abstract`` (:attr:`Document.text`) and are
checked against the text. Identifier lists may be separated by "," ";" or "|" ("-" means none);
for variants "|" is part of the tmVar identifier (``p|SUB|V|600|E``) and is not a separator.

Annotation types are mapped to this project's entity types (:data:`ENTITY_TYPES`, e.g.
GeneOrGeneProduct -> gene, SpecificDisease -> disease, ProteinMutation -> variant; others are
lower-cased). A relation's schema follows the types of its two ids (:data:`TYPED_SCHEMAS`):
disease+gene -> ``disease_gene``, chemical+gene -> ``chemical_gene``, variant+disease ->
``variant_disease``, anything else -> ``pair`` (subject = id1, object = id2). An id that no
annotation of the document carries becomes an entity of type "entity" whose text is the id
(logged as a warning) rather than aborting a whole corpus.

Reading is streaming: one document is held in memory at a time.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from kb_sources.checks import MAX_FIELD_CHARS, check_doc_id, is_ascii_int
from kb_sources.errors import InputFormatError, UnknownNameError
from kb_sources.io import iter_lines, split_list
from kb_sources.read_stats import IssueKind, ReadStats
from kb_sources.types import Annotation, Document, Entity, Relation

logger = logging.getLogger(__name__)

#: PubTator entity type (lower case) -> project entity type.
ENTITY_TYPES: dict[str, str] = {
    "gene": "gene", "geneorgeneproduct": "gene", "protein": "gene",
    "disease": "disease", "diseaseorphenotypicfeature": "disease",
    "specificdisease": "disease", "diseaseclass": "disease", "modifier": "disease",
    "compositemention": "disease",
    "chemical": "chemical", "chemicalentity": "chemical", "drug": "chemical",
    "sequencevariant": "variant", "mutation": "variant", "proteinmutation": "variant",
    "dnamutation": "variant", "snp": "variant", "dnaallele": "variant",
    "proteinallele": "variant", "acidchange": "variant", "variant": "variant",
    "species": "species", "organismtaxon": "species", "cellline": "cell_line",
}

#: (query type, answer type) -> schema; the schema's slots are named after the two types.
TYPED_SCHEMAS: dict[tuple[str, str], str] = {
    ("disease", "gene"): "disease_gene",
    ("chemical", "gene"): "chemical_gene",
    ("variant", "disease"): "variant_disease",
}
FALLBACK_SCHEMA = "pair"

#: What to do with an annotation whose offsets or mention text do not fit the document text.
MismatchPolicy = Literal["error", "skip"]

_TEXT_LINE = re.compile(r"^([^\t|]+)\|([ta])\|(.*)$")
_EXPECTED = ("'PMID|t|title', 'PMID|a|abstract', annotation lines "
             "'PMID<TAB>start<TAB>end<TAB>mention<TAB>type<TAB>id' or relation lines "
             "'PMID<TAB>type<TAB>id1<TAB>id2[<TAB>novel]', documents separated by a blank line")


@dataclass
class _Block:
    """Raw lines of one document as read (internal builder)."""

    pmid: str
    line: int
    title: str | None = None
    abstract: str | None = None
    annotations: list[tuple[int, list[str]]] = field(default_factory=list)
    relations: list[tuple[int, list[str]]] = field(default_factory=list)


# ----------------------------------------------------------------------------------------- read


def read_pubtator_docs(
    path: str | Path, *, source: str | None = None, mismatch: str = "error",
    stats: ReadStats | None = None,
) -> Iterator[Document]:
    """Yield the documents (with annotations) of a PubTator file, one at a time.

    Args:
        path: PubTator file (plain or gzip).
        source: Label of the documents (default: the file name up to its first dot, "Train"
            for ``Train.PubTator.gz``).
        mismatch: "error" (default) or "skip" for annotations whose offsets or text do not fit
            the document; skipped ones are counted in ``stats``.
        stats: Collects skipped annotations (see :mod:`kb_sources.read_stats`).

    Raises:
        InputFormatError: An unreadable file, a line of no known kind, a document id that is
            neither a PMID nor a safe id (:mod:`kb_sources.checks`), or an annotation whose
            offsets fall outside the text or do not match its mention text.
        UnknownNameError: An unknown ``mismatch`` policy.
    """
    p = Path(path)
    policy = _mismatch_policy(mismatch)
    stats = stats if stats is not None else ReadStats(p)
    label = source or p.name.split(".")[0]
    for block in _iter_blocks(p):
        yield build_document(block, p, label, policy, stats=stats)
    stats.log_summary()


def read_pubtator_kb(
    path: str | Path, *, source: str | None = None, mismatch: str = "error",
    stats: ReadStats | None = None,
) -> Iterator[Document | Relation]:
    """Yield each document of a PubTator file followed by its document-level relations.

    Args:
        path: PubTator file (plain or gzip).
        source: Label of documents and relations (documents default to the file name up to its
            first dot, relations to "pubtator").
        mismatch: As in :func:`read_pubtator_docs`.
        stats: As in :func:`read_pubtator_docs`.

    Raises:
        InputFormatError: As :func:`read_pubtator_docs`.
        UnknownNameError: An unknown ``mismatch`` policy.
    """
    p = Path(path)
    policy = _mismatch_policy(mismatch)
    stats = stats if stats is not None else ReadStats(p)
    for block in _iter_blocks(p):
        document = build_document(block, p, source or p.name.split(".")[0], policy, stats=stats)
        yield document
        rows = [fields for _, fields in block.relations]
        yield from document_relations(document, rows, source=source or "pubtator")
    stats.log_summary()


def _mismatch_policy(mismatch: object) -> MismatchPolicy:
    value = str(mismatch or "error").lower()
    if value not in get_args(MismatchPolicy):
        raise UnknownNameError("mismatch policy", value, get_args(MismatchPolicy))
    return value  # type: ignore[return-value]


def _iter_blocks(path: Path) -> Iterator[_Block]:
    block: _Block | None = None
    for line_no, line in iter_lines(path):
        if not line.strip():
            if block is not None:
                yield _finished(block, path)
            block = None
            continue
        match = _TEXT_LINE.match(line)
        if match:
            pmid, kind, text = match.groups()
            if block is not None and (
                pmid != block.pmid or (kind == "t" and block.title is not None)
            ):
                yield _finished(block, path)
                block = None
            block = block or _Block(check_doc_id(path, pmid, line=line_no), line_no)
            _set_text(block, kind, text, path, line_no)
            continue
        fields = line.split("\t")
        if block is None or fields[0] != block.pmid:
            where = f"document {block.pmid}" if block else "no document (no 'PMID|t|' line yet)"
            raise InputFormatError(
                path, f"line for {fields[0][:40]!r} appears inside {where}", line=line_no,
                expected=_EXPECTED, fix="start each document with its 'PMID|t|title' line and "
                "separate documents by a blank line; columns must be tab-separated",
            )
        target = _line_kind(fields, path, line_no)
        getattr(block, target).append((line_no, fields))
    if block is not None:
        yield _finished(block, path)


def _set_text(block: _Block, kind: str, text: str, path: Path, line_no: int) -> None:
    if len(text) > MAX_FIELD_CHARS:
        raise InputFormatError(
            path, f"{'title' if kind == 't' else 'abstract'} is {len(text):,} characters long",
            line=line_no, record=block.pmid, expected=f"under {MAX_FIELD_CHARS:,} characters",
            fix="check the file for missing line breaks",
        )
    if kind == "a" and block.abstract is not None:
        raise InputFormatError(
            path, "second abstract line for the same document", line=line_no,
            record=block.pmid, expected=_EXPECTED, fix="merge the abstract into one line",
        )
    if kind == "t":
        block.title = text
    else:
        block.abstract = text


def _line_kind(fields: list[str], path: Path, line_no: int) -> str:
    """"annotations" or "relations" for a tab-separated line; InputFormatError otherwise."""
    is_offset = len(fields) >= 3 and is_ascii_int(fields[1]) and is_ascii_int(fields[2])
    if is_offset and 5 <= len(fields) <= 7:
        return "annotations"
    if len(fields) >= 3 and any(c.isdigit() and not c.isascii() for c in fields[1] + fields[2]):
        raise InputFormatError(
            path, f"annotation offsets {fields[1][:20]!r}-{fields[2][:20]!r} are not ASCII digits",
            line=line_no, record=fields[0][:40], expected="offsets written with the digits 0-9",
            fix="re-export the corpus; offsets in other scripts (e.g. Arabic-Indic or "
            "superscript digits) are not read",
        )
    if not is_offset and len(fields) in (4, 5) and all(f.strip() for f in fields[1:4]):
        return "relations"
    raise InputFormatError(
        path, f"line with {len(fields)} tab-separated column(s) is neither a title/abstract, "
        "an annotation nor a relation line", line=line_no, record=fields[0][:40],
        expected=_EXPECTED, fix="check the column count and that columns are tab-separated",
    )


def _finished(block: _Block, path: Path) -> _Block:
    if block.title is None and block.abstract is None:
        raise InputFormatError(
            path, "document has annotations but no title or abstract line", line=block.line,
            record=block.pmid, expected=_EXPECTED, fix="add the 'PMID|t|title' line",
        )
    return block


# ------------------------------------------------------------------------------------ normalise


def entity_type(pubtator_type: str) -> str:
    """Project entity type of a PubTator annotation type ("GeneOrGeneProduct" -> "gene")."""
    key = pubtator_type.strip().lower()
    return ENTITY_TYPES.get(key, key)


def parse_ids(raw: str, etype: str) -> tuple[str, ...]:
    """Identifiers of one annotation; "|" separates ids except in variant (tmVar) ids."""
    separators = ",;" if etype == "variant" else ",;|"
    return tuple(dict.fromkeys(i for i in split_list(raw, separators) if i != "-"))


def build_document(
    block: _Block, path: Path, source: str, mismatch: MismatchPolicy = "error",
    *, stats: ReadStats | None = None,
) -> Document:
    """A :class:`Document` from a raw block, with offsets checked against the text.

    Args:
        block: Raw lines of one document.
        path: File name for error messages.
        source: Source label of the document.
        mismatch: "error" raises on a bad annotation, "skip" drops it (noted in ``stats``).
        stats: Collects skipped annotations; None logs each one as a warning.
    """
    document = Document(block.pmid, block.title or "", block.abstract or "", source=source)
    text = document.text
    annotations = []
    for line_no, fields in block.annotations:
        try:
            annotations.append(_annotation(fields, text, path, line_no, block.pmid))
        except InputFormatError as exc:
            if mismatch == "error":
                raise
            if stats is None:
                logger.warning("skipping annotation: %s", exc)
            else:
                stats.note(IssueKind.ANNOTATION_SKIPPED, exc.problem, line=line_no,
                           record=block.pmid)
    return Document(block.pmid, document.title, document.abstract, source=source,
                    annotations=tuple(annotations))


def _annotation(fields: list[str], text: str, path: Path, line_no: int, pmid: str) -> Annotation:
    start, end, mention = int(fields[1]), int(fields[2]), fields[3]
    fix = ("offsets count characters of the title, one space and the abstract; pass "
           "mismatch='skip' to drop such annotations with a warning")
    if not start <= end <= len(text):
        raise InputFormatError(
            path, f"offsets {start}-{end} fall outside the document text ({len(text)} characters)",
            line=line_no, record=pmid, expected="0 <= start <= end <= len(title + ' ' + abstract)",
            fix=fix,
        )
    if text[start:end] != mention:
        raise InputFormatError(
            path, f"mention {mention[:60]!r} does not match the text at {start}-{end} "
            f"({text[start:end][:60]!r})", line=line_no, record=pmid,
            expected="the annotated text to equal (title + ' ' + abstract)[start:end]", fix=fix,
        )
    etype = entity_type(fields[4])
    ids = parse_ids(fields[5], etype) if len(fields) > 5 else ()
    return Annotation(start, end, mention, etype, ids)


def entity_index(annotations: Iterable[Annotation]) -> dict[str, Entity]:
    """id -> Entity: most frequent mention text and type, other mention texts as synonyms.

    A mention with several ids ("impairments of learning and memory", D007859|D008569) is indexed
    under each id and under the "|"-joined composite id, which BioRED relations refer to.
    """
    texts: dict[str, Counter[str]] = {}
    types: dict[str, Counter[str]] = {}
    for ann in annotations:
        composite = ("|".join(ann.ids),) if len(ann.ids) > 1 else ()
        for ident in ann.ids + composite:
            texts.setdefault(ident, Counter())[ann.text] += 1
            types.setdefault(ident, Counter())[ann.type] += 1
    index = {}
    for ident, counter in texts.items():
        text = counter.most_common(1)[0][0]
        synonyms = tuple(sorted(t for t in counter if t != text))
        index[ident] = Entity(text, types[ident].most_common(1)[0][0], ident, synonyms)
    return index


# ------------------------------------------------------------------------------------ relations


def relation_slots(first: Entity, second: Entity) -> tuple[str, dict[str, tuple[Entity, ...]]]:
    """Schema name and slots for a pair of related entities (order-free for typed schemas)."""
    for (query, answer), schema in TYPED_SCHEMAS.items():
        for a, b in ((first, second), (second, first)):
            if a.type == query and b.type == answer:
                return schema, {query: (a,), answer: (b,)}
    return FALLBACK_SCHEMA, {"subject": (first,), "object": (second,)}


def document_relations(
    document: Document, rows: Iterable[list[str]], *, source: str = "pubtator"
) -> Iterator[Relation]:
    """Relations of one document from its relation lines ``[pmid, type, id1, id2, (novel)]``."""
    index = entity_index(document.annotations)
    seen: set[str] = set()
    for fields in rows:
        reltype, id1, id2 = (f.strip() for f in fields[1:4])
        record_id = f"{document.doc_id}:{reltype}:{id1}:{id2}"
        if record_id in seen:
            logger.debug("duplicate relation %s skipped", record_id)
            continue
        seen.add(record_id)
        schema, slots = relation_slots(_lookup(index, id1, record_id),
                                       _lookup(index, id2, record_id))
        attributes = {"relation_type": reltype}
        if len(fields) > 4 and fields[4].strip():
            attributes["novel"] = fields[4].strip()
        yield Relation(schema=schema, source=source, record_id=record_id, slots=slots,
                       pmids=(document.doc_id,), attributes=attributes)


def _lookup(index: dict[str, Entity], ident: str, record_id: str) -> Entity:
    entity = index.get(ident)
    if entity is None:
        logger.warning("relation %s: no annotation carries id %r; using the id as text",
                       record_id, ident)
        entity = Entity(ident, "entity", ident)
    return entity
