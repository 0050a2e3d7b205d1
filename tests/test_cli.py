"""The kbcurate command line: commands, --workspace handling, errors and serve."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from browser_support import free_port

from curation.cli.main import main
from curation.cli.serve import streamlit_command
from curation.store.labels import Labels
from curation.store.migrations import SCHEMA_VERSION


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_readers_from_registry(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in ("civic", "oncokb", "uniprot", "pubtator", "tsv", "pubmed-xml", "medline", "jsonl"):
        assert f"  {name}" in out


def test_init_stats_json(tmp_path, capsys):
    ws = tmp_path / "ws"
    code, out, _ = run_cli(capsys, "init", str(ws))
    assert code == 0 and "workspace ready" in out
    code, out, _ = run_cli(capsys, "stats", "--json", "--workspace", str(ws))
    data = json.loads(out)
    assert code == 0
    assert data["documents"] == 0 and data["relations_by_source"] == {}
    assert data["labels"] == 0 and data["model_versions"] == []
    assert data["schema_version"] == SCHEMA_VERSION


def test_workspace_from_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(tmp_path / "envws"))
    assert run_cli(capsys, "init")[0] == 0
    code, out, _ = run_cli(capsys, "stats")
    assert code == 0 and "documents" in out


def test_missing_workspace_is_one_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KBCURATE_WORKSPACE", raising=False)
    code, _, err = run_cli(capsys, "stats")
    assert code == 2 and "No workspace given: pass --workspace DIR" in err
    code, _, err = run_cli(capsys, "stats", "--workspace", str(tmp_path / "none"))
    assert code == 2 and "kbcurate init" in err and "Traceback" not in err


def test_unknown_reader_lists_options(tmp_path, capsys):
    run_cli(capsys, "init", str(tmp_path / "ws"))
    code, _, err = run_cli(capsys, "import", "kb", "civik", "x.tsv", "-w", str(tmp_path / "ws"))
    assert code == 2
    assert "Unknown KB reader 'civik'. Available options: civic, oncokb, pubtator, tsv, uniprot" \
        in err


def test_query_and_schema_list(tmp_path, capsys):
    ws = str(tmp_path / "ws")
    run_cli(capsys, "init", ws)
    code, out, _ = run_cli(capsys, "query", "-w", ws, "--schema", "PO", "gene=BRAF",
                           "variant=V600E")
    assert (code, out.strip()) == (0, "Treatment for gene BRAF and variant V600E?")
    code, _, err = run_cli(capsys, "query", "-w", ws, "--schema", "PO", "--template", "0",
                           "gene=BRAF")
    assert code == 2 and "needs slot(s) variant" in err
    code, out, _ = run_cli(capsys, "schema", "list", "-w", ws)
    assert "PTM" in out and "Catalysts for the {ptm} of {substrate} at {residue}?" in out


def test_serve_answers_http_on_loopback(tmp_path, capsys):
    ws = tmp_path / "ws"
    run_cli(capsys, "init", str(ws))
    port = free_port()
    cmd = streamlit_command(ws, "127.0.0.1", port)
    assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert cmd[cmd.index("--client.toolbarMode") + 1] == "viewer"  # no Deploy button
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={"KBCURATE_WORKSPACE": str(ws), "PATH": "/usr/bin:/bin",
                                 "HOME": str(tmp_path)})
    try:
        body = ""
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                            timeout=2) as resp:
                    body = resp.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        assert body == "ok"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
            assert resp.status == 200 and "<title>" in resp.read().decode().lower()
        # the session-cookie route is served beside Streamlit, and refuses an unknown hand-off
        request = urllib.request.Request(f"http://127.0.0.1:{port}/_kb/session", method="POST",
                                         data=b'{"nonce": "forged"}')
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 403 and "set-cookie" not in refused.value.headers
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_users_and_labels_commands(tmp_path, capsys, monkeypatch):
    import io

    from curation.store.workspace import Workspace

    ws = str(tmp_path / "ws")
    run_cli(capsys, "init", ws)
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret-pass\n"))
    code, out, _ = run_cli(capsys, "users", "add", "alice", "--role", "admin",
                           "--password-stdin", "-w", ws)
    assert code == 0 and "alice (admin)" in out
    assert run_cli(capsys, "users", "list", "-w", ws)[1].split() == ["alice", "admin"]
    with Workspace.open(ws) as w:
        for user, grade in (("alice", "complete"), ("bob", "complete")):
            Labels(w).record(user=user, schema="PO", query_key="q", query_text="t", doc_id="1",
                             grade=grade)
    code, out, _ = run_cli(capsys, "labels", "export", str(tmp_path / "l.csv"), "-w", ws,
                           "--user", "bob")
    assert code == 0 and out.startswith("1 labels written")
    assert (tmp_path / "l.csv").read_text().count("\n") == 2
    code, out, _ = run_cli(capsys, "labels", "agreement", "alice", "bob", "-w", ws)
    assert "1 shared items; observed agreement 1.000" in out


def test_fetch_pubmed_imports_into_workspace(tmp_path, capsys, monkeypatch, fixtures_dir):
    from kb_sources.pubmed_xml import read_pubmed_xml

    seen = {}

    def fake_fetch(pmids, settings):
        seen["pmids"], seen["settings"] = list(pmids), settings
        yield from read_pubmed_xml(fixtures_dir / "pubmed_sample.xml")

    monkeypatch.setattr("curation.cli.online.fetch_pubmed", fake_fetch)
    ws = tmp_path / "ws"
    run_cli(capsys, "init", str(ws))
    code, _, err = run_cli(capsys, "fetch", "pubmed", "1", "2", "-w", str(ws))
    assert code == 2 and "NCBI needs a contact email" in err
    code, out, _ = run_cli(capsys, "fetch", "pubmed", "1", "2", "--email", "me@lab.org",
                           "--api-key", "K", "-w", str(ws), "-q")
    assert code == 0 and "documents +2" in out
    assert seen["pmids"] == ["1", "2"] and seen["settings"].requests_per_second == 10
    assert seen["settings"].cache_dir == ws.resolve() / "cache" / "entrez"


def test_schema_add_refuses_builtin_name_unless_replace(tmp_path, capsys):
    ws = str(tmp_path / "ws")
    run_cli(capsys, "init", ws)
    shadow = tmp_path / "po.toml"
    shadow.write_text('name = "PO"\nanswer = "drug"\ntemplates = ["Drugs for {gene}?"]\n'
                      '[[slots]]\nname = "gene"\ntype = "gene"\nquery = true\n'
                      '[[slots]]\nname = "drug"\ntype = "drug"\n')
    code, _, err = run_cli(capsys, "schema", "add", str(shadow), "-w", ws)
    assert code == 2 and "is already taken by the built-in schema PO" in err
    assert "kbcurate schema add --replace FILE" in err and "Traceback" not in err
    assert "variant:variant?" in run_cli(capsys, "schema", "list", "-w", ws)[1]
    code, out, _ = run_cli(capsys, "schema", "add", "--replace", str(shadow), "-w", ws)
    assert code == 0 and out.startswith("schema PO saved to")
    assert "PO               gene:gene?, drug:drug  -> drug" in run_cli(
        capsys, "schema", "list", "-w", ws)[1]


def test_sqlite_error_reaching_the_top_is_one_line(tmp_path, capsys, monkeypatch):
    import sqlite3

    ws = str(tmp_path / "ws")
    run_cli(capsys, "init", ws)

    def locked(args):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr("curation.cli.commands.cmd_stats", locked)
    code, out, err = run_cli(capsys, "stats", "-w", ws)
    assert code == 2 and out == ""
    assert err.startswith(f"error: The workspace {tmp_path / 'ws'} is busy (database is locked)")
    assert "Another import is running; retry when it has finished" in err

    def bug(args):
        raise sqlite3.IntegrityError("UNIQUE constraint failed: labels.id")

    monkeypatch.setattr("curation.cli.commands.cmd_stats", bug)
    code, _, err = run_cli(capsys, "stats", "-w", ws)
    assert code == 2 and "Traceback" not in err
    assert err.strip() == (f"error: unexpected database error in workspace {tmp_path / 'ws'}: "
                           "UNIQUE constraint failed: labels.id (IntegrityError). This is a bug in "
                           "kbcurate or a damaged workspace; rerun with --verbose for the details "
                           "and report it")


def test_import_while_another_holds_the_lock_says_retry(tmp_path, capsys, monkeypatch,
                                                        fixtures_dir):
    import sqlite3

    ws = tmp_path / "ws"
    run_cli(capsys, "init", str(ws))
    monkeypatch.setattr("curation.store.connection.LOCK_WAIT_S", 0.0)
    other = sqlite3.connect(ws / "workspace.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        code, _, err = run_cli(capsys, "import", "docs", "jsonl",
                               str(fixtures_dir / "docs_sample.jsonl"), "-w", str(ws), "-q")
    finally:
        other.rollback()
        other.close()
    assert code == 2 and "Traceback" not in err
    assert "is busy (database is locked)" in err and "we waited for 0 s" in err
    code, out, _ = run_cli(capsys, "stats", "--json", "-w", str(ws))
    assert json.loads(out)["documents"] == 0


def test_read_only_workspace_commands(tmp_path, capsys, monkeypatch, fixtures_dir):
    import os

    ws = tmp_path / "ws"
    run_cli(capsys, "init", str(ws))
    if os.geteuid() == 0:  # chmod does not bind root: report what it would for another user
        monkeypatch.setattr("curation.store.connection.not_writable_reason",
                            lambda path: f"the folder {path.parent} is not writable")
    (ws / "workspace.sqlite").chmod(0o444)
    ws.chmod(0o555)
    try:
        code, out, err = run_cli(capsys, "stats", "--json", "-w", str(ws))
        assert (code, err) == (0, "") and json.loads(out)["documents"] == 0
        code, out, _ = run_cli(capsys, "relations", "-w", str(ws))
        assert (code, out.strip()) == (0, "no partial relations of schema PO match")
        code, out, _ = run_cli(capsys, "labels", "export", str(tmp_path / "l.csv"), "-w", str(ws))
        assert code == 0 and out.startswith("0 labels written")
        schema = str(fixtures_dir / "drug_target_schema.toml")
        code, _, err = run_cli(capsys, "schema", "add", schema, "-w", str(ws))
        assert code == 2 and "is not writable). This step needs to write" in err
        assert "chmod u+w" in err
        assert "not a kbcurate workspace database" not in err
    finally:
        ws.chmod(0o755)
        (ws / "workspace.sqlite").chmod(0o644)
