"""Retraining from the sidebar and the Models timeline (AppTest): admins only, checked in the
library; progress visible on every page."""

from __future__ import annotations

import pytest
from app_helpers import APP, add_users, shown, sign_in
from loop_fixtures import make_loop_workspace
from streamlit.testing.v1 import AppTest

from curation.jobs.queue import list_jobs, wait_for_job
from curation.store.models import active_model
from curation.store.workspace import Workspace


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = tmp_path / "ws"
    with Workspace.init(root) as ws:
        make_loop_workspace(ws)
    add_users(root, alice="curator", boss="admin")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def _request(tiny_model_path):
    return {"schema": "disease_gene", "options": {"edel": {
        "base": str(tiny_model_path), "batch_size": 4, "max_seq_length": 32, "dev_depth": 0,
        "negatives_per_class": 2}}}


def test_curator_gets_no_retrain_and_forcing_it_is_refused(ws_root, tiny_model_path):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert not at.exception
    assert not [b for b in at.button if b.key == "retrain_start"]
    at.session_state["retrain_request"] = _request(tiny_model_path)
    at.run()
    with Workspace.open(ws_root) as ws:
        assert list_jobs(ws, "retrain") == []
    assert any("Retraining a model needs the admin role; alice (curator) may not"
               in shown(e.value) for e in at.sidebar.error)


def test_admin_retrains_from_the_sidebar_and_sees_the_timeline(ws_root, tiny_model_path):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "boss")
    assert not at.exception
    assert [b for b in at.button if b.key == "retrain_start"]
    captions = [c.value for c in at.sidebar.caption]
    assert any(c.startswith("Active: none") for c in captions)
    assert "Labels since it was trained: complete 0 · partial 0 · irrelevant 0" in [
        shown(c) for c in captions]
    at.session_state["retrain_request"] = _request(tiny_model_path)
    at.run()
    assert not at.exception
    with Workspace.open(ws_root) as ws:
        (job,) = list_jobs(ws, "retrain")
        done = wait_for_job(ws, job.id, timeout=300)
        assert done.status == "done", done.error
        assert active_model(ws, "disease_gene").id == "disease_gene-edel@1"
    at.switch_page("app_pages/models.py").run()
    assert not at.exception and at.header[0].value == "Models"
    table = at.dataframe[0].value
    assert list(table["version"]) == ["disease_gene-edel@1"]
    assert list(table["status"]) == ["active"] and table["ndcg@10"].iloc[0] >= 0
    at.text_input(key="rollback_reason").input("")
    at.button(key="rollback_submit").click().run()
    assert any("needs a written reason" in e.value for e in at.error)


def test_simulation_runs_as_an_admin_job_only(ws_root, tiny_model_path):
    from test_feedback_loop import _options  # the tiny-BERT retraining options

    from curation.training.retrain import retrain

    with Workspace.open(ws_root) as ws:
        v1 = retrain(ws, "disease_gene", _options(tiny_model_path), actor="boss").version
    request = {"schema": "disease_gene", "config": {"rounds": 1, "labels_per_round": 4,
                                                     "start": v1.id}}
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.switch_page("app_pages/models.py").run()
    assert not [b for b in at.button if b.key == "sim_start_button"]
    at.session_state["simulate_request"] = dict(request)
    at.run()
    assert any("needs the admin role" in shown(e.value) for e in at.error)
    with Workspace.open(ws_root) as ws:
        assert list_jobs(ws, "simulate") == []

    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "boss")
    at.switch_page("app_pages/models.py").run()
    assert [b for b in at.button if b.key == "sim_start_button"]
    at.session_state["simulate_request"] = dict(request)
    at.run()
    with Workspace.open(ws_root) as ws:
        (job,) = list_jobs(ws, "simulate")
        done = wait_for_job(ws, job.id, timeout=300)
        assert done.status == "done", done.error
        assert [r["round"] for r in done.result["rounds"]] == [0, 1]
    at.run()
    assert not at.exception
    table = at.dataframe[-1].value
    assert list(table["round"]) == [0, 1] and list(table["labels"]) == [0, 4]


def test_a_cancelled_round_says_who_cancelled_it(ws_root, tiny_model_path):
    """Issue 29 item 6: a cancelled retrain no longer just vanishes from the sidebar."""
    from curation.access.users import Role, User
    from curation.jobs.queue import cancel_job, submit_job

    boss = User("boss", Role.ADMIN)
    with Workspace.open(ws_root) as ws:
        job = submit_job(ws, "retrain", _request(tiny_model_path), user=boss, start=False)
        cancel_job(ws, job.id, user=boss)
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    captions = [shown(c.value) for c in at.sidebar.caption]
    assert f"Retraining job {job.id} (disease_gene) cancelled: cancelled by boss" in captions
