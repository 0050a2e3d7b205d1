"""The feedback loop: labels -> examples, the gate, retraining, the atomic switch, simulation."""

from __future__ import annotations

import threading

import pytest
from loop_fixtures import make_loop_workspace

from curation.access.users import PermissionDenied, Role, User
from curation.evaluation.harness import build_task
from curation.store.labels import Labels
from curation.store.models import Models
from curation.training.feedback import (
    LabelMapping,
    current_labels,
    label_examples,
    merge_examples,
    resolve_conflicts,
)
from curation.training.gate import decide
from curation.training.recipes.edel.margins import margin_table
from kb_sources.errors import CurationError
from kb_sources.schema import builtin_schemas

ADMIN, CURATOR = User("root", Role.ADMIN), User("cur", Role.CURATOR)
FMT = "{title} [SEP] {abstract}"


@pytest.fixture
def loop_ws(tmp_workspace):
    return make_loop_workspace(tmp_workspace)


def _label(ws, q, doc, grade, user="ann"):
    return Labels(ws).record(user=user, schema="disease_gene", query_key=q.qid,
                             query_text=q.text, doc_id=doc, grade=grade)


def _examples(ws, labels, roles=None, mapping=None):
    sch = builtin_schemas()["disease_gene"]
    task = build_task(ws, "disease_gene")
    return label_examples(ws, sch, task, margin_table(sch), labels, roles=roles or {},
                          mapping=mapping, document_format=FMT)


def _train_query(ws, disease):
    task = build_task(ws, "disease_gene")
    found = [q for q in task.split("train") if disease in q.text]
    assert found, f"{disease} is not a train query of the hand-made KB"
    return found[0]


def test_the_split_has_train_dev_and_test_queries(loop_ws):
    task = build_task(loop_ws, "disease_gene")
    assert {len(task.split(s)) > 0 for s in ("train", "dev", "test")} == {True}


def test_each_grade_becomes_its_example(loop_ws):
    task = build_task(loop_ws, "disease_gene")
    q = task.split("train")[0]
    disease = next(iter(q.query["disease"])).text
    gold = q.gold[0]
    course = "2" + gold[1:]  # "Clinical course of <disease>"
    _label(loop_ws, q, gold, "complete")
    _label(loop_ws, q, course, "partial")  # mentions the disease, no gene: g = "10"
    _label(loop_ws, q, "301", "irrelevant")
    _label(loop_ws, q, "302", "skip")
    made = _examples(loop_ws, current_labels(loop_ws, "disease_gene"))
    by_doc = {e.doc_id: e for e in made.examples}
    assert by_doc[gold].positive and by_doc[gold].mu == 0.0
    assert by_doc[gold].cls == "label:complete"
    assert by_doc[course].positive and by_doc[course].mu == 0.6
    assert by_doc[course].cls == "label:partial:10", disease
    assert not by_doc["301"].positive and by_doc["301"].mu == 0.8
    assert "302" not in by_doc and len(made.skipped) == 1
    assert made.texts[gold].count("[SEP]") == 1
    # a partial label whose abstract names everything gets the configured class
    _label(loop_ws, q, gold, "partial", user="ann2")
    made = _examples(loop_ws, current_labels(loop_ws, "disease_gene"),
                     mapping=LabelMapping(partial_mu=0.4, irrelevant_mu=0.9))
    by_doc = {e.doc_id: e for e in made.examples}
    assert by_doc[gold].mu == 0.4 and by_doc[gold].cls == "label:partial:11"
    assert by_doc["301"].mu == 0.9


def test_labels_on_dev_and_test_queries_train_and_name_their_groups(loop_ws):
    """Issue 44 item 3: labels of held-out relations train the dense version too; the groups
    they teach are recorded so the gate can leave those queries out."""
    task = build_task(loop_ws, "disease_gene")
    test_q, dev_q = task.split("test")[0], task.split("dev")[0]
    a = _label(loop_ws, test_q, test_q.gold[0], "complete")
    b = _label(loop_ws, dev_q, dev_q.gold[0], "complete")
    made = _examples(loop_ws, current_labels(loop_ws, "disease_gene"))
    assert made.held_out == () and made.used == (a.id, b.id)
    assert [e.qid for e in made.examples] == [test_q.qid, dev_q.qid]
    assert made.groups == {a.id: (test_q.group, "test"), b.id: (dev_q.group, "dev")}
    record = made.provenance(made.used)
    assert record["by_split"] == {"dev": 1, "test": 1}
    assert record["learned_groups"] == sorted({test_q.group, dev_q.group})


def test_conflicts_go_to_the_most_senior_role_then_the_latest(loop_ws):
    q = _train_query(loop_ws, "")
    cur = _label(loop_ws, q, "301", "complete", user="carol")
    ann = _label(loop_ws, q, "301", "irrelevant", user="anna")  # later, but junior
    winners, overruled = resolve_conflicts([cur, ann], {"carol": "curator", "anna": "annotator"})
    assert [w.id for w in winners] == [cur.id] and [o.id for o in overruled] == [ann.id]
    late = _label(loop_ws, q, "301", "partial", user="cecil")  # same role, latest wins
    winners, _ = resolve_conflicts([cur, ann, late], {"carol": "curator", "cecil": "curator"})
    assert [w.id for w in winners] == [late.id]
    made = _examples(loop_ws, [cur, ann], roles={"carol": Role.CURATOR})
    assert [e.positive for e in made.examples] == [True] and made.overruled == (ann.id,)


def test_an_adjudicated_grade_beats_every_label_of_its_item(loop_ws):
    from curation.access.adjudication import adjudicate

    q = _train_query(loop_ws, "")
    cur = _label(loop_ws, q, "301", "complete", user="carol")
    ann = _label(loop_ws, q, "301", "irrelevant", user="anna")
    roles = {"carol": Role.CURATOR, "anna": Role.ANNOTATOR}
    assert [e.positive for e in _examples(loop_ws, [cur, ann], roles=roles).examples] == [True]
    adjudicate(loop_ws, "disease_gene", q.qid, "301", "irrelevant", "no gene named", user=ADMIN)
    (made,) = _examples(loop_ws, [cur, ann], roles=roles).examples
    assert not made.positive and made.mu == 0.8 and made.cls == "label:irrelevant"


def test_a_label_replaces_the_kb_example_of_the_same_pair(loop_ws):
    from curation.training.recipes.edel.examples import ExampleConfig, build_examples

    task = build_task(loop_ws, "disease_gene")
    kb = build_examples(loop_ws, "disease_gene", ExampleConfig(negatives_per_class=2), task=task,
                        progress=False)
    pos = next(e for e in kb.examples if e.positive)
    q = next(q for q in task.queries if q.qid == pos.qid)
    lb = _label(loop_ws, q, pos.doc_id, "irrelevant")
    made = _examples(loop_ws, [lb])
    merged = merge_examples(kb, made)
    pair = [e for e in merged.examples if (e.qid, e.doc_id) == (pos.qid, pos.doc_id)]
    assert len(pair) == 1 and not pair[0].positive and pair[0].cls == "label:irrelevant"
    assert merged.manifest["labels"]["used"] == [lb.id]
    assert merged.manifest["labels"]["replaced_kb_examples"] == 1
    assert len(merged.examples) == len(kb.examples)
    assert merged.manifest["sha256"] != kb.manifest["sha256"]


@pytest.mark.parametrize(("candidate", "active", "promote", "why"), [
    ({"ndcg@10": 0.52, "entity_recall@10": 0.40}, {"ndcg@10": 0.50, "entity_recall@10": 0.40},
     True, "ndcg@10 improves by 2.00 pp"),
    ({"ndcg@10": 0.52, "entity_recall@10": 0.396}, {"ndcg@10": 0.50, "entity_recall@10": 0.40},
     True, "within tolerance"),
    ({"ndcg@10": 0.60, "entity_recall@10": 0.39}, {"ndcg@10": 0.50, "entity_recall@10": 0.40},
     False, "entity_recall@10 drops by 1.00 pp"),
    ({"ndcg@10": 0.50, "entity_recall@10": 0.40}, {"ndcg@10": 0.50, "entity_recall@10": 0.40},
     False, "no metric improved"),
    ({"ndcg@10": 0.10, "entity_recall@10": 0.10}, None, True, "no active version"),
])
def test_gate_decisions(candidate, active, promote, why):
    decision = decide(candidate, active, tolerance_pp=0.5)
    assert decision.promote is promote
    assert any(why in r for r in decision.reasons), decision.reasons


def test_gate_wants_a_written_reason_below_20_test_queries():
    from curation.training.gate import decide

    better = ({"ndcg@10": 0.6, "entity_recall@10": 0.5}, {"ndcg@10": 0.4, "entity_recall@10": 0.5})
    assert decide(*better, test_queries=20).promote  # 20 is enough
    few = decide(*better, test_queries=19)
    assert not few.promote and few.reasons[0] == "ndcg@10 improves by 20.00 pp"
    assert few.reasons[-1].startswith("only 19 test queries (< 20): too few to trust")
    ok = decide(*better, test_queries=19, small_test_reason="pilot schema, checked by hand")
    assert ok.promote and ok.reasons[-2] == (
        "only 19 test queries (< 20), promoted on an admin's written reason: pilot schema, "
        "checked by hand")
    worse = decide(better[1], better[0], test_queries=3, small_test_reason="anyway")
    assert not worse.promote
    assert worse.reasons[-1] == "kept as a candidate: ndcg@10 dropped by 20.00 pp"


def test_the_gate_verdict_names_the_metric_that_dropped_and_calls_a_tie_no_gain():
    """Issue 44 item 10: "a metric dropped" was shown beside NDCG@10 0.400 vs 0.400."""
    from curation.training.gate import decide

    tie_but_recall = decide({"ndcg@10": 0.4, "entity_recall@10": 0.38},
                            {"ndcg@10": 0.4, "entity_recall@10": 0.40})
    assert tie_but_recall.reasons[-1] == "kept as a candidate: entity_recall@10 dropped by 2.00 pp"
    tie = decide({"ndcg@10": 0.4, "entity_recall@10": 0.4},
                 {"ndcg@10": 0.4, "entity_recall@10": 0.4})
    assert tie.reasons[-1] == "kept as a candidate: no metric improved (a tie is not a gain)"
    assert tie.reasons[0] == "ndcg@10 changes by +0.00 pp (within tolerance, no gain)"


def test_gate_refuses_bad_input():
    with pytest.raises(CurationError, match="has no entity_recall@10; evaluate it first"):
        decide({"ndcg@10": 0.5}, {"ndcg@10": 0.4, "entity_recall@10": 0.1})
    with pytest.raises(CurationError, match="tolerance must be >= 0"):
        decide({"ndcg@10": 0.5, "entity_recall@10": 0.1}, None, tolerance_pp=-1)


def _options(tiny_model_path, **kw):
    from curation.training.recipes.edel import EdelOptions
    from curation.training.retrain import RetrainOptions

    edel = EdelOptions(base=str(tiny_model_path), epochs=1, batch_size=4, max_seq_length=32,
                       negatives_per_class=2, dev_depth=0, seed=3)
    kw.setdefault("small_test_reason", "test fixture: a handful of test queries")
    return RetrainOptions(training=edel, **kw)


def test_retrain_warm_starts_gates_and_switches(loop_ws, tiny_model_path):
    from curation.training.retrain import history, labels_since_active, promote, retrain

    first = retrain(loop_ws, "disease_gene", _options(tiny_model_path), actor="root")
    assert first.promoted and first.previous is None  # no active version: the first passes
    assert Models(loop_ws).active("disease_gene").id == first.version.id
    assert "test_ndcg@10" in Models(loop_ws).get(first.version.id).metrics
    q = _train_query(loop_ws, "")
    _label(loop_ws, q, q.gold[0], "complete", user="root")
    _label(loop_ws, q, "305", "irrelevant", user="root")
    assert labels_since_active(loop_ws, "disease_gene") == {"complete": 1, "irrelevant": 1}
    second = retrain(loop_ws, "disease_gene", _options(tiny_model_path, promote=False),
                     actor="root")
    v2 = Models(loop_ws).get(second.version.id)
    assert v2.manifest["parent"] == first.version.id
    assert v2.manifest["warm_start"] == first.version.id and second.labels_used == 2
    assert v2.manifest["examples"]["labels"]["used"] == [lb.id for lb in
                                                        current_labels(loop_ws, "disease_gene")]
    assert v2.metrics["gate"]["reasons"] and not second.promoted
    assert Models(loop_ws).active("disease_gene").id == first.version.id  # untouched
    with pytest.raises(CurationError, match="needs a written reason"):
        promote(loop_ws, v2.id, user=ADMIN, reason="  ")
    with pytest.raises(PermissionDenied):
        promote(loop_ws, v2.id, user=CURATOR, reason="looks better")
    promote(loop_ws, v2.id, user=ADMIN, reason="spot checks look better")
    rows = history(loop_ws, "disease_gene")
    assert [r.version for r in rows] == [first.version.id, v2.id]
    assert rows[1].status == "active" and rows[1].promoted_by == "root"
    assert rows[1].reason == "spot checks look better" and rows[1].labels_used == 2
    assert rows[1].to_json()["labels_used"] == 2 and "ndcg@10" in rows[1].to_json()
    assert labels_since_active(loop_ws, "disease_gene") == {}
    with pytest.raises(PermissionDenied):
        retrain(loop_ws, "disease_gene", _options(tiny_model_path), actor="cur", user=CURATOR)


def test_switch_is_atomic_for_concurrent_searches(loop_ws, tiny_model_path):
    from curation.search.choices import parse_retriever_choice, resolve_retriever_choice
    from curation.search.indexing import get_index
    from curation.store.workspace import Workspace
    from curation.training.activation import switch_active
    from curation.training.retrain import retrain

    v1 = retrain(loop_ws, "disease_gene", _options(tiny_model_path), actor="root").version
    v2 = retrain(loop_ws, "disease_gene", _options(tiny_model_path, promote=False,
                                                  warm_start=False,
                                                  tolerance_pp=100.0), actor="root").version
    query = "Genes associated with melanoma?"
    expected = {}
    for v in (v1, v2):
        name, opts = parse_retriever_choice(f"dense · {v.id}")
        expected[v.id] = [h.doc_id for h in get_index(loop_ws, name, opts,
                                                      progress=False).search(query, 5)]
    seen, errors, stop = [], [], threading.Event()

    def searcher():
        with Workspace.open(loop_ws.root) as ws:
            while not stop.is_set():
                try:
                    choice = resolve_retriever_choice(ws, "disease_gene", "dense · active")
                    name, opts = parse_retriever_choice(choice)
                    hits = get_index(ws, name, opts, progress=False).search(query, 5)
                    seen.append((opts["model"], [h.doc_id for h in hits]))
                except Exception as exc:  # noqa: BLE001 - the test records any failure
                    errors.append(repr(exc))

    thread = threading.Thread(target=searcher)
    thread.start()
    try:
        while len(seen) < 3:
            thread.join(0.05)
        switch_active(loop_ws, v2.id, user=User("root", Role.ADMIN), reason="test")
        count = len(seen)
        while len(seen) < count + 3:
            thread.join(0.05)
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert {m for m, _ in seen} == {v1.id, v2.id}
    assert all(hits == expected[m] for m, hits in seen)


def test_retrain_job_is_admin_only_and_one_at_a_time(loop_ws, tiny_model_path):
    from curation.jobs.queue import list_jobs, wait_for_job
    from curation.training.jobs import start_retrain

    opts = _options(tiny_model_path).to_json()
    with pytest.raises(PermissionDenied):
        start_retrain(loop_ws, CURATOR, "disease_gene", opts)
    with pytest.raises(CurationError, match="Unknown retraining option.*lr"):
        start_retrain(loop_ws, ADMIN, "disease_gene", {"lr": 1})
    assert list_jobs(loop_ws) == []
    jobs = []
    threads = [threading.Thread(target=lambda: jobs.append(
        start_retrain(loop_ws.__class__.open(loop_ws.root), ADMIN, "disease_gene", opts)))
        for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({j.id for j in jobs}) == 1 and len(list_jobs(loop_ws, "retrain")) == 1
    done = wait_for_job(loop_ws, jobs[0].id, timeout=300)
    assert done.status == "done", done.error
    assert done.result["promoted"] and Models(loop_ws).active("disease_gene").id == \
        done.result["version"]


def test_a_failed_save_registers_nothing(loop_ws, tiny_model_path, monkeypatch):
    import shutil

    from curation.training.retrain import retrain

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copytree", full_disk)
    with pytest.raises(CurationError, match="No space left on device.*Nothing was registered"):
        retrain(loop_ws, "disease_gene", _options(tiny_model_path), actor="root")
    assert Models(loop_ws).versions() == []
    assert not [p for p in (loop_ws.root / "models").iterdir()]


def test_two_round_simulation_writes_per_round_metrics(loop_ws, tiny_model_path, tmp_path):
    import json

    from curation.simulation.dense import SimulationConfig, simulate

    config = SimulationConfig(rounds=2, labels_per_round=6, labels_per_query=3, pool_depth=8,
                              seed=1)
    summary = simulate(loop_ws, "disease_gene", config, _options(tiny_model_path,
                                                                   evaluation="pool"),
                       progress=False, out_dir=tmp_path / "sim")
    rounds = summary["rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert [r["labels"] for r in rounds] == [0, 6, 12]
    assert all(0.0 <= r["ndcg@10"] <= 1.0 for r in rounds)
    assert "zero_shot_ndcg@10" in rounds[0] and rounds[2]["gate"]
    assert len(summary["labels"]) == 12
    grades = {lb["grade"] for lb in summary["labels"]}
    assert grades <= {"complete", "irrelevant"} and "complete" in grades  # BM25 finds gold
    assert all(r["wss@95"] is not None for r in rounds[1:])
    saved = json.loads((tmp_path / "sim" / "simulation.json").read_text())
    assert saved["rounds"][2]["labels"] == 12
    assert "plotly" in (tmp_path / "sim" / "simulation.html").read_text()
    # the real workspace is untouched: no labels, no models
    assert current_labels(loop_ws, "disease_gene") == [] and Models(loop_ws).versions() == []


def test_wss_at_95():
    from curation.simulation.dense_report import wss_at

    ranked = [str(i) for i in range(10)]
    assert wss_at(ranked, {"0", "1"}) == pytest.approx(0.95 - 2 / 10)
    assert wss_at(ranked, {"9"}) == pytest.approx(0.95 - 1.0)
    assert wss_at(ranked, {"x"}) == 0.0


def test_killed_retrain_worker_leaves_the_active_model_and_resumes(loop_ws, tiny_model_path):
    import os
    import signal
    import time

    from curation.jobs.queue import get_job, wait_for_job
    from curation.training.jobs import start_retrain
    from curation.training.retrain import retrain

    v1 = retrain(loop_ws, "disease_gene", _options(tiny_model_path), actor="root").version
    q = _train_query(loop_ws, "")
    _label(loop_ws, q, q.gold[0], "complete", user="root")
    opts = _options(tiny_model_path).to_json()
    opts["training"].update(epochs=2, batch_size=1)  # many small steps: time to kill in epoch 2
    job = start_retrain(loop_ws, ADMIN, "disease_gene", opts)
    deadline = time.time() + 240
    while time.time() < deadline:
        state = get_job(loop_ws, job.id)
        assert not state.finished, f"the job ended before it could be killed: {state}"
        if state.message.startswith("training step ") and state.pid:
            done, total = map(int, state.message.split()[-1].replace(",", "").split("/"))
            if done > total // 2 + 2:  # inside epoch 2: epoch 1's checkpoint exists
                os.kill(state.pid, signal.SIGKILL)
                break
        time.sleep(0.01)
    time.sleep(0.5)
    assert get_job(loop_ws, job.id).status == "failed"
    assert Models(loop_ws).active("disease_gene").id == v1.id  # still serving
    assert [v.id for v in Models(loop_ws).versions()] == [v1.id]  # nothing half-registered
    again = start_retrain(loop_ws, ADMIN, "disease_gene", opts)
    assert again.id != job.id
    done = wait_for_job(loop_ws, again.id, timeout=300)
    assert done.status == "done", done.error
    assert Models(loop_ws).get(done.result["version"]).manifest["resumed_from_checkpoint"]


def test_cli_retrain_history_and_promote(loop_ws, tiny_model_path, capsys):
    import json

    from curation.cli.main import main

    common = ["-w", str(loop_ws.root), "--quiet"]
    tiny = ["--base", str(tiny_model_path), "--batch-size", "4", "--max-seq-length", "32",
            "--dev-depth", "0", "--negatives-per-class", "2"]
    # 2 test queries: the gate keeps the first version a candidate, and says so, unless an
    # admin writes why it may promote anyway
    assert main(["retrain", *common, "--schema", "disease_gene", *tiny, "--json"]) == 0
    refused = json.loads(capsys.readouterr().out)
    assert refused["version"] == "disease_gene-edel@1" and not refused["promoted"]
    assert refused["gate"]["reasons"][-1].startswith("only 2 test queries (< 20): too few")
    assert "Evaluated on only 2 test queries (< 20)" in refused["warnings"][-1]
    reason = ["--small-test-reason", "fixture: a handful of queries"]
    assert main(["retrain", *common, "--schema", "disease_gene", *tiny, *reason, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["version"] == "disease_gene-edel@2" and first["promoted"]
    assert "promoted on an admin's written reason: fixture" in " ".join(first["gate"]["reasons"])
    assert main(["retrain", *common, "--schema", "disease_gene", *tiny, *reason,
                 "--no-promote"]) == 0
    out = capsys.readouterr().out
    assert "disease_gene-edel@3 stays a candidate" in out and "kbcurate models promote" in out
    assert main(["models", "promote", "disease_gene-edel@3", *common]) == 2
    assert "needs a written reason" in capsys.readouterr().err
    assert main(["models", "promote", "disease_gene-edel@3", *common, "--reason", "manual"]) == 0
    assert "disease_gene-edel@3 is now the active disease_gene model" in capsys.readouterr().out
    assert main(["models", "history", *common, "--schema", "disease_gene", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["version"], r["status"]) for r in rows] == [
        ("disease_gene-edel@1", "candidate"), ("disease_gene-edel@2", "candidate"),
        ("disease_gene-edel@3", "active")]
    assert rows[2]["reason"] == "manual" and rows[2]["promoted_by"] == "cli"
