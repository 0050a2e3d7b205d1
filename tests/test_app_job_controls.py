"""Issue 36 items 7 and 9: a job's progress says when it started, and *Cancel job* shows only
to those who may cancel it (its owner, or an admin); others got a refusal on click."""

from __future__ import annotations

import pytest
from app_helpers import shown as shown_text
from streamlit.testing.v1 import AppTest

from curation.access.users import Role, User
from curation.jobs.queue import may_cancel, submit_job
from curation.store.workspace import Workspace


def _page():
    import os

    from app_pages.common import init_state, job_status
    from curation.access.users import Role, User
    from curation.jobs.queue import get_job
    from curation.store.workspace import Workspace

    init_state()
    ws = Workspace.open(os.environ["KBCURATE_WORKSPACE"])
    viewer = User(os.environ["VIEWER"], Role(os.environ["VIEWER_ROLE"]))
    job_status(ws, get_job(ws, int(os.environ["JOB_ID"])), viewer, key="t")


@pytest.mark.parametrize(("viewer", "role", "shown"), [
    ("boss", "admin", True), ("ann", "annotator", False), ("cur", "curator", False),
    ("root", "admin", True)])
def test_cancel_shows_only_to_those_who_may(tmp_path, monkeypatch, viewer, role, shown):
    with Workspace.init(tmp_path / "ws") as ws:
        job = submit_job(ws, "selftest", {"steps": 1}, user=User("boss", Role.ADMIN),
                         start=False)
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("VIEWER", viewer)
    monkeypatch.setenv("VIEWER_ROLE", role)
    monkeypatch.setenv("JOB_ID", str(job.id))
    at = AppTest.from_function(_page, default_timeout=30).run()
    assert not at.exception
    assert [b.label for b in at.button] == (["Cancel job"] if shown else [])
    (bar,) = at.get("progress")
    started = job.created_at.replace("T", " ")[:16]
    assert f"Job {job.id} (selftest): queued since {started} UTC" in shown_text(bar.proto.text)


def test_may_cancel_follows_the_library_check(tmp_path):
    with Workspace.init(tmp_path / "ws") as ws:
        mine = submit_job(ws, "index", {"retriever": "bm25"}, user=User("cur", Role.CURATOR),
                          start=False)
    assert may_cancel(mine, User("cur", Role.CURATOR))
    assert not may_cancel(mine, User("other", Role.CURATOR))
    assert may_cancel(mine, User("boss", Role.ADMIN))
    assert not may_cancel(mine, None)
