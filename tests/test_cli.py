"""The kbcurate command line: commands, --workspace handling, errors and serve."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from curation.cli import main
from curation.serve import streamlit_command


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
    assert data["labels"] == 0 and data["model_versions"] == [] and data["schema_version"] == 2


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_answers_http_on_loopback(tmp_path, capsys):
    ws = tmp_path / "ws"
    run_cli(capsys, "init", str(ws))
    port = _free_port()
    cmd = streamlit_command(ws, "127.0.0.1", port)
    assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"]
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
    finally:
        proc.terminate()
        proc.wait(timeout=20)
