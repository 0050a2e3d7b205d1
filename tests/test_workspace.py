"""Workspace store: layout, WAL, migrations, transactions, audit, schemas."""

from __future__ import annotations

import sqlite3

import pytest

from curation.store.migrations import SCHEMA_VERSION
from curation.store.workspace import AREAS, DB_NAME, Workspace, WorkspaceError
from kb_sources.errors import SchemaError


def test_init_creates_layout_and_wal(tmp_path):
    with Workspace.init(tmp_path / "ws") as ws:
        assert ws.schema_version == SCHEMA_VERSION >= 5
        assert ws.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in ws.conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"documents", "relations", "entities", "synonyms", "labels", "models", "jobs",
            "audit_log", "imports", "annotations", "citations", "mesh_tree",
            "import_undo"} <= tables
    for area in AREAS:
        assert (tmp_path / "ws" / area).is_dir()


def test_init_twice_keeps_data(tmp_path):
    with Workspace.init(tmp_path / "ws") as ws, ws.transaction():
        ws.audit("me", "test", "thing", "1")
    with Workspace.init(tmp_path / "ws") as ws:
        assert [r.actor for r in ws.audit_log()] == ["me"]


def test_open_missing_workspace_names_fix(tmp_path):
    with pytest.raises(WorkspaceError, match=r"No workspace at .*kbcurate init"):
        Workspace.open(tmp_path / "nope")


def test_init_refuses_non_empty_foreign_folder(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("mine")
    with pytest.raises(WorkspaceError, match="non-empty folder"):
        Workspace.init(tmp_path / "x")


def test_open_rejects_non_sqlite_file(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / DB_NAME).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(WorkspaceError, match="not a kbcurate workspace database"):
        Workspace.open(tmp_path / "ws")


def test_forward_migration_applies_new_steps(tmp_path):
    from curation.store.migrations import MIGRATIONS

    with Workspace.init(tmp_path / "ws") as ws:
        extra = [*MIGRATIONS, "ALTER TABLE documents ADD COLUMN doi TEXT NOT NULL DEFAULT ''"]
        assert ws.migrate(extra) == 1
        assert ws.schema_version == SCHEMA_VERSION + 1
        cols = [r[1] for r in ws.conn.execute("PRAGMA table_info(documents)")]
        assert "doi" in cols
        assert ws.migrate(extra) == 0


def test_newer_database_is_refused(tmp_path):
    with Workspace.init(tmp_path / "ws") as ws:
        ws.conn.execute("PRAGMA user_version = 99")
    with pytest.raises(WorkspaceError, match="newer than this kbcurate supports"):
        Workspace.open(tmp_path / "ws")


def test_failed_migration_rolls_back(tmp_path):
    from curation.store.migrations import MIGRATIONS

    with Workspace.init(tmp_path / "ws") as ws:
        bad = [*MIGRATIONS, "CREATE TABLE t1 (x INTEGER); CREATE TABLE documents (y INTEGER)"]
        with pytest.raises(sqlite3.OperationalError):
            ws.migrate(bad)
        assert ws.schema_version == SCHEMA_VERSION
        names = {r[0] for r in ws.conn.execute("SELECT name FROM sqlite_master")}
        assert "t1" not in names


def test_transaction_rolls_back_on_error(tmp_workspace):
    ws = tmp_workspace
    with pytest.raises(RuntimeError), ws.transaction():
        ws.audit("me", "x", "t", "1")
        raise RuntimeError("boom")
    assert ws.audit_log() == []


def test_add_schema_copies_and_validates(tmp_workspace, tmp_path):
    good = tmp_path / "dt.toml"
    good.write_text('name = "drug_target"\nanswer = "target"\ntemplates = ["Targets of {drug}?"]\n'
                    '[[slots]]\nname = "drug"\ntype = "drug"\nquery = true\n'
                    '[[slots]]\nname = "target"\ntype = "gene"\n')
    schema = tmp_workspace.add_schema(good)
    assert schema.query_slots == ("drug",)
    assert "drug_target" in tmp_workspace.schemas()
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "b"\nanswer = "x"\ntemplates = ["{x}?"]\n'
                   '[[slots]]\nname = "x"\ntype = "gene"\nquery = true\n')
    with pytest.raises(SchemaError, match="cannot also be a query slot"):
        tmp_workspace.add_schema(bad)


def test_version_1_workspace_is_migrated_on_open(tmp_path):
    from curation.store.connection import connect
    from curation.store.migrations import MIGRATIONS

    root = tmp_path / "old"
    root.mkdir()
    old = Workspace(root, connect(root / DB_NAME))
    old.migrate(MIGRATIONS[:1])
    old.conn.execute("INSERT INTO jobs(kind, status, created_at, updated_at) "
                     "VALUES ('evaluate', 'done', 'x', 'x')")
    old.close()
    with Workspace.open(root) as ws:
        assert ws.schema_version == SCHEMA_VERSION
        assert ws.conn.execute("SELECT COUNT(*) FROM source_suggestions").fetchone()[0] == 0
        assert [tuple(r) for r in ws.conn.execute("SELECT kind, pid FROM jobs")] == [
            ("evaluate", None)]


SHADOW_PO = ('name = "{name}"\nanswer = "drug"\ntemplates = ["Drugs for {{gene}}?"]\n'
             '[[slots]]\nname = "gene"\ntype = "gene"\nquery = true\n'
             '[[slots]]\nname = "drug"\ntype = "drug"\n')


def test_schema_named_like_a_builtin_is_refused(tmp_workspace, tmp_path):
    path = tmp_path / "po.toml"
    path.write_text(SHADOW_PO.format(name="PO"))
    with pytest.raises(SchemaError, match=r"schema name 'PO' is already taken by the built-in "
                       r"schema PO \(built-in schemas: .*PO, PTM.*\); adding it would replace "
                       r"that schema .* pass --replace"):
        tmp_workspace.add_schema(path)
    path.write_text(SHADOW_PO.format(name="po"))
    for replace in (False, True):
        with pytest.raises(SchemaError, match=r"schema name 'po' is already taken by the "
                           r"built-in schema PO \(names are compared without case\)\. Rename "
                           r"it, or use name = \"PO\" with --replace"):
            tmp_workspace.add_schema(path, replace=replace)
    assert tmp_workspace.schemas()["PO"].slot_names == ("gene", "variant", "treatment")
    assert list((tmp_workspace.root / "schemas").iterdir()) == []
    assert tmp_workspace.audit_log("schema") == []


def test_replacing_a_builtin_schema_is_audited(tmp_workspace, tmp_path):
    path = tmp_path / "po.toml"
    path.write_text(SHADOW_PO.format(name="PO"))
    tmp_workspace.add_schema(path, actor="admin", replace=True)
    assert tmp_workspace.schemas()["PO"].slot_names == ("gene", "drug")
    (entry,) = tmp_workspace.audit_log("schema")
    assert (entry.action, entry.actor, entry.object_id) == ("replace", "admin", "PO")
    before = entry.before_value()
    assert before["builtin"] is True and before["slots"] == ["gene", "variant", "treatment"]
    assert entry.after_value()["toml"] == path.read_text()


def test_workspace_schema_is_not_silently_overwritten(tmp_workspace, fixtures_dir, tmp_path):
    source = fixtures_dir / "drug_target_schema.toml"
    tmp_workspace.add_schema(source)
    tmp_workspace.add_schema(source)  # the same file again is fine
    changed = tmp_path / "dt.toml"
    changed.write_text(source.read_text().replace("Molecular targets", "Targets"))
    with pytest.raises(SchemaError, match=r"already taken by the workspace schema in "
                       r".*drug_target.toml"):
        tmp_workspace.add_schema(changed)
    assert [e.action for e in tmp_workspace.audit_log("schema")] == ["add", "add"]
    tmp_workspace.add_schema(changed, replace=True)
    assert tmp_workspace.schemas()["drug_target"].templates[1] == "Targets of {drug}?"
