"""N-ary relation schemas, defined as TOML data files.

A schema names ordered typed slots, says which are query slots (given by the curator) and which is
the answer slot (what the curator looks for), and carries one or more query templates. The built-in
schemas live in ``assets/schemas/*.toml``; a user adds one for any other KB with a TOML file of the
same shape::

    name = "PO"
    description = "Gene + Variant -> Treatment"
    answer = "treatment"
    templates = ["Treatment for gene {gene} and variant {variant}?"]

    [[slots]]
    name = "gene"
    type = "gene"
    query = true
    ...
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kb_sources.errors import SchemaError, TemplateError, UnknownNameError
from kb_sources.types import Relation

#: Largest schema or mapping TOML read (they are a few hundred bytes).
MAX_TOML_BYTES = 1_000_000
#: The one grammar of schema names (checked when a schema is read or added; ranker version ids
#: ``<schema>-ranker@N`` are built from it in :mod:`curation.store.ranker_versions`).
SCHEMA_NAME = r"[A-Za-z0-9_-]{1,64}"
_SCHEMA_NAME = re.compile(SCHEMA_NAME)
_SLOT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True)
class Slot:
    """One typed position of an n-ary relation."""

    name: str
    type: str
    query: bool
    description: str = ""


@dataclass(frozen=True)
class Schema:
    """A named n-ary relation type.

    Attributes:
        name: Unique schema name ("PO").
        description: One line shown in listings.
        slots: Ordered slots.
        answer: Name of the answer slot (hidden in a partial relation).
        templates: Query templates with ``{slot}`` placeholders for query slots only.
    """

    name: str
    description: str
    slots: tuple[Slot, ...]
    answer: str
    templates: tuple[str, ...]

    @property
    def slot_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.slots)

    @property
    def query_slots(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.slots if s.query)

    def slot(self, name: str) -> Slot:
        for s in self.slots:
            if s.name == name:
                return s
        raise SchemaError(
            f"Schema {self.name!r} has no slot {name!r}. Slots: {', '.join(self.slot_names)}"
        )

    def validate_relation(self, relation: Relation) -> None:
        """Check that a relation fills this schema's slots.

        Raises:
            SchemaError: Unknown slot, or a query slot left empty.
        """
        unknown = sorted(set(relation.slots) - set(self.slot_names))
        if unknown:
            raise SchemaError(
                f"Relation {relation.source}:{relation.record_id} has slot(s) {unknown} that "
                f"schema {self.name!r} does not define (slots: {', '.join(self.slot_names)})"
            )
        empty = [s for s in self.query_slots if not relation.slots.get(s)]
        if empty:
            raise SchemaError(
                f"Relation {relation.source}:{relation.record_id} leaves query slot(s) "
                f"{', '.join(empty)} of schema {self.name!r} empty"
            )


def parse_schema(data: dict, origin: str) -> Schema:
    """Build and validate a :class:`Schema` from parsed TOML.

    Args:
        data: The parsed TOML table.
        origin: File name or description used in error messages.

    Raises:
        SchemaError: A required key is missing or inconsistent.
    """
    def need(key: str, kind: type) -> object:
        if key not in data:
            raise SchemaError(f"{origin}: missing key {key!r}. Expected a schema TOML with keys "
                              "name, answer, templates and [[slots]] tables")
        if not isinstance(data[key], kind):
            raise SchemaError(f"{origin}: key {key!r} must be a {kind.__name__}, "
                              f"got {type(data[key]).__name__}")
        return data[key]

    name = str(need("name", str)).strip()
    if not _SCHEMA_NAME.fullmatch(name):
        raise SchemaError(f"{origin}: schema name {name[:40]!r} must be 1-64 ASCII letters, "
                          "digits, '_' or '-' (e.g. name = \"drug_target\")")
    slots = [_parse_slot(raw, i, origin) for i, raw in enumerate(need("slots", list), start=1)]
    names = [s.name for s in slots]
    if len(set(names)) != len(names):
        raise SchemaError(f"{origin}: slot names must be unique, got {names}")
    answer = str(need("answer", str))
    if answer not in names:
        raise SchemaError(f"{origin}: answer slot {answer!r} is not one of the slots {names}")
    if any(s.query for s in slots if s.name == answer):
        raise SchemaError(f"{origin}: answer slot {answer!r} cannot also be a query slot")
    if not any(s.query for s in slots):
        raise SchemaError(f"{origin}: at least one slot needs query = true")
    templates = need("templates", list)
    if not templates:
        raise SchemaError(f"{origin}: 'templates' must list at least one query template")
    query_names = {s.name for s in slots if s.query}
    for template in templates:
        fields = _template_fields(str(template), origin)
        bad = fields - query_names
        if bad:
            raise SchemaError(
                f"{origin}: template {template!r} uses {sorted(bad)}, which are not query slots "
                f"({', '.join(sorted(query_names))}); the answer slot must stay hidden"
            )
    return Schema(name, str(data.get("description", "")), tuple(slots), answer,
                  tuple(str(t) for t in templates))


def _parse_slot(raw: object, index: int, origin: str) -> Slot:
    if not isinstance(raw, dict) or "name" not in raw or "type" not in raw:
        raise SchemaError(f"{origin}: slot #{index} needs 'name' and 'type' (and 'query')")
    name = raw["name"]
    if not isinstance(name, str) or not _SLOT_NAME.fullmatch(name):
        raise SchemaError(f"{origin}: slot #{index} name {str(name)[:40]!r} must be an ASCII "
                          "identifier (letters, digits, '_'; not starting with a digit), as it "
                          "is used as a {placeholder} in templates")
    query = raw.get("query", False)
    if not isinstance(query, bool):
        raise SchemaError(f"{origin}: slot {name!r} has query = {query!r}; write query = true "
                          "or query = false (a TOML boolean, without quotes)")
    return Slot(name, str(raw["type"]), query, str(raw.get("description", "")))


def _template_fields(template: str, origin: str) -> set[str]:
    try:
        return {name for _, name in template_parts(template) if name is not None}
    except TemplateError as exc:
        raise SchemaError(f"{origin}: {exc}") from exc


def template_parts(template: str) -> list[tuple[str, str | None]]:
    """Split a query template into (literal text, slot name or None) pairs.

    A placeholder is a slot name only (``{gene}``); ``{{`` and ``}}`` are literal braces. Format
    specs (``{gene:>9}``), conversions (``{gene!r}``) and attribute or index access
    (``{gene.x}``, ``{gene[0]}``) are refused: a spec such as ``{gene:>200000000}`` would build a
    string of that many characters.

    >>> template_parts("Drugs for {gene}?")
    [('Drugs for ', 'gene'), ('?', None)]

    Raises:
        TemplateError: Malformed braces, or a placeholder that is not a plain slot name; the
            message names the template and the placeholder.
    """
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(f"template {_short(template)} is malformed ({exc}); use {{slot}} "
                            "placeholders and double braces for literal braces") from exc
    parts: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in parsed:
        if name is not None and (spec or conversion or not _SLOT_NAME.fullmatch(name)):
            raw = f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
            raise TemplateError(
                f"template {_short(template)} has the placeholder {_short(raw)}; a placeholder "
                "is a slot name only, without a format spec (':'), conversion ('!') or "
                "attribute/index access ('.', '[]'). Use {slot}, e.g. {gene}, and double "
                "braces {{ }} for literal braces")
        parts.append((literal, name))
    return parts


def _short(text: str, limit: int = 80) -> str:
    """``repr`` of ``text``, cut to ``limit`` characters (a template in an error message)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text):,} chars)"


def read_toml(path: str | Path, what: str) -> dict:
    """Parse a TOML configuration file (a schema, a column mapping).

    Raises:
        SchemaError: The file is missing or not valid UTF-8 TOML; ``what`` names it.
    """
    p = Path(path)
    try:
        if p.stat().st_size > MAX_TOML_BYTES:
            raise SchemaError(f"{p}: {what} file is {p.stat().st_size:,} bytes; expected a "
                              f"{what} TOML of at most {MAX_TOML_BYTES:,} bytes. Check the path "
                              "(a data file passed as a configuration file?)")
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SchemaError(f"{p}: {what} file not found") from exc
    except OSError as exc:
        raise SchemaError(f"{p}: cannot read the {what} file ({exc.strerror}); expected a "
                          "readable TOML file") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{p}: not a valid UTF-8 TOML file ({exc})") from exc


def load_schema(path: str | Path) -> Schema:
    """Load one schema TOML file.

    Raises:
        SchemaError: The file is missing, not TOML, or not a valid schema.
    """
    return parse_schema(read_toml(path, "schema"), str(path))


def builtin_schemas() -> dict[str, Schema]:
    """The schemas shipped in ``assets/schemas`` keyed by name."""
    out: dict[str, Schema] = {}
    folder = resources.files("assets") / "schemas"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text(encoding="utf-8"))
            schema = parse_schema(data, f"assets/schemas/{entry.name}")
            out[schema.name] = schema
    return out


def load_schemas(extra_dirs: Iterable[str | Path] = ()) -> dict[str, Schema]:
    """Built-in schemas plus every ``*.toml`` in ``extra_dirs`` (user schemas win on name clash)."""
    out = builtin_schemas()
    for folder in extra_dirs:
        for path in sorted(Path(folder).glob("*.toml")):
            schema = load_schema(path)
            out[schema.name] = schema
    return out


def get_schema(name: str, schemas: dict[str, Schema]) -> Schema:
    """Look a schema up by name (case-insensitive), listing the options when it is unknown."""
    if name in schemas:
        return schemas[name]
    for key, schema in schemas.items():
        if key.lower() == name.lower():
            return schema
    raise UnknownNameError("schema", name, schemas)
