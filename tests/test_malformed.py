"""Malformed inputs for every reader: one clear error each, and no trace in the workspace.

``tests/fixtures/malformed/EXPECTED.toml`` maps each hand-made file to the reader that must refuse
it and a regex of the message. For every file: the reader raises a
:class:`~kb_sources.errors.CurationError` that names the file and matches; importing it into a
fresh workspace (through ``import_file`` and, for registry readers, ``import_items`` with one
record per transaction so earlier good records are committed first) raises the same error and
leaves the workspace's counts, audit log and schema files as they were.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from curation.store.importer import (
    import_citations,
    import_file,
    import_items,
    import_mesh_headings,
    import_mesh_tree,
)
from curation.store.workspace import Workspace
from kb_sources.citations import read_citation_edges
from kb_sources.errors import CurationError
from kb_sources.mesh import read_mesh_headings, read_mesh_trees
from kb_sources.registry import get_reader, readers
from kb_sources.schema import load_schema

FOLDER = Path(__file__).parent / "fixtures" / "malformed"
EXPECTED = tomllib.loads((FOLDER / "EXPECTED.toml").read_text(encoding="utf-8"))
CASES: dict[str, dict[str, Any]] = EXPECTED["cases"]

#: Readers outside the registry: name -> (read the file, import it into a workspace).
OTHER_READERS: dict[str, tuple[Callable[[Path], object], Callable[[Workspace, Path], object]]] = {
    "mesh-tree": (read_mesh_trees, lambda ws, p: import_mesh_tree(ws, p, progress=False)),
    "mesh-headings": (lambda p: list(read_mesh_headings(p)),
                      lambda ws, p: import_mesh_headings(ws, p, progress=False)),
    "citations": (lambda p: list(read_citation_edges(p)),
                   lambda ws, p: import_citations(ws, p, progress=False)),
    "schema": (load_schema, lambda ws, p: ws.add_schema(p)),
}


@dataclass(frozen=True)
class Case:
    """One malformed file and how it is read."""

    file: Path
    reader: str
    match: str
    path: Path
    options: dict[str, object] = field(default_factory=dict)

    @classmethod
    def load(cls, name: str) -> Case:
        raw = CASES[name]
        file = FOLDER / name
        options: dict[str, object] = {
            k: FOLDER / v if isinstance(v, str) and (FOLDER / v).is_file() else v
            for k, v in raw.get("options", {}).items()}
        if "as_option" in raw:
            options[raw["as_option"]] = file
        return cls(file, raw["reader"], raw["match"], FOLDER / raw.get("path", name), options)

    @property
    def registry(self) -> tuple[str, str] | None:
        kind, _, name = self.reader.partition(":")
        return (kind, name) if name else None

    def read(self) -> object:
        if self.registry:
            return list(get_reader(*self.registry).read(self.path, **self.options))
        return OTHER_READERS[self.reader][0](self.path)

    def import_into(self, ws: Workspace) -> object:
        if self.registry:
            kind, name = self.registry
            return import_file(ws, kind, name, self.path, progress=False,  # type: ignore[arg-type]
                               **self.options)
        return OTHER_READERS[self.reader][1](ws, self.path)


def _snapshot(ws: Workspace) -> dict[str, object]:
    """Everything an import could leave behind."""
    return {
        "stats": ws.stats().to_json(),
        "audit": ws.conn.execute("SELECT COUNT(*) FROM audit_log").fetchone()[0],
        "schemas": sorted(p.name for p in (ws.root / "schemas").glob("*")),
    }


def test_every_file_has_an_expected_error() -> None:
    files = {p.name for p in FOLDER.iterdir()} - {"EXPECTED.toml"}
    assert files == set(CASES) | set(EXPECTED["support"]["files"])
    assert len(CASES) >= 40
    covered = {CASES[name]["reader"] for name in CASES}
    registered = {f"{s.kind}:{s.name}" for s in readers("kb") + readers("docs")}
    assert covered == registered | set(OTHER_READERS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reader_refuses_with_one_clear_error(name: str) -> None:
    case = Case.load(name)
    with pytest.raises(CurationError) as info:
        case.read()
    message = str(info.value)
    assert str(case.file) in message
    assert re.search(case.match, message), f"{case.match!r} not in {message!r}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_import_leaves_workspace_unchanged(name: str, tmp_path: Path) -> None:
    case = Case.load(name)
    with Workspace.init(tmp_path / "ws") as ws:
        if "ws_schema" in CASES[name]:
            ws.add_schema(FOLDER / CASES[name]["ws_schema"])
        before = _snapshot(ws)
        with pytest.raises(CurationError, match=case.match):
            case.import_into(ws)
        assert _snapshot(ws) == before
        if case.registry:  # one record per transaction: good records are committed first
            with pytest.raises(CurationError, match=case.match):
                import_items(ws, get_reader(*case.registry).read(case.path, **case.options),
                             reader=case.reader, path=str(case.path), progress=False,
                             batch_size=1)
            assert _snapshot(ws) == before
