"""Any delimited KB export + a column-mapping TOML -> relations of any schema (the no-code path).

A mapping file says which schema the rows fill and which column feeds which slot::

    schema = "drug_target.toml"        # a schema name, a schema TOML path (relative to this
                                       # file), or an inline [schema] table
    source = "mydrugdb"                # default: the mapping file's stem
    delimiter = "\\t"                   # or "tab", ",", "comma", ";", "semicolon", "|", "pipe"
    record_id = "interaction_id"       # one column, or a list joined with ":"
    pmids = { column = "pmids", separator = ";" }   # or just pmids = "pmids"

    [slots.drug]
    column = "drug_name"               # or the shorthand: drug = "drug_name"
    id_column = "drugbank_id"

    [slots.target]
    column = "target_symbols"
    id_column = "target_entrez"
    separator = "|"                    # several entities in one slot of ONE relation

    [attributes]
    action = "action"                  # attribute name = column

Validation happens before any row is read: unknown keys or slots, query slots without a column and
an unknown schema raise :class:`~kb_sources.errors.SchemaError` naming the mapping file; a column
missing from the file's header raises :class:`~kb_sources.errors.InputFormatError` naming the
column, the data file and the mapping file. Rows whose query slots are empty are skipped and
counted (:mod:`kb_sources.read_stats`; they cannot become queries); an empty answer slot is kept
empty for browsing. A record id repeated with an identical relation is skipped and counted; with a
different relation it is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb_sources.checks import is_pmid
from kb_sources.errors import CurationError, InputFormatError, SchemaError
from kb_sources.io import iter_tsv, split_list
from kb_sources.read_stats import DuplicateCheck, IssueKind, ReadStats
from kb_sources.schema import (
    Schema,
    get_schema,
    load_schema,
    load_schemas,
    parse_schema,
    read_toml,
)
from kb_sources.types import Entity, Relation

logger = logging.getLogger(__name__)

_DELIMITERS = {"tab": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
_TOP_KEYS = frozenset({"schema", "source", "delimiter", "record_id", "pmids", "slots",
                       "attributes", "description"})
_SLOT_KEYS = frozenset({"column", "id_column", "synonyms_column", "separator",
                        "synonyms_separator"})


@dataclass(frozen=True)
class SlotMapping:
    """How one slot is filled from a row.

    Attributes:
        slot: Slot name in the schema.
        type: Entity type (the slot's type in the schema).
        column: Column with the entity text(s).
        id_column: Column with the normalised id(s), parallel to ``column``; "" for none.
        synonyms_column: Column with synonyms of a single-entity slot; "" for none.
        separator: Splits ``column``/``id_column`` into several entities; "" for one entity.
        synonyms_separator: Splits ``synonyms_column``.
    """

    slot: str
    type: str
    column: str
    id_column: str = ""
    synonyms_column: str = ""
    separator: str = ""
    synonyms_separator: str = "|"


@dataclass(frozen=True)
class ColumnMapping:
    """A validated mapping file (see the module docstring for the TOML layout)."""

    path: Path
    schema: Schema
    source: str
    delimiter: str
    record_id: tuple[str, ...]
    slots: tuple[SlotMapping, ...]
    pmid_column: str = ""
    pmid_separators: str = ",;"
    attributes: tuple[tuple[str, str], ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the mapping reads, in first-use order."""
        names = [*self.record_id, self.pmid_column, *(c for _, c in self.attributes)]
        for s in self.slots:
            names += [s.column, s.id_column, s.synonyms_column]
        return tuple(dict.fromkeys(n for n in names if n))


# ----------------------------------------------------------------------------------------- read


def read_generic_tsv(
    path: str | Path,
    *,
    mapping: str | Path | None = None,
    source: str | None = None,
    schema_dirs: Iterable[str | Path] = (),
    stats: ReadStats | None = None,
) -> Iterator[Relation]:
    """Read a delimited file with a header and yield one relation per row.

    The mapping is loaded and checked at once (before any row is read). Rows whose query slots
    are empty are skipped and counted in ``stats``; a record id repeated with an identical
    relation is skipped and counted, repeated with a different one it is refused.

    Args:
        path: The KB export (plain or gzip).
        mapping: The column-mapping TOML file (required).
        source: Overrides the mapping's source label.
        schema_dirs: Extra folders of schema TOMLs to look schema names up in.
        stats: Collects skipped rows (see :mod:`kb_sources.read_stats`).

    Raises:
        SchemaError: No mapping was given, or it is invalid or does not fit its schema.
        InputFormatError: The file is unreadable, lacks a mapped column, or a row is malformed
            (record id repeated with different content, id list not parallel to the entity
            list, bad PMID); raised while iterating.
    """
    p = Path(path)
    if mapping is None:
        raise SchemaError(
            f"{p}: reader 'tsv' needs a column-mapping TOML that says which column fills which "
            "slot, and none was given. Pass it with --mapping FILE (kbcurate import kb tsv FILE "
            "--mapping MAPPING.toml) or mapping=... in Python; see kb_sources/generic_tsv.py for "
            "the layout")
    spec = load_mapping(mapping, schema_dirs=schema_dirs)
    return _relations(p, spec, source or spec.source,
                      stats if stats is not None else ReadStats(p))


def _relations(p: Path, spec: ColumnMapping, source: str, stats: ReadStats) -> Iterator[Relation]:
    repeats = DuplicateCheck(
        p, stats, what="record id",
        fix=f"set record_id in {spec.path} to a unique column (or a list of columns)")
    for line_no, row in _rows(p, spec):
        try:
            relation = row_relation(row, spec, source=source)
        except ValueError as exc:
            raise InputFormatError(
                p, str(exc), line=line_no, expected=f"rows that fit mapping {spec.path}",
                fix="correct the row or the mapping",
            ) from exc
        if relation is None:
            stats.note(IssueKind.EMPTY_QUERY_SLOT, "a query slot "
                       f"({', '.join(spec.schema.query_slots)}) is empty; row skipped",
                       line=line_no)
        elif not repeats.is_repeat(relation.record_id, relation.content_hash(), line=line_no):
            yield relation
    stats.log_summary()


def _rows(path: Path, spec: ColumnMapping) -> Iterator[tuple[int, dict[str, str]]]:
    return iter_tsv(path, spec.columns, delimiter=spec.delimiter,
                    format_name=f"KB export (mapping {spec.path.name})",
                    header_fix=f"or correct the column name(s) in the mapping file {spec.path}")


def load_mapping(path: str | Path, *, schema_dirs: Iterable[str | Path] = ()) -> ColumnMapping:
    """Load and validate a column-mapping TOML.

    Raises:
        SchemaError: Missing or unreadable file, unknown keys or slots, a query slot without a
            column, an unknown schema.
    """
    p = Path(path)
    return parse_mapping(read_toml(p, "mapping"), p, schema_dirs=schema_dirs)


# ------------------------------------------------------------------------------------ normalise


def parse_mapping(
    data: Mapping[str, Any], path: Path, *, schema_dirs: Iterable[str | Path] = ()
) -> ColumnMapping:
    """Validate parsed mapping TOML against its schema (pure apart from loading the schema)."""
    _no_unknown(data, _TOP_KEYS, f"{path}")
    schema = _resolve_schema(data.get("schema"), path, schema_dirs)
    slots = _slot_mappings(data.get("slots"), schema, path)
    pmid_column, pmid_seps = _pmids(data.get("pmids", ""), path)
    attributes = data.get("attributes", {})
    if not isinstance(attributes, dict) or not all(isinstance(v, str) for v in
                                                   attributes.values()):
        raise SchemaError(f"{path}: [attributes] must map attribute names to column names")
    return ColumnMapping(
        path=path, schema=schema, source=str(data.get("source") or path.stem),
        delimiter=_delimiter(data.get("delimiter", "\t"), path),
        record_id=_record_id(data.get("record_id"), path), slots=slots,
        pmid_column=pmid_column, pmid_separators=pmid_seps,
        attributes=tuple((str(k), v) for k, v in attributes.items()),
    )


def _no_unknown(table: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SchemaError(f"{where}: unknown key(s) {', '.join(unknown)}. "
                          f"Allowed keys: {', '.join(sorted(allowed))}")


def _resolve_schema(value: Any, path: Path, schema_dirs: Iterable[str | Path]) -> Schema:
    if isinstance(value, dict):
        return parse_schema(value, f"{path} [schema]")
    if not isinstance(value, str) or not value.strip():
        raise SchemaError(f"{path}: missing 'schema': give a schema name, a path to a schema "
                          "TOML (relative to the mapping file) or an inline [schema] table")
    candidate = path.parent / value
    if value.endswith(".toml") or candidate.is_file():
        return load_schema(candidate)
    try:
        return get_schema(value, load_schemas(schema_dirs))
    except CurationError as exc:
        raise SchemaError(f"{path}: {exc}. Or give a path to a schema TOML file") from exc


def _slot_mappings(value: Any, schema: Schema, path: Path) -> tuple[SlotMapping, ...]:
    if not isinstance(value, dict) or not value:
        raise SchemaError(f"{path}: missing [slots.<slot>] tables; schema {schema.name!r} has "
                          f"slots {', '.join(schema.slot_names)}")
    unknown = sorted(set(value) - set(schema.slot_names))
    if unknown:
        raise SchemaError(f"{path}: slot(s) {', '.join(unknown)} are not in schema "
                          f"{schema.name!r} (slots: {', '.join(schema.slot_names)})")
    missing = [s for s in schema.query_slots if s not in value]
    if missing:
        raise SchemaError(f"{path}: query slot(s) {', '.join(missing)} of schema {schema.name!r} "
                          "need a column: add [slots.<slot>] column = \"...\"")
    if schema.answer not in value:
        logger.warning("%s: answer slot %r is not mapped; relations will have no answer",
                       path, schema.answer)
    return tuple(_slot_mapping(name, value[name], schema, path) for name in schema.slot_names
                 if name in value)


def _slot_mapping(name: str, raw: Any, schema: Schema, path: Path) -> SlotMapping:
    table = {"column": raw} if isinstance(raw, str) else raw
    where = f"{path} [slots.{name}]"
    if not isinstance(table, dict) or not isinstance(table.get("column"), str) or \
            not table["column"]:
        raise SchemaError(f"{where}: needs column = \"<column name>\"")
    _no_unknown(table, _SLOT_KEYS, where)
    if table.get("synonyms_column") and table.get("separator"):
        raise SchemaError(f"{where}: synonyms_column only works for one entity per row; "
                          "drop separator or synonyms_column")
    if any(not isinstance(v, str) for v in table.values()):
        raise SchemaError(f"{where}: every value must be a string")
    return SlotMapping(slot=name, type=schema.slot(name).type, **table)


def _pmids(value: Any, path: Path) -> tuple[str, str]:
    if isinstance(value, str):
        return value, ",;"
    if isinstance(value, dict) and isinstance(value.get("column"), str):
        _no_unknown(value, frozenset({"column", "separator"}), f"{path} pmids")
        return value["column"], str(value.get("separator") or ",;")
    raise SchemaError(f"{path}: pmids must be a column name or {{column = ..., separator = ...}}")


def _delimiter(value: Any, path: Path) -> str:
    delimiter = _DELIMITERS.get(str(value).lower(), str(value))
    if len(delimiter) != 1:
        raise SchemaError(f"{path}: delimiter {value!r} must be one character or one of "
                          f"{', '.join(_DELIMITERS)}")
    return delimiter


def _record_id(value: Any, path: Path) -> tuple[str, ...]:
    columns = [value] if isinstance(value, str) else value
    if not isinstance(columns, list) or not columns or \
            not all(isinstance(c, str) and c for c in columns):
        raise SchemaError(f"{path}: record_id must name the column (or list of columns) that "
                          "identifies a row, e.g. record_id = \"id\"")
    return tuple(columns)


# ------------------------------------------------------------------------------------ relations


def slot_entities(row: Mapping[str, str], mapping: SlotMapping) -> tuple[Entity, ...]:
    """Entities of one slot in one row; () when the text column is empty (ids alone are ignored).

    Raises:
        ValueError: The id list is not parallel to the entity list.
    """
    texts = _split(row.get(mapping.column, ""), mapping.separator)
    if not texts:
        return ()
    ids = _split(row.get(mapping.id_column, ""), mapping.separator) if mapping.id_column else []
    if ids and len(ids) != len(texts):
        raise ValueError(f"slot {mapping.slot!r}: {len(texts)} value(s) in column "
                         f"{mapping.column!r} but {len(ids)} id(s) in column {mapping.id_column!r}")
    synonyms: tuple[str, ...] = ()
    if mapping.synonyms_column:
        raw = row.get(mapping.synonyms_column, "")
        synonyms = tuple(dict.fromkeys(split_list(raw, mapping.synonyms_separator)))
    ids = ids or [""] * len(texts)
    return tuple(Entity(t, mapping.type, i, synonyms) for t, i in zip(texts, ids, strict=True))


def _split(value: str, separator: str) -> list[str]:
    parts = value.split(separator) if separator else [value]
    return [p.strip() for p in parts if p.strip()]


def row_relation(
    row: Mapping[str, str], mapping: ColumnMapping, *, source: str | None = None
) -> Relation | None:
    """The relation of one row, or None when a query slot is empty.

    Raises:
        ValueError: Ids not parallel to entities, an empty record id, or a non-numeric PMID.
    """
    slots = {m.slot: slot_entities(row, m) for m in mapping.slots}
    if any(not slots.get(q) for q in mapping.schema.query_slots):
        return None
    record_id = ":".join(row.get(c, "").strip() for c in mapping.record_id)
    if not record_id.replace(":", ""):
        raise ValueError(f"empty record id in column(s) {', '.join(mapping.record_id)}")
    pmids = []
    if mapping.pmid_column:
        for pmid in split_list(row.get(mapping.pmid_column, ""), mapping.pmid_separators):
            pmid = pmid.removeprefix("PMID:").strip()
            if not is_pmid(pmid):
                raise ValueError(f"PMID {pmid[:40]!r} in column {mapping.pmid_column!r} is not "
                                 "a number (1-10 ASCII digits)")
            pmids.append(pmid)
    attributes = {name: row[col].strip() for name, col in mapping.attributes
                  if row.get(col, "").strip()}
    return Relation(schema=mapping.schema.name, source=source or mapping.source,
                    record_id=record_id, slots=slots, pmids=tuple(dict.fromkeys(pmids)),
                    attributes=attributes)
