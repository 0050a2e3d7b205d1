"""The workspace's own relation schemas, the TOML files in ``WS/schemas/`` that
``kbcurate schema add`` copies there: loading them beside the built-in schemas
(:func:`workspace_schemas`) and deciding what adding one would replace (:func:`replaced_schema`,
behind :meth:`Workspace.add_schema`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kb_sources.errors import SchemaError
from kb_sources.schema import Schema, builtin_schemas, load_schemas

#: The workspace folder that holds its schema files.
SCHEMAS_DIR = "schemas"


def workspace_schemas(root: Path) -> dict[str, Schema]:
    """Built-in schemas plus the workspace's own (``root/schemas/*.toml``)."""
    return load_schemas([root / SCHEMAS_DIR])


def schema_file(root: Path, schema: Schema) -> Path:
    """Where the workspace at ``root`` keeps ``schema``'s TOML file."""
    return root / SCHEMAS_DIR / f"{schema.name}.toml"


def replaced_schema(schema: Schema, dest: Path, new_text: str, known: dict[str, Schema],
                    path: str | Path, replace: bool) -> dict[str, Any] | None:
    """What adding ``schema`` would replace (for the audit log), or None when nothing.

    Raises:
        SchemaError: The name is taken and ``replace`` is False.
    """
    builtins = builtin_schemas()
    builtin = next((n for n in builtins if n.lower() == schema.name.lower()), None)
    if builtin is None and (not dest.is_file() or dest.read_text(encoding="utf-8") == new_text):
        return None
    what = f"the built-in schema {builtin}" if builtin else f"the workspace schema in {dest}"
    if builtin and builtin != schema.name:
        raise SchemaError(
            f"{path}: schema name {schema.name!r} is already taken by {what} (names are compared "
            f"without case). Rename it, or use name = \"{builtin}\" with --replace to replace "
            f"{builtin} on purpose")
    if not replace:
        raise SchemaError(
            f"{path}: schema name {schema.name!r} is already taken by {what} (built-in schemas: "
            f"{', '.join(sorted(builtins))}); adding it would replace that schema for every "
            "reader and page that uses it. Rename it (name = \"...\") or, to replace it on "
            "purpose, pass --replace (kbcurate schema add --replace FILE)")
    old = known.get(builtin or schema.name)
    return {"builtin": builtin is not None, "description": old.description if old else "",
            "slots": list(old.slot_names) if old else [],
            "toml": dest.read_text(encoding="utf-8") if dest.is_file() else None}
