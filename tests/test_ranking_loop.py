"""The fast learner at work (issue 25): learn as you label (setting, claims, the background round
and the gate), the ranked search with reasons on cards, each schema's default ranking chosen by
measurement, and the in-memory simulation of labelling rounds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from curation.access.users import Role, User
from curation.evaluation.harness import build_task
from curation.jobs.queue import JobStatus, run_job, submit_job
from curation.matching.matcher import EntityMatcher
from curation.ranking.model import RankerOptions
from curation.ranking.versions import active_version
from curation.search.indexing import get_index
from curation.search.ranked import (
    RANKED_ACTIVE,
    default_for,
    describe,
    is_ranked_choice,
    open_ranked,
    ranked_choices,
    resolve_ranked_choice,
)
from curation.search.session import card_html, run_search
from curation.store.labels import Labels
from curation.store.rankers import (
    DEFAULT_RETRAIN_EVERY,
    Rankers,
    RankingChoice,
)
from curation.store.relations import Relations
from curation.training.ranker import maybe_learn, train_ranker
from kb_sources.errors import CurationError
from tests.loop_fixtures import make_loop_workspace

ALICE = User("alice", Role.CURATOR)
ADMIN = User("admin", Role.ADMIN)
SMALL = RankerOptions(n_estimators=20, min_child_samples=1)
#: Another seed: another model file, so a second version is kept (identical ones are not).
OTHER = RankerOptions(n_estimators=20, min_child_samples=1, seed=14)


def train_active(ws, **kwargs):
    """A round whose version an admin activates (on this hand-made KB bm25+rerank is perfect,
    so the gate keeps every first version: issue 36 item 4)."""
    from curation.training.ranker import promote_ranker

    result = train_ranker(ws, "disease_gene", user=ADMIN, progress=False,
                          options=kwargs.pop("options", SMALL), **kwargs)
    promote_ranker(ws, result.version.id, user=ADMIN, reason="hand-made KB: as good")
    return result


def label(ws, i: int, grade: str = "irrelevant", schema: str = "disease_gene"):
    q = build_task(ws, schema).split("train")[i % 3]
    return Labels(ws).record(user="alice", schema=schema, query_key=q.qid, query_text=q.text,
                             doc_id=str(301 + i), grade=grade)


# -- learn as you label --------------------------------------------------------------------------
def test_retrain_setting_and_label_claims(tmp_workspace):
    ws = make_loop_workspace(tmp_workspace)
    assert Rankers(ws).retrain_every() == DEFAULT_RETRAIN_EVERY == 20
    Rankers(ws).set_retrain_every(3, user=ADMIN)
    assert Rankers(ws).retrain_every() == 3
    for bad in (-1, 2.5, True):
        with pytest.raises(CurationError, match="whole number >= 0"):
            Rankers(ws).set_retrain_every(bad, user=ADMIN)
    assert Rankers(ws).labels_waiting("disease_gene") == 0
    label(ws, 0)
    label(ws, 1)
    assert Rankers(ws).labels_waiting("disease_gene") == 2
    assert Rankers(ws).claim_labels("disease_gene", 3) is None  # not enough yet
    label(ws, 1, "partial")  # a relabel is a new row: it counts
    assert Rankers(ws).claim_labels("disease_gene", 3) == 3
    assert Rankers(ws).labels_waiting("disease_gene") == 0
    assert Rankers(ws).claim_labels("disease_gene", 3) is None  # taken once only
    assert Rankers(ws).claim_labels("disease_gene", 0) is None
    audit = ws.conn.execute("SELECT actor, action, after FROM audit_log "
                            "WHERE object_type = 'setting'").fetchall()
    assert [(a[0], a[1]) for a in audit] == [("admin", "set")] and '"value": 3' in audit[0][2]


def test_maybe_learn_submits_one_round_per_k_labels_and_the_round_keeps_a_useless_first(
        tmp_workspace):
    ws = make_loop_workspace(tmp_workspace)
    Rankers(ws).set_retrain_every(2, user=ADMIN)
    label(ws, 0)
    assert maybe_learn(ws, "disease_gene", user=ALICE) is None
    label(ws, 1, "complete")
    from unittest import mock
    with mock.patch("curation.training.ranker.submit_job",
                    side_effect=lambda *a, **k: submit_job(*a, **k, start=False)):
        job = maybe_learn(ws, "disease_gene", user=ALICE)
        # the round runs as the system on alice's behalf (issue 35 item 7): the job names her
        assert job is not None and job.kind == "rank" and job.created_by == "<system>"
        assert job.params == {"schema": "disease_gene", "labels": 2, "labeller": "alice"}
        audit = ws.audit_log("ranker round")[0]
        assert (audit.actor, audit.after_value()["on_behalf_of"]) == ("<system>", "alice")
        label(ws, 2)
        label(ws, 3)  # two more while the first round is queued: no second round
        assert maybe_learn(ws, "disease_gene", user=ALICE) is None
        done = run_job(ws, job.id)
    assert done.status is JobStatus.DONE, done.error
    assert done.result["labels_used"] >= 1 and done.result["version"] == "disease_gene-ranker@1"
    # issue 36 item 4: bm25+rerank is perfect on this KB, so a first version gains nothing and
    # is not activated (it was: "no active version: the candidate becomes the first")
    assert not done.result["activated"] and active_version(ws, "disease_gene") is None
    assert done.result["reasons"][-1].endswith("a first version must beat the measured "
                                               "default (bm25+rerank) on the held-out queries")
    assert "kept as a candidate" in done.message
    # the round is in the history, on alice's behalf (issue 36 item 5)
    from curation.training.round_history import last_rounds
    (rec,) = last_rounds(ws, "disease_gene")
    assert (rec.outcome, rec.on_behalf_of, rec.started_by, rec.labels) == (
        "kept", "alice", "<system>", done.result["labels_used"])
    assert rec.detail["trigger"] == "2 new labels by alice"
    assert rec.detail["heldout"]["against"] == "bm25+rerank"
    # the two labels given meanwhile still wait for the next round
    assert Rankers(ws).labels_waiting("disease_gene") == 2
    Rankers(ws).set_retrain_every(0, user=ADMIN)
    assert maybe_learn(ws, "disease_gene", user=ALICE) is None  # automatic rounds off


def test_rank_job_parameters_are_checked(tmp_workspace):
    ws = make_loop_workspace(tmp_workspace)
    with pytest.raises(CurationError, match="nope"):
        submit_job(ws, "rank", {"schema": "nope"}, user=ADMIN, start=False)
    with pytest.raises(CurationError, match="'labels' must be a whole number"):
        submit_job(ws, "rank", {"schema": "disease_gene", "labels": -4}, user=ADMIN,
                   start=False)
    with pytest.raises(CurationError, match="'labeller' must be a user name"):
        submit_job(ws, "rank", {"schema": "disease_gene", "labeller": 3}, user=ADMIN,
                   start=False)
    with pytest.raises(CurationError, match="unknown parameter"):
        submit_job(ws, "rank", {"schema": "disease_gene", "url": "x"}, user=ADMIN, start=False)


# -- ranked search in the app's service layer ----------------------------------------------------
def test_ranked_search_names_the_version_and_gives_reasons(tmp_workspace):
    ws = make_loop_workspace(tmp_workspace)
    assert ranked_choices(ws, "disease_gene") == []
    with pytest.raises(CurationError, match="no active ranker version yet"):
        resolve_ranked_choice(ws, "disease_gene", RANKED_ACTIVE)
    train_active(ws)
    train_ranker(ws, "disease_gene", user=ADMIN, progress=False, options=OTHER, gate=False)
    assert ranked_choices(ws, "disease_gene") == [
        RANKED_ACTIVE, "ranked · disease_gene-ranker@2", "ranked · disease_gene-ranker@1"]
    assert is_ranked_choice(RANKED_ACTIVE) and not is_ranked_choice("bm25")
    version = resolve_ranked_choice(ws, "disease_gene", RANKED_ACTIVE)
    assert version.id == "disease_gene-ranker@1"  # @2 was saved without the gate: not active
    assert resolve_ranked_choice(ws, "disease_gene", "ranked · disease_gene-ranker@2").number == 2
    with pytest.raises(CurationError, match="not a ranker version id"):
        resolve_ranked_choice(ws, "disease_gene", "ranked · ../../etc")
    schema = ws.schemas()["disease_gene"]
    bm25 = get_index(ws, "bm25", progress=False)
    ranked = open_ranked(ws, schema, version, bm25)
    partial = next(p for p in Relations(ws).partial("disease_gene")
                   if p.query["disease"][0].text == "melanoma")
    result = run_search(ws, bm25, schema, partial, "Genes of melanoma", 5,
                        matcher=EntityMatcher(), ranked=ranked)
    assert result.model_version == "ranked · disease_gene-ranker@1"
    assert {d.model_version for d in result.docs} == {"ranked · disease_gene-ranker@1"}
    assert [d.rank for d in result.docs] == list(range(1, len(result.docs) + 1))
    top = result.docs[0]
    assert top.doc_id in ("101", "102")  # "BRAF / NRAS in melanoma", the cited abstracts
    assert 1 <= len(top.reasons) <= 3 and all(isinstance(r, str) and r for r in top.reasons)
    html = card_html(top, "<div>text</div>")
    assert '<div class="kb-why"><b>Why this rank:</b> ' in html
    assert "; ".join(top.reasons) in html  # plain words: escaping leaves them as they are
    plain = run_search(ws, bm25, schema, partial, "Genes of melanoma", 5,
                       matcher=EntityMatcher())
    assert plain.model_version == "bm25" and all(d.reasons == () for d in plain.docs)
    assert "kb-why" not in card_html(plain.docs[0], "<div>text</div>")


def test_reasons_are_escaped_on_the_card(tmp_workspace):
    from dataclasses import replace

    ws = make_loop_workspace(tmp_workspace)
    schema = ws.schemas()["disease_gene"]
    bm25 = get_index(ws, "bm25", progress=False)
    partial = Relations(ws).partial("disease_gene")[0]
    doc = run_search(ws, bm25, schema, partial, "melanoma", 1, matcher=EntityMatcher()).docs[0]
    html = card_html(replace(doc, reasons=("names <script>x</script> in the title",)), "")
    assert "<script>" not in html and "&lt;script&gt;" in html


# -- the default ranking --------------------------------------------------------------------------
def test_default_ranking_is_measured_recorded_and_explained(tmp_workspace, capsys):
    from curation.cli.main import main
    from curation.evaluation.best import choose_default

    ws = make_loop_workspace(tmp_workspace)
    fallback = default_for(ws, "disease_gene")
    assert (fallback.choice, fallback.rerank, fallback.configuration) == ("bm25", True,
                                                                          "bm25+rerank")
    assert "no evaluation has chosen yet" in fallback.reason
    report, record = choose_default(ws, "disease_gene", user=ADMIN, progress=False)
    assert set(record.scores) == {"bm25", "bm25+rerank"}  # nothing else can run yet
    assert any("no active ranker version" in n for n in record.notes)
    assert any("no active dense version" in n for n in record.notes)
    assert record.best in ("bm25", "bm25+rerank") and record.ranker_version is None
    assert record.scores["bm25"] == pytest.approx(report.retrievers["bm25"]["ndcg@10"])
    assert Rankers(ws).default_ranking("disease_gene") == record
    assert "ranker_version" not in record.to_json()  # stored as before: only what was measured
    # issue 36 item 4: 2 test queries are too few to choose by: said with the choice
    assert record.queries == 2 and record.warnings[0].startswith("Scored on only 2 test queries")
    # issue 44 item 2: too few to choose by, so the workspace's evidence decides (here none:
    # no schema was measured on enough queries), never plain bm25 on a 2-query whim
    small = default_for(ws, "disease_gene")
    assert (small.choice, small.rerank, small.configuration) == ("bm25", True, "bm25+rerank")
    assert small.reason == (
        "disease_gene's own measurement is too small to choose (measured on only 2 test queries "
        "(< 20): too few to choose between rankings); no schema of the workspace was measured "
        "on enough queries, so bm25 with the entity rerank, the workspace default")
    train_active(ws)
    assert main(["evaluate", "-w", str(ws.root), "--schema", "disease_gene", "--retriever",
                 "best", "--quiet"]) == 0
    assert "warning: Scored on only 2 test queries (< 20)" in capsys.readouterr().out
    record = Rankers(ws).default_ranking("disease_gene")
    assert set(record.scores) == {"bm25", "bm25+rerank", "ranked"}
    assert record.ranker_version == "disease_gene-ranker@1" and record.by == "cli"
    best = max(record.scores.values())
    assert record.scores[record.best] == best
    chosen = default_for(ws, "disease_gene")
    assert chosen.record == record
    # the active ranker ranks: measured best, or (issue 44 item 2) an admin's activation that 2
    # queries are too few to overrule
    assert (chosen.choice, chosen.rerank, chosen.configuration) == (RANKED_ACTIVE, False,
                                                                    "ranked")
    if record.best == "ranked":
        assert chosen.reason.startswith(f"chosen by test NDCG@10 {best:.3f}")
        assert "warning: measured on only 2 test queries" in chosen.reason
    else:
        assert chosen.reason.startswith("the active learned ranker disease_gene-ranker@1: "
                                        "disease_gene's own measurement is too small to "
                                        "overrule it (measured on only 2 test queries")
    assert main(["evaluate", "-w", str(ws.root), "--schema", "disease_gene", "--retriever",
                 "best", "--retriever", "bm25"]) == 2


def measured(best: str, queries: int, **scores: float) -> RankingChoice:
    """A stored measurement ("bm25_rerank" stands for bm25+rerank)."""
    return RankingChoice(best=best, queries=queries, measured_at="2026-11-28T10:00:00+00:00",
                         scores={k.replace("_rerank", "+rerank"): v for k, v in scores.items()})


def test_a_schema_too_small_to_choose_takes_the_workspaces_pooled_evidence(tmp_workspace):
    """Issue 44 item 2: PO measured on 2 test queries opened on plain bm25."""
    ws = make_loop_workspace(tmp_workspace)
    store = Rankers(ws)
    store.set_default_ranking("PO", measured("bm25", 2, bm25=0.50, bm25_rerank=0.45),
                              user=ADMIN)
    store.set_default_ranking("chemical_gene", measured("bm25+rerank", 40, bm25=0.60,
                                                        bm25_rerank=0.66), user=ADMIN)
    store.set_default_ranking("disease_gene", measured("bm25+rerank", 30, bm25=0.70,
                                                       bm25_rerank=0.72), user=ADMIN)
    small = default_for(ws, "PO")
    assert (small.choice, small.rerank, small.configuration) == ("bm25", True, "bm25+rerank")
    assert small.reason == (
        "PO's own measurement is too small to choose (measured on only 2 test queries (< 20): "
        "too few to choose between rankings); the workspace's evidence: bm25 with the entity "
        "rerank beats bm25 on 2 of 2 schemas measured on enough queries (NDCG@10 +4.0 pp on "
        "average)")
    # a schema measured on enough queries keeps its own choice, whatever the others say
    store.set_default_ranking("PO", measured("bm25", 25, bm25=0.50, bm25_rerank=0.45),
                              user=ADMIN)
    assert default_for(ws, "PO").configuration == "bm25"


def test_an_admins_activation_is_the_default_curators_see(tmp_workspace):
    """Issue 44 item 2: after an admin activated a ranker version, Curate still opened on the
    configuration measured before (bm25)."""
    ws = make_loop_workspace(tmp_workspace)
    Rankers(ws).set_default_ranking("disease_gene", measured("bm25", 40, bm25=0.7,
                                                            bm25_rerank=0.6), user=ADMIN)
    assert default_for(ws, "disease_gene").configuration == "bm25"
    version = train_active(ws).version.id
    chosen = default_for(ws, "disease_gene")
    assert (chosen.choice, chosen.rerank, chosen.configuration) == (RANKED_ACTIVE, False,
                                                                    "ranked")
    assert chosen.reason == (f"the active learned ranker {version}: it was activated after the "
                             "last measurement (bm25 best, no ranker measured)")
    # a measurement of that very version on enough queries overrules it again
    Rankers(ws).set_default_ranking("disease_gene", replace(
        measured("bm25", 40, bm25=0.7, bm25_rerank=0.6, ranked=0.65), ranker_version=version),
        user=ADMIN)
    assert default_for(ws, "disease_gene").configuration == "bm25"


def test_describe_names_the_runner_up_and_ties_go_to_the_simpler():
    record = RankingChoice.from_json({
        "best": "ranked", "metric": "ndcg@10", "split": "test", "ranker_version": "x@3",
        "scores": {"bm25": 0.61, "bm25+rerank": 0.66, "ranked": 0.69}, "unknown": "ignored"})
    assert describe(record) == "chosen by test NDCG@10 0.690 (x@3) vs 0.660 for bm25+rerank"
    # a record stored before warnings were kept still warns on too few queries
    few = RankingChoice(best="bm25", scores={"bm25": 1.0, "ranked": 1.0}, queries=2)
    assert describe(few) == ("chosen by test NDCG@10 1.000 vs 1.000 for ranked; warning: "
                             "measured on only 2 test queries (< 20): too few to choose between "
                             "rankings")
    from curation.evaluation.harness import MIN_SCORED_QUERIES
    from curation.store.rankers import FEW_QUERIES
    assert FEW_QUERIES == MIN_SCORED_QUERIES
    from curation.evaluation.best import CONFIGURATIONS
    scores = {"bm25": 0.5, "bm25+rerank": 0.5}
    assert max(scores, key=lambda n: (round(scores[n], 6), -CONFIGURATIONS.index(n))) == "bm25"


# -- simulation ----------------------------------------------------------------------------------
def test_ranker_simulation_is_seeded_labels_every_split_and_gates_as_the_workspace(
        tmp_workspace, capsys):
    from curation.cli.main import main
    from curation.simulation.ranker import RankerSimulation, simulate_ranker

    ws = make_loop_workspace(tmp_workspace)
    config = RankerSimulation(rounds=2, labels_per_round=3, labels_per_query=2, kb_share=0.5)
    first = simulate_ranker(ws, "disease_gene", config, SMALL, progress=False)
    again = simulate_ranker(ws, "disease_gene", config, SMALL, progress=False)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in first["rounds"]]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in again["rounds"]]
    assert [r["labels"] for r in first["rounds"]] == [0, 3, 6]
    # round 0, the KB-only ranker, is gated too: bm25+rerank is perfect here (issue 36 item 4)
    assert not first["rounds"][0]["promoted"] and first["rounds"][0]["against"] == "bm25+rerank"
    s = first["summary"]
    assert s["labels"] == 6 and s["kb_queries"] == round(0.5 * s["train_queries"])
    assert (s["heldout_queries"], s["rounds_promoted"], s["rounds_kept"]) == (4, 0, 2)
    # the curator labels held-out queries too, and their labels train (issue 36 item 3)
    assert first["rounds"][-1]["labelled_heldout_queries"] >= 1
    assert first["rounds"][-1]["refits"] >= 1  # ... never the model that scores them
    assert ws.conn.execute("SELECT COUNT(*) FROM labels").fetchone()[0] == 0  # in memory only
    with pytest.raises(CurationError, match="kb_share must be in"):
        RankerSimulation(kb_share=0)
    with pytest.raises(CurationError, match="label_splits must be one of all, train"):
        RankerSimulation(label_splits="dev")
    train_only = simulate_ranker(ws, "disease_gene", RankerSimulation(
        rounds=1, labels_per_round=4, labels_per_query=2, label_splits="train"), SMALL,
        progress=False)
    assert train_only["rounds"][-1]["labelled_heldout_queries"] == 0
    out = tmp_workspace.root / "sim"
    assert main(["simulate", "-w", str(ws.root), "--schema", "disease_gene", "--learner",
                 "ranker", "--rounds", "1", "--labels-per-round", "2", "--quiet", "--out",
                 str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 labels: held-out NDCG@10" in printed and (out / "simulation.json").is_file()
    assert "round 0 kept, then 0 promoted / 1 kept" in printed


def test_a_ranker_with_base_model_dense_features_keeps_them_in_search(tmp_workspace):
    import math

    from curation.search.ranked import version_first_stages

    ws = make_loop_workspace(tmp_workspace)
    first = train_active(ws, base_dense=True)
    assert first.version.manifest["base"] is True and first.version.manifest["dense"] is None
    dense, base = version_first_stages(ws, first.version)
    assert dense is None and base is not None and len(base) == 50
    schema = ws.schemas()["disease_gene"]
    ranked = open_ranked(ws, schema, first.version, get_index(ws, "bm25", progress=False))
    assert ranked.context.base is not None and ranked.context.dense is None
    partial = next(p for p in Relations(ws).partial("disease_gene")
                   if p.query["disease"][0].text == "melanoma")
    hits, why = ranked.search(ws, "Genes of melanoma", partial.query, 5, partial.query_key)
    cands = ranked.context.candidates("Genes of melanoma")
    x = ranked.context.features(partial.query, cands, partial.query_key)
    column = ranked.context.names.index("base_cos")
    assert not any(math.isnan(v) for v in x[:, column])  # every candidate has its cosine
    assert len(cands.doc_ids) > len(cands.bm25)  # the dense top N adds candidates
    # the evaluation opens the same first stages, so its score is the version's test metric
    from curation.evaluation.runner import evaluate_workspace
    report = evaluate_workspace(ws, "disease_gene", ["ranked"], progress=False)
    assert report.retrievers["ranked"]["ndcg@10"] == pytest.approx(
        first.version.metrics["test"]["ndcg@10"])
    assert hits and set(why) == {h.doc_id for h in hits}
