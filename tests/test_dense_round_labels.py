"""Issue 44 item 3: a dense retraining round learns from the labels of held-out relations, the
gate measures without their queries, the sidebar's counter is what the next round uses, and the
scoring step reports its own progress (tiny BERT, seconds per round)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from loop_fixtures import loop_documents, make_loop_workspace

from curation.access.users import Role, User
from curation.evaluation.harness import build_task
from curation.evaluation.runner import evaluate_workspace
from curation.store.labels import Labels
from curation.store.models import Models

S = "disease_gene"
ADMIN = User("root", Role.ADMIN)


@pytest.fixture
def loop_ws(tmp_workspace):
    return make_loop_workspace(tmp_workspace)


def _options(tiny_model_path, **kw):
    from curation.training.recipes.edel import EdelOptions
    from curation.training.retrain import RetrainOptions

    edel = EdelOptions(base=str(tiny_model_path), epochs=1, batch_size=4, max_seq_length=32,
                       negatives_per_class=2, dev_depth=0, seed=3)
    kw.setdefault("small_test_reason", "test fixture: a handful of test queries")
    return RetrainOptions(training=edel, **kw)


def _label(ws, q, doc, grade, user="root"):
    return Labels(ws).record(user=user, schema=S, query_key=q.qid, query_text=q.text,
                             doc_id=doc, grade=grade)


def test_measured_queries_leave_out_the_learned_groups_of_dev_and_test_only(loop_ws):
    from curation.ranking.learned import learned_groups
    from curation.training.round_gate import measured_queries

    task = build_task(loop_ws, S)
    groups = {task.split(s)[0].group for s in ("train", "dev", "test")}
    measured = measured_queries(task, groups)
    assert {q.group for q in measured.task.split("train")} == {q.group for q in
                                                               task.split("train")}
    assert all(q.group not in groups for s in ("dev", "test") for q in measured.task.split(s))
    assert measured.count("test") == sum(q.group in groups for q in task.split("test")) > 0
    assert set(measured.groups) == {"dev", "test"}  # the train group held no held-out query
    assert measured.warning().startswith(f"{measured.count('test')} of {len(task.split('test'))}"
                                         " test queries left out of the gate's measurement")
    assert measured_queries(task, ()).task == task and measured_queries(task, ()).warning() is None
    assert learned_groups(None) == set() and learned_groups(
        {"examples": {"labels": {"learned_groups": ["a"]}}}) == {"a"}


def test_labels_of_held_out_relations_train_and_the_gate_measures_without_them(
        loop_ws, tiny_model_path):
    """Invariant: every query the gate scores belongs to a query group no compared version
    learned a label of, and is judged by the KB's citations alone (the gate's figures are
    ``kbcurate evaluate``'s on exactly those queries)."""
    from curation.training.retrain import history, retrain

    first = retrain(loop_ws, S, _options(tiny_model_path), actor="root")
    assert first.promoted
    task = build_task(loop_ws, S)
    test_q, dev_q = task.split("test")[0], task.split("dev")[0]
    over = _label(loop_ws, test_q, test_q.gold[0], "irrelevant", user="anna")  # loses: older
    used = [_label(loop_ws, test_q, test_q.gold[0], "complete").id,
            _label(loop_ws, test_q, "305", "irrelevant").id,
            _label(loop_ws, dev_q, dev_q.gold[0], "partial").id]
    second = retrain(loop_ws, S, _options(tiny_model_path, promote=False), actor="root")
    v2 = Models(loop_ws).get(second.version.id)
    record = v2.manifest["examples"]["labels"]
    assert record["used"] == sorted(used) and second.labels_used == 3
    assert record["by_split"] == {"dev": 1, "test": 2}
    assert record["learned_groups"] == sorted({test_q.group, dev_q.group})
    assert record["held_out"] == [] and record["overruled"] == [over.id]
    assert record["not_used"] == {"overruled": 1} and "wins" in record["reasons"]["overruled"]
    assert [r.labels_used for r in history(loop_ws, S)] == [0, 3]  # the Models table
    left_out = [q.qid for q in task.split("test") if q.group == test_q.group]
    assert v2.metrics["test_left_out"]["queries"] == left_out
    assert v2.metrics["test_left_out"]["groups"] == [test_q.group]
    assert any(w.startswith(f"{len(left_out)} of {len(task.split('test'))} test queries left "
                            "out") for w in second.warnings)
    kept = tuple(q for q in task.queries if q.qid not in left_out)
    assert {q.group for q in kept if q.split == "test"}.isdisjoint(record["learned_groups"])
    clean = replace(task, queries=kept)
    for version, figures in ((v2.id, second.decision.candidate),
                             (first.version.id, second.decision.active)):
        evaluated = evaluate_workspace(loop_ws, S, ["dense"], split="test", task=clean,
                                       options={"dense": {"model": version}}, progress=False)
        assert figures["ndcg@10"] == pytest.approx(evaluated.retrievers["dense"]["ndcg@10"])
        assert figures["queries"] == len(clean.split("test")) == second.test_queries


def test_the_counter_is_what_the_next_round_uses_before_and_after_it(loop_ws, tiny_model_path):
    """Before a round the sidebar's count equals the labels the round then uses; after it, only
    those stop counting; a rollback to a version that learned none counts them again."""
    from curation.training.retrain import labels_since_active, promote, retrain

    v1 = retrain(loop_ws, S, _options(tiny_model_path), actor="root").version
    task = build_task(loop_ws, S)
    train_q, test_q = task.split("train")[0], task.split("test")[0]
    _label(loop_ws, train_q, train_q.gold[0], "irrelevant", user="anna")  # overruled below
    _label(loop_ws, train_q, train_q.gold[0], "complete")
    _label(loop_ws, test_q, "305", "irrelevant")
    _label(loop_ws, train_q, "306", "skip")
    before = labels_since_active(loop_ws, S)
    second = retrain(loop_ws, S, _options(tiny_model_path, promote=False), actor="root")
    used = Models(loop_ws).get(second.version.id).manifest["examples"]["labels"]["used"]
    grades = {lb.id: lb.grade.value for lb in Labels(loop_ws).find(schema=S)}
    assert before == {"complete": 1, "irrelevant": 1}
    assert sum(before.values()) == len(used) == second.labels_used
    assert {g: sum(grades[i] == g for i in used) for g in before} == before
    promote(loop_ws, second.version.id, user=ADMIN, reason="test: count after the round")
    from curation.training.label_plan import next_round_labels

    after = next_round_labels(loop_ws, S)
    assert after.new == {} and after.learned == len(used) == after.total
    assert after.not_usable == {"overruled": 1, "skip": 1}
    late = _label(loop_ws, test_q, "307", "partial")
    assert labels_since_active(loop_ws, S) == {"partial": 1} and late.id not in used
    promote(loop_ws, v1.id, user=ADMIN, reason="test: roll back to the KB-only version")
    assert labels_since_active(loop_ws, S) == {"complete": 1, "irrelevant": 1, "partial": 1}


@pytest.mark.parametrize("evaluation", ["corpus", "pool"])
def test_the_scoring_step_reports_its_own_progress(loop_ws, tiny_model_path, evaluation):
    """The step that sat at 82 % for 17 minutes on the demo reports the documents encoded."""
    from curation.training.retrain import retrain

    calls: list[tuple[float, str]] = []
    retrain(loop_ws, S, _options(tiny_model_path, evaluation=evaluation), actor="root",
            progress=False, report=lambda f, m: calls.append((f, m)))
    scoring = [(f, m) for f, m in calls if 0.82 <= f <= 0.9 and m.startswith("scoring")]
    assert len(scoring) > 1, calls
    done = [re.search(r"(encoding|indexing) (\d+)/(\d+)", m) for _, m in scoring]
    totals = {int(d.group(3)) for d in done if d}
    assert len(totals) == 1 and 0 < totals.pop() <= len(loop_documents()), scoring
    assert any(d and d.group(2) == d.group(3) for d in done), scoring  # every document encoded
    fractions = [f for f, _ in calls]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
