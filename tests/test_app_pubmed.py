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


# -- issue 44 item 9: the NCBI contact set on the panel ------------------------------------
#: An API key as NCBI issues them (36 letters and digits); it must never show again.
SECRET_KEY = "5e1f0c2ab77d4e39a1c8b6f0d2e4a9c3b7f1"


@pytest.fixture
def contactless_root(tmp_path, monkeypatch):
    """The app workspace with a curator and an admin and no NCBI contact anywhere."""
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator", boss="admin")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    monkeypatch.delenv("NCBI_EMAIL", raising=False)
    monkeypatch.delenv("NCBI_API_KEY", raising=False)
    return root


def page_text(at: AppTest) -> str:
    """Everything the page holds (every element's message, widget values included)."""
    return "\n".join(str(getattr(node, "proto", "")) for block in (at.main, at.sidebar)
                     for node in block)


def test_an_admin_sets_the_ncbi_contact_on_the_panel_and_the_key_never_shows(
        contactless_root, caplog):
    from app_helpers import shown

    at = braf_page("boss")
    assert not [b for b in at.button if b.key == "pubmed_search"]  # no contact: no search
    assert any("PubMed search needs an NCBI contact email first" in i.value for i in at.info)
    key_field = at.text_input(key="ncbi_api_key")
    assert key_field.proto.type == key_field.proto.PASSWORD
    at.text_input(key="ncbi_email").input("boss@lab.org")
    key_field.input(SECRET_KEY)
    at.button(key="ncbi_save").click().run()
    assert not at.exception and not at.error
    assert [shown(s.value) for s in at.success] == [
        "Saved the NCBI contact email boss@lab.org; API key set."]
    assert at.button(key="pubmed_search")  # the panel now offers the search
    assert any(shown(c.value) == "NCBI contact: boss@lab.org (workspace), API key from the "
               "workspace" for c in at.caption)
    assert not [t for t in at.text_input if t.key in ("ncbi_email", "ncbi_api_key")]
    assert SECRET_KEY not in page_text(at) and SECRET_KEY not in caplog.text
    assert SECRET_KEY not in repr(at.session_state.to_dict())
    with Workspace.open(contactless_root) as ws:
        from curation.pubmed.ncbi import ncbi_settings

        got = ncbi_settings(ws)
        assert (got.email, got.api_key) == ("boss@lab.org", SECRET_KEY)  # stored
        audit = [(e.actor, e.object_id, e.after_value()) for e in ws.audit_log("setting")]
    assert ("boss", "ncbi.api_key", {"ncbi.api_key": "set"}) in audit
    assert ("boss", "ncbi.email", {"ncbi.email": "boss@lab.org"}) in audit
    assert SECRET_KEY not in repr(audit)
    at.run()
    assert SECRET_KEY not in page_text(at)


def test_an_admin_with_a_bad_email_is_told_and_nothing_is_stored(contactless_root):
    from app_helpers import shown

    at = braf_page("boss")
    at.text_input(key="ncbi_email").input("boss at lab")
    at.text_input(key="ncbi_api_key").input("not a key")
    at.button(key="ncbi_save").click().run()
    assert not at.exception
    (error,) = [shown(e.value) for e in at.error]
    assert error == ("'boss at lab' is not an email address (expected name@host, e.g. "
                     "curator@lab.org); NCBI needs one to contact you about your requests")
    assert "not a key" not in page_text(at)  # the key field is emptied either way
    assert not [b for b in at.button if b.key == "pubmed_search"]
    with Workspace.open(contactless_root) as ws:
        assert ws.audit_log("setting") == []


def test_a_curator_without_an_ncbi_contact_is_told_an_admin_sets_it(contactless_root):
    from curation.access.users import Role, User
    from curation.pubmed.ncbi import set_ncbi_contact
    from curation.store.errors import PermissionDenied

    at = braf_page("alice")
    assert not [t for t in at.text_input if t.key in ("ncbi_email", "ncbi_api_key")]
    assert not [b for b in at.button if b.key in ("ncbi_save", "pubmed_search")]
    (line,) = [i.value for i in at.info if "NCBI contact email" in i.value]
    assert line == ("PubMed search needs an NCBI contact email first: NCBI asks for one with "
                    "every request. An admin sets it here on this panel, or with `kbcurate "
                    "pubmed settings --email ADDRESS` (or NCBI_EMAIL in the server's "
                    "environment).")
    with Workspace.open(contactless_root) as ws:
        with pytest.raises(PermissionDenied, match="Changing the NCBI contact settings needs "
                                                   "the admin role; alice"):
            set_ncbi_contact(ws, user=User("alice", Role.CURATOR), email="alice@lab.org",
                             api_key=SECRET_KEY)
        assert ws.audit_log("setting") == []
