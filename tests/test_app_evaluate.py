"""The Evaluate page (AppTest): admin-only background runs checked on the server side."""

from __future__ import annotations

import time

import pytest
from app_helpers import APP, add_users, build_app_workspace, shown, sign_in
from streamlit.testing.v1 import AppTest

from curation.jobs.queue import JobStatus, list_jobs, wait_for_job
from curation.store.models import Models
from curation.store.workspace import Workspace

REQUEST = {"schema": "PO", "retrievers": ["bm25"], "split": "all"}


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator", boss="admin")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def evaluate_page(user: str) -> AppTest:
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), user)
    at.switch_page("app_pages/evaluate.py").run()
    assert not at.exception and at.subheader[0].value == "Evaluate"
    return at


def jobs(root):
    with Workspace.open(root) as ws:
        return list_jobs(ws)


def test_non_admin_cannot_start_an_evaluation_even_by_setting_state(ws_root):
    at = evaluate_page("alice")
    assert "needs the admin role" in at.info[0].value
    assert not [b for b in at.button if b.key == "eval_start"]  # not offered ...
    at.session_state["eval_request"] = dict(REQUEST)  # ... and forcing it is refused
    at.run()
    assert jobs(ws_root) == []
    (error,) = at.error
    assert "Starting a job of kind 'evaluate' needs the admin role; alice (curator) may not" \
        in shown(error.value)
    at.session_state["eval_schema"] = "PO"
    at.session_state["eval_retrievers"] = ["bm25"]
    at.session_state["eval_split"] = "all"
    at.session_state["eval_request"] = dict(REQUEST)
    at.run()
    assert jobs(ws_root) == [] and at.error


def test_admin_starts_a_background_run_that_finishes_with_metrics(ws_root):
    at = evaluate_page("boss")
    at.selectbox(key="eval_schema").set_value("PO")
    at.multiselect(key="eval_retrievers").set_value(["bm25"])
    at.selectbox(key="eval_split").set_value("all")
    started = time.time()
    at.button(key="eval_start").click().run()
    assert time.time() - started < 10  # the page does not wait for the run
    (job,) = jobs(ws_root)
    assert job.kind == "evaluate" and job.created_by == "boss"
    assert job.params == REQUEST
    assert any(f"Evaluation job {job.id} started" in s.value for s in at.success)
    assert at.get("progress")  # live progress while it runs (polled by a fragment)
    with Workspace.open(ws_root) as ws:
        done = wait_for_job(ws, job.id, timeout=120)
    assert done.status is JobStatus.DONE, done.error
    # the picker's labels carry no status (a browser kept "queued" there after the charts
    # came); the status line under it is drawn fresh on every run
    at.run()
    picker = at.selectbox(key="eval_job")
    assert all(status not in label for label in picker.options
               for status in ("queued", "running", "done"))
    assert any(c.value.startswith(f"Run {job.id}: done") for c in at.caption)
    metrics = done.result["retrievers"]["bm25"]
    assert 0.0 <= metrics["ndcg@10"] <= 1.0 and metrics["queries"] >= 2
    # a fresh session (a page refresh) finds the run in the workspace and charts it
    fresh = evaluate_page("boss")
    assert fresh.selectbox(key="eval_job").value == job.id
    charts = fresh.get("plotly_chart")
    assert len(charts) == 2
    assert fresh.selectbox(key="eval_metric").value == "ndcg@10"


def test_training_is_offered_to_admins_and_refused_to_others(ws_root):
    at = evaluate_page("alice")
    assert not [b for b in at.button if b.key == "train_start"]
    at.session_state["train_request"] = {"schema": "PO", "options": {"epochs": 1}}
    at.run()
    assert jobs(ws_root) == []
    assert any("Starting a job of kind 'train' needs the admin role" in e.value for e in at.error)

    at = evaluate_page("boss")
    assert [b for b in at.button if b.key == "train_start"]
    at.session_state["train_request"] = {"schema": "PO", "options": {"epochs": 0}}
    at.run()
    assert jobs(ws_root) == []  # refused before queueing, in the page's words
    assert any("TrainConfig.epochs must be an integer >= 1" in shown(e.value) for e in at.error)


def test_admin_starts_biohicl_with_entity_mesh_labels(ws_root):
    at = evaluate_page("boss")
    at.radio(key="train_recipe").set_value("biohicl").run()
    at.selectbox(key="train_schema").set_value("PO")
    at.checkbox(key="train_opt_biohicl_entity_mesh").check()  # the generated form's fields
    at.text_input(key="train_opt_biohicl_mesh_descriptors").input("annotations")
    at.button(key="train_start").click().run()
    (job,) = jobs(ws_root)
    assert (job.kind, job.params["recipe"], job.created_by) == ("train", "biohicl", "boss")
    assert job.params["options"]["entity_mesh"] is True
    assert job.params["options"]["mesh_descriptors"] == "annotations"
    with Workspace.open(ws_root) as ws:  # the app's small workspace has no MeSH tree
        done = wait_for_job(ws, job.id, timeout=120)
    assert done.status is JobStatus.FAILED and "MeSH" in done.error


def test_the_schemas_model_versions_are_offered_as_retrievers(ws_root, tiny_model_path):
    """Issue 26 item 3: the Evaluate page offered no model-version retrievers."""

    with Workspace.open(ws_root) as ws:
        version = Models(ws).register(schema="PO", recipe="edel", base_model="tiny",
                                      model_dir=tiny_model_path, created_by="boss",
                                      manifest={"max_seq_length": 32}).id
    at = evaluate_page("boss")
    at.selectbox(key="eval_schema").set_value("PO").run()
    options = at.multiselect(key="eval_retrievers").options
    # then "best" (issue 36 item 6; "ranked" too once the schema has an active ranker)
    assert options[-3:] == [f"dense · {version}", f"hybrid · {version}", "best"]
    assert "bm25" in options and "dense+rerank" in options
    at.multiselect(key="eval_retrievers").set_value(["bm25", f"dense · {version}"]).run()
    assert at.multiselect(key="eval_retrievers").value == ["bm25", f"dense · {version}"]
    others = [s for s in at.selectbox(key="eval_schema").options if s != "PO"]
    if others:  # another schema has no PO version: the choice drops it, keeps bm25
        at.selectbox(key="eval_schema").set_value(others[0]).run()
        assert not at.exception
        assert at.multiselect(key="eval_retrievers").value == ["bm25"]
        assert f"dense · {version}" not in at.multiselect(key="eval_retrievers").options


def test_a_model_version_is_evaluated_under_its_menu_name(ws_root, tiny_model_path):
    """Issue 26 item 3: 'dense · V' runs with V's index and reports under its own name."""

    with Workspace.open(ws_root) as ws:
        version = Models(ws).register(schema="PO", recipe="edel", base_model="tiny",
                                      model_dir=tiny_model_path, created_by="boss",
                                      manifest={"max_seq_length": 32}).id
    at = evaluate_page("boss")
    at.selectbox(key="eval_schema").set_value("PO").run()
    at.multiselect(key="eval_retrievers").set_value(["bm25", f"dense · {version}"])
    at.selectbox(key="eval_split").set_value("all")
    at.button(key="eval_start").click().run()
    assert not at.error, [e.value for e in at.error]
    (job,) = [j for j in jobs(ws_root) if j.kind == "evaluate"]
    assert job.params["retrievers"] == ["bm25", f"dense · {version}"]
    with Workspace.open(ws_root) as ws:
        done = wait_for_job(ws, job.id, timeout=240)
    assert done.status is JobStatus.DONE, done.error
    assert set(done.result["retrievers"]) == {"bm25", f"dense · {version}"}
    assert 0 <= done.result["retrievers"][f"dense · {version}"]["ndcg@10"] <= 1


def test_ranked_and_best_run_from_the_page_and_best_says_it_rests_on_few_queries(tmp_path,
                                                                                 monkeypatch):
    """Issue 36 items 4 and 6: the page offers ``ranked`` and ``best``; best records the
    default ranking and warns that 2 test queries are too few to choose by."""
    from loop_fixtures import make_loop_workspace

    from curation.access.users import Role, User
    from curation.ranking.model import RankerOptions
    from curation.search.indexing import get_index
    from curation.store.rankers import Rankers
    from curation.training.ranker import promote_ranker, train_ranker

    boss = User("boss", Role.ADMIN)
    root = tmp_path / "ws"
    with Workspace.init(root) as ws:
        make_loop_workspace(ws)
        get_index(ws, "bm25", progress=False)
        version = train_ranker(ws, "disease_gene", user=boss, progress=False,
                               options=RankerOptions(n_estimators=20, min_child_samples=1)
                               ).version.id
    add_users(root, boss="admin")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    at = evaluate_page("boss")
    at.selectbox(key="eval_schema").set_value("disease_gene").run()
    assert at.multiselect(key="eval_retrievers").options[-1] == "best"
    assert "ranked" not in at.multiselect(key="eval_retrievers").options  # none active yet
    with Workspace.open(root) as ws:
        promote_ranker(ws, version, user=boss, reason="hand-made KB")
    at.run()
    assert at.multiselect(key="eval_retrievers").options[-2:] == ["ranked", "best"]
    at.multiselect(key="eval_retrievers").set_value(["best", "bm25"])
    at.button(key="eval_start").click().run()
    assert any("choose it alone" in e.value for e in at.error)
    at.multiselect(key="eval_retrievers").set_value(["best"])
    at.selectbox(key="eval_split").set_value("test")
    at.button(key="eval_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (done,) = at.success
    assert shown(done.value).startswith("Default ranking of disease_gene: ")
    assert "warning: measured on only 2 test queries (< 20)" in shown(done.value)
    assert any(shown(w.value).startswith("Scored on only 2 test queries (< 20)")
               for w in at.warning)
    with Workspace.open(root) as ws:
        record = Rankers(ws).default_ranking("disease_gene")
        assert record.by == "boss" and set(record.scores) == {"bm25", "bm25+rerank", "ranked"}
        assert record.ranker_version == version and record.warnings
        assert [j for j in list_jobs(ws) if j.kind == "evaluate"] == []  # measured at once
