"""The Curate page's "Search PubMed" (AppTest, no browser; PubMed is tests/eutils_server.py).

The search runs as a ``pubmed_search`` job in a worker process, which reaches the loopback
E-utilities through ``$KBCURATE_EUTILS_URL`` and signs with ``$NCBI_EMAIL`` (both inherited).
"""

from __future__ import annotations

import os

import pytest
from app_helpers import APP, add_users, build_app_workspace, sign_in
from eutils_server import Fault, eutils_server_fixture  # noqa: F401 (fixture)
from streamlit.testing.v1 import AppTest

from curation.jobs.queue import list_jobs, wait_for_job
from curation.pubmed.query import build_pubmed_query
from curation.store.importer import import_items
from curation.store.jobs import Jobs
from curation.store.pubmed_hits import PubmedHits
from curation.store.workspace import Workspace
from kb_sources.types import Document

BADGE = '<span class="kb-badge kb-pubmed">from PubMed, '


@pytest.fixture
def ws_root(tmp_path, monkeypatch, eutils_server):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator", ann="annotator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    monkeypatch.setenv("NCBI_EMAIL", "alice@lab.org")
    return root


def braf_page(name: str = "alice") -> AppTest:
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), name)
    at.text_input(key="rel_search").set_value("BRAF").run()
    assert not at.exception and not at.error
    return at


def cards(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith('<div class="kb-meta">')]


def query_area(at: AppTest):
    (area,) = [t for t in at.text_area if t.label == "PubMed query (edit freely)"]
    return area


def test_search_pubmed_runs_in_the_background_and_badges_the_new_cards(ws_root, eutils_server):
    at = braf_page()
    before = cards(at)
    assert before and not any(BADGE in c for c in before)
    with Workspace.open(ws_root) as ws:
        built = build_pubmed_query(ws, "PO", {"gene": "BRAF", "variant": "V600E"}).text
    assert query_area(at).value == built
    query_area(at).set_value('"BRAF"[tiab] AND "V600E"[tiab]')
    at.button(key="pubmed_search").click().run()
    assert not at.exception
    assert any("Searching PubMed in the background" in i.value for i in at.info)
    bars = [p.proto.text for p in at.get("progress")]
    assert any(t.startswith("Job ") and "pubmed" in t for t in bars)  # the job's bar
    with Workspace.open(ws_root) as ws:
        (job,) = list_jobs(ws, "pubmed_search")
        assert job.params["query"] == '"BRAF"[tiab] AND "V600E"[tiab]'
        done = wait_for_job(ws, job.id)
        assert done.status.value == "done", done.error
    at.run()
    assert not at.exception
    (success,) = [s.value for s in at.success if "Last PubMed search" in s.value]
    assert "found 10, fetched 9, imported 9 new abstracts" in success
    after = cards(at)
    badged = [c for c in after if BADGE in c]
    assert badged and (len(before), len(after)) == (4, 10)  # top 10 now: PubMed added some
    with Workspace.open(ws_root) as ws:
        date = next(iter(PubmedHits(ws).fetch_dates(["99200001"]).values()))[:10]
    assert all(f"{BADGE}{date}</span>" in c for c in badged)
    assert eutils_server.requests("esearch.fcgi")[0].params["term"] == [
        '"BRAF"[tiab] AND "V600E"[tiab]']


def test_pubmed_down_is_a_warning_and_the_page_keeps_working(ws_root, eutils_server):
    eutils_server.faults.append(Fault("error", message="Search Backend failed"))
    at = braf_page()
    at.button(key="pubmed_search").click().run()
    with Workspace.open(ws_root) as ws:
        (job,) = list_jobs(ws, "pubmed_search")
        assert wait_for_job(ws, job.id).status.value == "failed"
    at.run()
    assert not at.exception and not at.error
    (warning,) = [w.value for w in at.warning if "PubMed search failed" in w.value]
    assert "Search Backend failed" in warning and "everything else on this page keeps " \
                                                  "working" in warning
    assert cards(at)  # the ranked list is still there
    assert at.button(key="pubmed_search")  # and the search can be tried again


def test_annotators_see_no_search_button(ws_root):
    at = braf_page("ann")
    assert any("needs the curator or admin role" in c.value for c in at.caption)
    assert not [b for b in at.button if b.key == "pubmed_search"]


def test_while_a_search_refreshes_the_index_the_earlier_list_stays(ws_root):
    at = braf_page()
    before = cards(at)
    with Workspace.open(ws_root) as ws:  # a search that has imported, not yet indexed
        job = Jobs(ws).insert("pubmed_search", {"schema": "PO", "slots": {"gene": "KRAS"}},
                              "alice")
        assert Jobs(ws).claim(job, pid=os.getpid())
        import_items(ws, [Document("99200022", "Sotorasib for KRAS G12C.", "KRAS G12C.",
                                   source="pubmed")], reader="docs:test", path="t",
                     progress=False)
    at.run()
    assert not at.exception
    assert any("A PubMed search is refreshing the index" in c.value for c in at.caption)
    assert cards(at) == before
    assert not any("Building the bm25 index" in i.value for i in at.info)
    with Workspace.open(ws_root) as ws:
        assert list_jobs(ws, "index") == []  # the search's job refreshes it, not a second one
