"""Retraining from the sidebar and the Models timeline (AppTest): admins only, checked in the
library; progress visible on every page."""

from __future__ import annotations

import json
import re

import pytest
from app_helpers import APP, add_users, shown, sign_in
from loop_fixtures import make_loop_workspace
from streamlit.testing.v1 import AppTest

from curation.jobs.queue import list_jobs, wait_for_job
from curation.store.models import Models
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
        "negatives_per_class": 2},
        # the hand-made KB has 2 test queries: the gate promotes on < 20 only with a reason
        "small_test_reason": "hand-made test KB"}}


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
        assert Models(ws).active("disease_gene").id == "disease_gene-edel@1"
    at.switch_page("app_pages/models.py").run()
    assert not at.exception and at.header[0].value == "Models"
    table = at.dataframe[0].value
    assert list(table["version"]) == ["disease_gene-edel@1"]
    assert list(table["status"]) == ["active"] and table["ndcg@10"].iloc[0] >= 0
    at.text_input(key="rollback_reason").input("")
    at.button(key="rollback_submit").click().run()
    assert any("needs a written reason" in e.value for e in at.error)


def test_the_sidebar_counts_what_the_next_round_uses_and_what_it_cannot(ws_root):
    """Issue 44 item 3: the counter is the round's own selection; the rest is said with why."""
    from curation.evaluation.harness import build_task
    from curation.store.labels import Labels

    with Workspace.open(ws_root) as ws:
        q = build_task(ws, "disease_gene").split("test")[0]  # a held-out relation: it trains
        for user, grade in (("alice", "complete"), ("ann", "irrelevant")):  # ann: annotator
            Labels(ws).record(user=user, schema="disease_gene", query_key=q.qid,
                              query_text=q.text, doc_id=q.gold[0], grade=grade)
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "boss")
    assert not at.exception
    captions = [shown(c.value) for c in at.sidebar.caption]
    assert "Labels since it was trained: complete 1 · partial 0 · irrelevant 0" in captions
    assert ("Not usable: 1 — overruled 1 (another label of the same abstract for the same "
            "query wins (the more senior role, then the latest))") in captions
    assert at.selectbox(key="retrain_evaluation").value == "corpus"  # "pool": a cheaper gate


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


# -- issue 26: activating is a background job; the chart shows evaluated versions only -----------
def _two_versions(root, tiny_model_path):
    """disease_gene-edel@1 active (no index built), disease_gene-edel@2 a candidate."""
    from curation.access.users import Role, User

    with Workspace.open(root) as ws:
        ids = [Models(ws).register(schema="disease_gene", recipe="edel", base_model="tiny",
                                   model_dir=tiny_model_path, created_by="boss",
                                   manifest={"max_seq_length": 32}).id for _ in range(2)]
        Models(ws).activate(ids[0], User("boss", Role.ADMIN), reason="first")
    return ids


def test_activate_returns_at_once_with_progress_not_the_old_error(ws_root, tiny_model_path):
    v1, v2 = _two_versions(ws_root, tiny_model_path)
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "boss")
    at.switch_page("app_pages/models.py").run()
    at.selectbox(key="rollback_version").set_value(v2)
    at.text_input(key="rollback_reason").input("")
    at.button(key="rollback_submit").click().run()
    assert [shown(e.value) for e in at.error] == [
        "Activating a model version needs a written reason (it is audited); say why, e.g. "
        "'spot checks on 20 queries look better'"]
    at.text_input(key="rollback_reason").input("spot checks look better")
    at.button(key="rollback_submit").click().run()
    assert not at.exception and not at.error  # the old error is gone at once
    (info,) = [shown(i.value) for i in at.info if "in the background" in i.value]
    assert re.fullmatch(rf"Activating {v2} in the background \(job \d+\): building the index of "
                        rf"{v2}: \d+ of 50 documents\. {v1} stays active until then\.", info), info
    with Workspace.open(ws_root) as ws:
        (job,) = list_jobs(ws, "activate")
        done = wait_for_job(ws, job.id, timeout=240)
        assert done.status == "done", done.error
        assert Models(ws).active("disease_gene").id == v2
        assert done.result["documents"] == 50 and done.result["docs_per_s"] > 0


def test_the_chart_shows_evaluated_versions_and_lists_the_others(ws_root, tiny_model_path):

    v1, v2 = _two_versions(ws_root, tiny_model_path)
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.switch_page("app_pages/models.py").run()
    assert not at.exception and not at.get("plotly_chart")  # no empty chart with a -1..4 axis
    assert ("Not evaluated on the test split (no test metrics, so not charted): "
            f"{v1}, {v2}") in [shown(c.value) for c in at.caption]
    with Workspace.open(ws_root) as ws:
        Models(ws).update_metrics(v2, {"test_ndcg@10": 0.42, "test_entity_recall@10": 0.6},
                                  actor="boss")
    at.run()
    (chart,) = at.get("plotly_chart")
    figure = json.loads(chart.proto.spec)
    assert [t["x"] for t in figure["data"]] == [[v2], [v2]]
    assert [t["y"] for t in figure["data"]] == [[0.42], [0.6]]
    assert figure["layout"]["yaxis"]["range"] == [0, 1]
    assert ("Not evaluated on the test split (no test metrics, so not charted): "
            f"{v1}") in [shown(c.value) for c in at.caption]


def test_the_sidebar_panel_shows_running_and_ended_activations(ws_root, tiny_model_path,
                                                                monkeypatch):
    from curation.access.users import Role, User
    from curation.jobs.queue import run_job
    from curation.training.activation import start_activation

    v1, v2 = _two_versions(ws_root, tiny_model_path)
    with Workspace.open(ws_root) as ws:
        job = start_activation(ws, User("boss", Role.ADMIN), v2, "better", start=False)

    def page():
        import os

        from app_pages.activation_panel import activation_sidebar
        from app_pages.common import AppContext, init_state
        from curation.access.users import Role, User
        from curation.store.workspace import Workspace

        init_state()
        activation_sidebar(AppContext(Workspace.open(os.environ["KBCURATE_WORKSPACE"]),
                                      User("alice", Role.CURATOR)))

    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception
    (bar,) = at.sidebar.get("progress")
    assert f"Job {job.id} (activate): queued" in bar.proto.text
    with Workspace.open(ws_root) as ws:
        assert run_job(ws, job.id).status == "done"
    at.run()
    assert not at.sidebar.get("progress")
    (caption,) = [shown(c.value) for c in at.sidebar.caption]
    assert re.fullmatch(rf"{v2} is now the active disease_gene model \(job {job.id}: index of 50 "
                        r"documents built in \d+ s, [\d.]+ documents/s\)\.", caption), caption


def test_a_failed_watch_run_says_why_on_the_models_page(ws_root):
    """Issue 37 item 2: a failed watch run says why on the Models page (the next run catches
    up); a done run says nothing there."""
    from curation.store.watches import RunCounts, Watches

    with Workspace.open(ws_root) as ws:
        watches = Watches(ws)
        ids = [watches.add(owner="alice", schema="disease_gene", kind="relation", target=t,
                           spec={}, label=label, pubmed_query='"x"[tiab]', max_hits=10,
                           every_days=1, mindate="2026-11-01", at="2026-11-20T10:00:00+00:00")
               for t, label in (("a", "melanoma <b>x</b>"), ("b", "retinoblastoma"))]
        watches.record_run(ids[0], RunCounts('"x"[tiab]', "2026-11-01", "2026-11-27",
                                             error="PubMed answered 500"), actor="alice",
                           started_at="2026-11-27T06:00:00+00:00",
                           finished_at="2026-11-27T06:00:05+00:00")
        watches.record_run(ids[1], RunCounts('"x"[tiab]', "2026-11-01", "2026-11-27"),
                           actor="alice", started_at="2026-11-27T06:00:00+00:00",
                           finished_at="2026-11-27T06:00:05+00:00")
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "boss")
    at.switch_page("app_pages/models.py").run()
    assert not at.exception
    warnings = [shown(w.value) for w in at.warning if "PubMed watch" in shown(w.value)]
    assert warnings == [f"The PubMed watch {ids[0]} of alice (melanoma <b>x</b>) failed on "
                        "2026-11-27 06:00 UTC: PubMed answered 500. Its next run catches up "
                        "from the last successful run."]
