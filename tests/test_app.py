"""The Streamlit app on a small workspace (AppTest, no browser)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from curation.importer import import_file
from curation.workspace import Workspace

APP = str(Path(__file__).resolve().parents[1] / "app.py")
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def app_ws(tmp_path, monkeypatch):
    root = tmp_path / "ws"
    with Workspace.init(root) as ws:
        import_file(ws, "kb", "civic", FIXTURES / "civic_v1_sample.tsv", progress=False)
        import_file(ws, "kb", "uniprot", FIXTURES / "uniprot_sample.dat", progress=False)
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def test_app_lists_partial_relations_and_renders_query(app_ws):
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert at.title[0].value == "kbcurate: KB curation assistant"
    assert at.selectbox(key="schema").value == "PO"
    (query,) = [t for t in at.text_input if t.label == "Query (edit freely)"]
    assert query.value == "Treatment for gene EGFR and variant L858R?"
    at.selectbox(key="schema").set_value("PTM").run()
    assert not at.exception
    (query,) = [t for t in at.text_input if t.label == "Query (edit freely)"]
    assert query.value.startswith("Catalysts for the phosphorylation of ")
    at.text_input(key="filter_text").set_value("CAMK2A").run()
    (query,) = [t for t in at.text_input if t.label == "Query (edit freely)"]
    assert " of CAMK2A at " in query.value


def test_app_without_workspace_explains(monkeypatch):
    monkeypatch.delenv("KBCURATE_WORKSPACE", raising=False)
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert "No workspace" in at.info[0].value


def test_app_with_bad_workspace_shows_error_not_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(tmp_path / "missing"))
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert "kbcurate init" in at.error[0].value
