"""The screening replay (issue 38, item 4): metrics against hand-computed values, the learners
and the stopping rules on hand-made lists, BC6PM's reader, and ``kbcurate simulate screening``
end to end on a small hand-made KB."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace

import numpy as np
import pytest

from curation.screening.calibration import Calibration
from curation.screening.learner import LearnerOptions
from curation.screening.queue import build_queue
from curation.screening.stop_base import ScreenedRun
from curation.screening.stopping import CHOSEN_RULE
from curation.simulation.bc6pm import read_triage
from curation.simulation.lists import ScreeningList
from curation.simulation.metrics import (
    pooled,
    recall_curve,
    relevant_positions,
    screening_metrics,
)
from curation.simulation.screening import (
    SimulationOptions,
    feedback_order,
    held_out,
    random_order,
    replay_list,
)
from curation.simulation.stop_replay import replay_rules, rules_named, stop_summary
from kb_sources.errors import CurationError
from kb_sources.types import Document, Entity, Relation


# -- metrics -------------------------------------------------------------------------------------
def test_metrics_match_hand_computed_values():
    m = screening_metrics([1, 4, 10], 20)
    assert m["docs_to_all"] == 10
    assert m["wss@95"] == pytest.approx((20 - 10) / 20 - 0.05)  # 95% of 3 needs all 3
    assert m["recall@10"] == 1.0
    assert m["recall@10%"] == pytest.approx(1 / 3)  # first 2 documents
    assert m["recall@25%"] == pytest.approx(2 / 3)  # first 5
    assert m["erf@10"] == pytest.approx(1 / 3 - 2 / 20)
    assert m["atd"] == pytest.approx(5.0)
    # 95% of 20 relevant is 19 (not 20: 0.95 * 20 carries float noise)
    twenty = screening_metrics(list(range(1, 20)) + [100], 100)
    assert twenty["wss@95"] == pytest.approx(0.81 - 0.05)
    assert twenty["docs_to_all"] == 100 and twenty["recall@10"] == pytest.approx(0.5)


def test_positions_pooling_and_curves():
    relevant = np.array([False, True, False, True])
    assert relevant_positions([3, 0, 2, 1], relevant) == [1, 4]
    with pytest.raises(CurationError, match="reached 1 of 2"):
        relevant_positions([1, 0], relevant)
    with pytest.raises(CurationError, match="repeats"):
        relevant_positions([1, 1, 3], relevant)
    with pytest.raises(CurationError, match="within 1..4"):
        screening_metrics([5], 4)
    rows = [screening_metrics([1, 2], 10), screening_metrics([3, 10], 10)]
    assert pooled(rows)["docs_to_all"] == 6.0 and pooled(rows)["queries"] == 2
    assert recall_curve([1, 3], 4).tolist() == [0.0, 0.5, 0.5, 1.0, 1.0]


# -- replays -------------------------------------------------------------------------------------
def _list(n: int = 40) -> tuple[ScreeningList, list[str]]:
    """Relevant items 0 and 30 share rare words; the ranker puts 30 near the end."""
    texts = [f"routine clinical note number {i} about ward logistics" for i in range(n)]
    texts[0] = "BRAF V600E kinase melanoma vemurafenib resistance"
    texts[30] = "vemurafenib resistance BRAF V600E melanoma kinase reactivation"
    static = np.linspace(3.0, -3.0, n)
    relevant = np.zeros(n, dtype=bool)
    relevant[[0, 30]] = True
    ids = tuple(f"p{i}" for i in range(n))
    return ScreeningList("q1", "dev", ids, static, relevant), texts


def test_learners_replay_a_hand_made_list():
    item, texts = _list()
    cal = Calibration(-2.0, 1.0)
    static = replay_list(item, texts, "static", calibration=cal)
    assert static.positions == (1, 31) and static.metrics["docs_to_all"] == 31
    feedback = replay_list(item, texts, "feedback", calibration=cal)
    assert feedback.positions == (1, 2)  # the relevant item's words pull item 30 up
    shy = replay_list(item, texts, "feedback", calibration=cal, options=SimulationOptions(
        learner=LearnerOptions(similarity=0.0, dissimilarity=0.0)))
    assert shy.positions == static.positions
    # irrelevant labels alone: the notes like them sink, so item 30 comes up after three
    negative = replay_list(item, texts, "feedback", calibration=cal,
                           options=SimulationOptions(learner=LearnerOptions(similarity=0.0)))
    assert negative.positions == (1, 4)
    rnd = replay_list(item, texts, "random", calibration=cal)
    assert list(rnd.positions) == sorted(random_order("q1", 40, 13).index(i) + 1
                                         for i in (0, 30))
    assert random_order("q1", 40, 13) == random_order("q1", 40, 13) != random_order("q2", 40, 13)
    with pytest.raises(CurationError, match="Unknown learner"):
        replay_list(item, texts, "oracle", calibration=cal)


def test_held_out_picks_splits_and_enough_relevant():
    item, _ = _list()
    one = ScreeningList("q2", "test", ("a", "b"), np.zeros(2), np.array([True, False]))
    assert held_out([item, one], "heldout") == [item]
    assert held_out([item, one], "test", min_relevant=1) == [one]
    with pytest.raises(CurationError, match="Unknown split"):
        held_out([item], "train")


def _screened(calibration: Calibration) -> ScreenedRun:
    item, texts = _list(200)
    queue = build_queue("q1", item.doc_ids, texts, item.static, calibration=calibration)
    order = feedback_order(queue, item.relevant, LearnerOptions(), until_all=False)
    return ScreenedRun("q1", np.array(order), item.relevant, queue.prior)


def test_stop_rules_in_replay():
    run = _screened(Calibration(-6, 1))
    assert len(run.order) == 200 and run.oracle() == 2  # the learner puts both first
    found = replay_rules(run, rules_named())
    assert set(found) == {"calibrated", "random_sample", "knee", "quantile", "irrelevant_run",
                          "calibrated_patience"}
    cal, sample = found["calibrated"], found["random_sample"]
    assert cal.met and cal.found == 2 and cal.stopped_at < 200 and cal.work_saved > 0
    # the random sample is drawn after the learned phase: it stops later than both were found
    assert sample.met and sample.stopped_at > 2
    # 2 relevant cannot certify 95% recall (QBCB needs 59 in its sample): the whole list
    assert found["quantile"].stopped_at == 200 and found["quantile"].oracle == 2
    assert found["irrelevant_run"].stopped_at == 52  # 50 irrelevant after the second
    summary = stop_summary([cal, replace(cal, qid="q2", stopped_at=100, found=1, met=False)])
    assert summary["coverage"] == 0.5 and summary["queries"] == 2
    assert summary["oracle"] == 2 and summary["x_oracle"] == pytest.approx(
        (cal.stopped_at + 100) / 2 / 2)
    assert summary["per_query"]["q2"] == {"stopped_at": 100, "recall": 0.5, "oracle": 2,
                                          "met": False}
    with pytest.raises(CurationError, match="Unknown stop rule 'oracle'. Available options: "
                                            "calibrated, random_sample"):
        rules_named(["oracle"])
    # a list whose prior expects many relevant: only a long run of irrelevant labels (which
    # shift the query's base rate down) lets the calibrated rule stop
    busy = _screened(Calibration(2, 0))
    assert replay_rules(busy, rules_named(["calibrated"]))["calibrated"].stopped_at > 150


# -- BC6PM ---------------------------------------------------------------------------------------
def test_bc6pm_triage_reader(tmp_path):
    path = tmp_path / "triage.json.gz"
    docs = [{"id": "1", "infons": {"relevant": "yes"},
             "passages": [{"infons": {"type": "title"}, "text": "BRAF binding"},
                          {"infons": {"type": "abstract"}, "text": "A mutation breaks it."}]},
            {"id": "2", "infons": {"relevant": "no"}, "passages": []}]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"documents": docs}, fh)
    assert read_triage(path) == [("1", "BRAF binding A mutation breaks it.", True),
                                 ("2", "", False)]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"documents": [{"id": "3", "infons": {}}]}, fh)
    with pytest.raises(CurationError, match="document 3 lacks"):
        read_triage(path)
    with pytest.raises(CurationError, match="not a readable gzip"):
        read_triage(tmp_path / "missing.json.gz")


# -- Hallmarks of Cancer ------------------------------------------------------------------------
def _hoc_file(root):
    rows = [("1", ["Growth factor receptors drive proliferative signaling ."],
             "<Sustaining proliferative signaling--Receptors"),
            ("2", ["Tumour cells resist cell death by apoptosis .", "BCL2 is up ."],
             "<Resisting cell death--Apoptosis< "),
            ("3", ["Proliferative signaling and cell death ."],
             "<Sustaining proliferative signaling ANDResisting cell death"),
            ("4", ["An unrelated cohort study ."], "<NULL"),
            ("5", ["Signaling of growth ."], "< ")]
    path = root / "hoc" / "hoc_abstracts.jsonl.gz"
    path.parent.mkdir(parents=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for pmid, sentences, labels in rows:
            fh.write(json.dumps({"pmid": pmid, "sentences": sentences, "labels_raw": labels})
                     + "\n")
    return path


def test_hoc_reader_and_lists(tmp_path):
    from curation.simulation.hoc import hoc_lists, read_hoc

    path = _hoc_file(tmp_path)
    docs = read_hoc(path)
    assert docs[2] == ("3", "Proliferative signaling and cell death .",
                       frozenset({"Sustaining proliferative signaling", "Resisting cell death"}))
    assert docs[3][2] == frozenset() and docs[4][2] == frozenset()  # NULL and blank: none
    lists, texts, calibrations = hoc_lists(tmp_path)
    assert [x.qid for x in lists] == ["Sustaining proliferative signaling",
                                      "Resisting cell death"]
    first = lists[0]
    assert len(first.doc_ids) == 5 and first.n_relevant == 2 and first.split == "hoc"
    assert set(first.doc_ids[:2]) == {"1", "3"}  # BM25 of the hallmark's name ranks them first
    assert texts["4"] == "An unrelated cohort study ." and calibrations[first.qid].queries == 1
    path.write_text("not gzip")
    with pytest.raises(CurationError, match="not a readable HoC file"):
        read_hoc(path)


# -- the command ---------------------------------------------------------------------------------
DISEASES = ["melanoma", "glioma", "cystic fibrosis", "breast cancer", "leukemia",
            "retinoblastoma", "neurofibromatosis", "colon cancer", "lung cancer",
            "thyroid cancer"]
GENES = ["BRAF", "NRAS", "IDH1", "TP53", "CFTR", "SCNN1A", "BRCA1", "BRCA2", "ABL1", "FLT3",
         "RB1", "MYCN", "NF1", "SPRED1", "APC", "KRAS", "EGFR", "ALK", "RET", "TSHR"]


def _kb_workspace(ws):
    from curation.store.importer import import_items

    docs, rels = [], []
    for i, disease in enumerate(DISEASES):
        for j in range(2):
            gene, pmid = GENES[2 * i + j], str(1000 + 10 * i + j)
            docs.append(Document(pmid, f"{gene} mutations in {disease}",
                                 f"Carriers of {gene} variants develop {disease} early.",
                                 source="handmade"))
            rels.append(Relation("disease_gene", "handmade", f"r{i}{j}",
                                 {"disease": (Entity(disease, "disease"),),
                                  "gene": (Entity(gene, "gene"),)}, (pmid,)))
        docs.append(Document(str(5000 + i), f"Clinical course of {disease}",
                             f"Patients with {disease} were followed for years.",
                             source="handmade"))
    import_items(ws, [*docs, *rels], reader="test", path="handmade", progress=False)
    return ws


def test_simulate_screening_command_writes_json_and_html(tmp_workspace, capsys):
    from curation.cli.main import main

    ws = _kb_workspace(tmp_workspace)
    out = tmp_workspace.root / "screening.json"
    assert main(["simulate", "screening", "-w", str(ws.root), "--schema", "disease_gene",
                 "--split", "heldout", "--out", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert set(result["learners"]) == {"static", "feedback", "random"}
    n = result["learners"]["static"]["queries"]
    assert n == len(result["queries"]) >= 2
    assert all(q["relevant"] >= 2 and q["split"] in ("dev", "test") for q in result["queries"])
    row = result["queries"][0]["learners"]["static"]
    assert set(row) == {"docs_to_all", "wss@95", "recall@10", "recall@10%", "recall@25%",
                        "erf@10", "atd"}
    assert set(result["stop"]) == {"calibrated", "random_sample", "knee", "quantile",
                                   "irrelevant_run", "calibrated_patience"}
    assert result["chosen"] == CHOSEN_RULE and CHOSEN_RULE in result["stop"]
    sizes = {f"disease_gene/{q['qid']}": q["n"] for q in result["queries"]}
    for rule in result["stop"].values():
        assert set(rule["per_query"]) == set(sizes)
        for key, stop in rule["per_query"].items():
            assert 1 <= stop["stopped_at"] <= sizes[key] and 0.0 <= stop["recall"] <= 1.0
    # QBCB cannot certify 95% with 2 relevant per list: it screens each whole list
    assert all(s["stopped_at"] == sizes[k] and s["recall"] == 1.0
               for k, s in result["stop"]["quantile"]["per_query"].items())
    by_task = result["by_task"]["disease_gene"]["stop"]["knee"]["per_query"]
    assert set(by_task) == {q["qid"] for q in result["queries"]}
    assert out.with_suffix(".html").read_text().count("plotly") > 1
    printed = capsys.readouterr().out
    assert "calibrated_patience" in printed and "x oracle" in printed
    assert f"* the app's rule: {CHOSEN_RULE}" in printed
    # the lists are cached: a second run reads them (same figures); the old spelling (issue 44)
    # runs the same replay, with a note
    assert main(["simulate", "-w", str(ws.root), "--schema", "disease_gene", "--screening",
                 "--split", "heldout", "--out", str(out), "--quiet", "--no-stop"]) == 0
    assert capsys.readouterr().err.strip() == (
        "note: `kbcurate simulate --screening` is now `kbcurate simulate screening`; the old "
        "spelling still works")
    again = json.loads(out.read_text())
    assert again["learners"] == result["learners"] and "calibrated" not in again["stop"]
    # a subset of the rules; the same seed gives the same stops
    assert main(["simulate", "screening", "-w", str(ws.root), "--schema", "disease_gene",
                 "--out", str(out), "--quiet", "--stop-rules", "knee,quantile"]) == 0
    subset = json.loads(out.read_text())
    assert set(subset["stop"]) == {"knee", "quantile"}
    assert subset["stop"]["quantile"] == result["stop"]["quantile"]
    assert main(["simulate", "screening", "-w", str(ws.root), "--schema", "disease_gene",
                 "--quiet", "--stop-rules", "oracle"]) == 2
    assert "Unknown stop rule 'oracle'" in capsys.readouterr().err
    assert main(["simulate", "-w", str(ws.root), "--schema", "disease_gene", "--screening",
                 "--recall-target", "1.5", "--quiet"]) == 2
    assert "--recall-target must be in (0, 1)" in capsys.readouterr().err


def _triage_file(root):
    """Twelve hand-made triage abstracts: 5 about a mutation breaking a binding."""
    docs = []
    for i in range(12):
        relevant = i % 2 == 0 and i < 10
        text = (f"The R{i}Q mutation abolishes binding of the protein to its partner"
                if relevant else f"A cohort study of diet number {i} and sleep")
        docs.append({"id": str(700 + i), "infons": {"relevant": "yes" if relevant else "no"},
                     "passages": [{"infons": {"type": "abstract"}, "text": text}]})
    path = root / "bc6pm" / "PMtask_Triage_TestSet.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"documents": docs}, fh)


def test_simulate_screening_replays_bc6pm_hoc_and_long_lists(tmp_workspace, tmp_path, capsys):
    from curation.cli.main import main

    ws = _kb_workspace(tmp_workspace)
    _hoc_file(tmp_path)
    _triage_file(tmp_path)
    out = tmp_path / "topic.json"
    assert main(["simulate", "screening", "-w", str(ws.root), "--hoc", "--bc6pm",
                 "--data-dir", str(tmp_path), "--out", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert set(result["by_task"]) == {"hoc", "bc6pm"}
    bc6pm = [q for q in result["queries"] if q["schema"] == "bc6pm"]
    assert len(bc6pm) == 1 and bc6pm[0]["n"] == 12 and bc6pm[0]["relevant"] == 5
    assert "bc6pm/bc6pm-triage-test" in result["stop"][CHOSEN_RULE]["per_query"]
    # only the schema's queries with at least N relevant candidates (none here has 3)
    assert main(["simulate", "screening", "-w", str(ws.root), "--schema", "disease_gene",
                 "--min-relevant", "3", "--quiet", "--no-stop"]) == 2
    assert "relevant" in capsys.readouterr().err
    assert main(["simulate", "screening", "-w", str(ws.root), "--schema", "disease_gene",
                 "--min-relevant", "0", "--quiet"]) == 2
    assert "--min-relevant must be >= 1" in capsys.readouterr().err
    default = ws.root / "exports" / "screening-disease_gene-min2-heldout.json"
    assert main(["simulate", "screening", "-w", str(ws.root), "--schema", "disease_gene",
                 "--min-relevant", "2", "--quiet", "--no-stop"]) == 0
    assert default.is_file() and json.loads(default.read_text())["options"]["min_relevant"] == 2
