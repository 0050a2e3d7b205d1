"""The worklist across relations (curation/search/worklist.py) on the app's fixture workspace:
exact order under each priority, unlabelled counts per user, the cost cap, label activity per
day and grade, progress per user."""

from __future__ import annotations

import pandas as pd
import pytest
from app_helpers import build_app_workspace

import curation.search.worklist as wl
from curation.access.users import Role, User
from curation.matching.matcher import EntityMatcher
from curation.search.activity import label_activity, progress_by_user
from curation.search.indexing import get_index
from curation.search.session import run_search
from curation.search.suggestions import add_suggestion
from curation.search.worklist import (
    Priority,
    WorklistOptions,
    best_level,
    data_stamp,
    level_rank,
    new_answer_count,
    new_answers_ties,
    worklist,
    worklist_frame,
)
from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

# The PO relations of the fixture (CIViC sample), in the KB list order (most cited, most
# records, query key): the tie-break of every priority.
EGFR = "gene=gene:1956|variant=variant:l858r"  # level B, top-3: 15118073, 99000001
ABL1 = "gene=gene:25|variant=variant:bcr::abl"  # B, top: 99000001
ALK = "gene=gene:238|variant=variant:eml4-alk"  # D, top: 99000001
PDGFRA = "gene=gene:5156|variant=variant:d842v"  # B, top: 90100003, 99000001
BRAF = "gene=gene:673|variant=variant:v600e"  # A, top-3: 99000001, 90100001, 90100002
RET = "gene=gene:5979|variant=variant:ret fusions"  # B, top: 99000001
K = 3


@pytest.fixture
def ws(tmp_path):
    root = build_app_workspace(tmp_path / "ws")
    with Workspace.open(root) as ws:
        yield ws


@pytest.fixture
def bm25(ws):
    return get_index(ws, "bm25", progress=False)


def keys(rows) -> list[str]:
    return [r.query_key for r in rows]


def label(ws, user, key, doc, grade, day=None):
    stored = Labels(ws).record(user=user, schema="PO", query_key=key, query_text="q", doc_id=doc,
                               grade=grade, model_version="bm25")
    if day:
        with ws.transaction():
            ws.conn.execute("UPDATE labels SET created_at = ? WHERE id = ?",
                            (f"{day}T10:00:00+00:00", stored.id))
    return stored


def suggest(ws, key, pmid, answer, status="new"):
    partial = next(p for p in Relations(ws).partial("PO") if p.query_key == key)
    row = add_suggestion(ws, user=User("carol", Role.CURATOR), schema=ws.schemas()["PO"],
                         partial=partial, pmid=pmid, answer=answer, comment="shown in vitro",
                         answer_key=f"drug:{answer.lower()}")
    if status != "new":
        with ws.transaction():
            ws.conn.execute("UPDATE source_suggestions SET status = ? WHERE id = ?",
                            (status, row.id))


@pytest.fixture
def labelled(ws):
    """EGFR: alice labelled its whole top-3; ABL1: bob its only hit; BRAF: bob one, alice one
    (relabelled: one current label); PDGFRA: bob a skip on an abstract outside its top-3."""
    label(ws, "alice", EGFR, "15118073", "complete", "2024-05-01")
    label(ws, "alice", EGFR, "99000001", "irrelevant", "2024-05-01")
    label(ws, "bob", ABL1, "99000001", "partial", "2024-05-02")
    label(ws, "bob", BRAF, "90100001", "complete", "2024-05-02")
    label(ws, "alice", BRAF, "99000001", "partial", "2024-05-01")
    label(ws, "alice", BRAF, "99000001", "complete", "2024-05-03")  # supersedes the partial
    label(ws, "bob", PDGFRA, "12345", "skip", "2024-05-03")
    return ws


def test_rows_use_the_curate_query_and_its_top_k(ws, bm25):
    schema = ws.schemas()["PO"]
    rows = worklist(ws, "PO", bm25, k=K, progress=False)
    matcher = EntityMatcher()
    by_key = {p.query_key: p for p in Relations(ws).partial("PO")}
    for row in rows:
        partial = by_key[row.query_key]
        text = partial.render(schema).text
        curate = run_search(ws, bm25, schema, partial, text, K, matcher=matcher)
        assert row.query_text == text
        assert row.doc_ids == tuple(d.doc_id for d in curate.docs)
        assert row.model_version == curate.model_version == "bm25"
    assert rows[0].label == "BRAF · V600E → ? (1 known treatment, 1 PMIDs)"
    assert rows[0].doc_ids == ("99000001", "90100001", "90100002")


def test_evidence_priority_best_level_first_ties_in_kb_order(ws, bm25):
    rows = worklist(ws, "PO", bm25, k=K, progress=False)
    assert keys(rows) == [BRAF, EGFR, ABL1, PDGFRA, RET, ALK]
    assert [r.evidence for r in rows] == ["A", "B", "B", "B", "B", "D"]
    assert all(r.unlabelled == len(r.doc_ids) and r.unlabelled_by_user is None for r in rows)


def test_finished_relations_leave_the_list(labelled, bm25):
    rows = worklist(labelled, "PO", bm25, k=K, progress=False)
    assert keys(rows) == [BRAF, PDGFRA, RET, ALK]  # EGFR and ABL1: every top abstract labelled
    braf = rows[0]
    assert (braf.unlabelled, braf.labels, braf.labels_by_user) == (1, 2, None)
    assert braf.team_fraction == pytest.approx(2 / 3)
    done = worklist(labelled, "PO", bm25, k=K, progress=False,
                    options=WorklistOptions(include_done=True))
    assert keys(done) == [BRAF, EGFR, ABL1, PDGFRA, RET, ALK]
    assert [r.todo for r in done] == [1, 0, 0, 2, 1, 1]


def test_unlabelled_counts_per_user(labelled, bm25):
    alice = {r.query_key: r for r in worklist(labelled, "PO", bm25, k=K, user="alice",
                                              progress=False)}
    assert EGFR not in alice  # alice labelled its whole top-3
    assert (alice[ABL1].unlabelled_by_user, alice[ABL1].unlabelled) == (1, 0)  # bob's label
    assert (alice[BRAF].unlabelled_by_user, alice[BRAF].unlabelled) == (2, 1)
    assert (alice[BRAF].labels, alice[BRAF].labels_by_user) == (2, 1)
    assert alice[BRAF].done_fraction == pytest.approx(1 / 3)
    bob = {r.query_key: r for r in worklist(labelled, "PO", bm25, k=K, user="bob",
                                            progress=False)}
    assert ABL1 not in bob and bob[EGFR].unlabelled_by_user == 2
    assert (bob[PDGFRA].labels_by_user, bob[PDGFRA].unlabelled_by_user) == (1, 2)  # the skip
    assert bob[BRAF].unlabelled_by_user == 2


def test_fewest_labels_priority(labelled, bm25):
    rows = worklist(labelled, "PO", bm25, k=K, priority="fewest_labels", progress=False)
    assert keys(rows) == [ALK, RET, PDGFRA, BRAF]
    assert [r.labels for r in rows] == [0, 0, 1, 2]
    alice = worklist(labelled, "PO", bm25, k=K, user="alice", priority=Priority.FEWEST_LABELS,
                     progress=False)
    assert keys(alice) == [ALK, RET, ABL1, PDGFRA, BRAF]
    everything = worklist(labelled, "PO", bm25, k=K, priority="FEWEST_LABELS", progress=False,
                          options=WorklistOptions(include_done=True))
    assert keys(everything) == [ALK, RET, ABL1, PDGFRA, EGFR, BRAF]


def test_new_answers_priority(labelled, bm25):
    suggest(labelled, PDGFRA, "1", "Avapritinib")
    suggest(labelled, PDGFRA, "2", "Ripretinib")
    suggest(labelled, PDGFRA, "3", "Sunitinib", status="accepted")  # reviewed: not counted
    suggest(labelled, RET, "4", "Pralsetinib")
    suggest(labelled, RET, "5", "Pralsetinib")  # the same answer from a second abstract
    suggest(labelled, ALK, "6", "Crizotinib")  # the KB has it already
    suggest(labelled, BRAF, "7", "Sorafenib", status="rejected")
    matcher = EntityMatcher()
    rows = worklist(labelled, "PO", bm25, k=K, priority="new_answers", progress=False,
                    matcher=matcher)
    assert keys(rows) == [PDGFRA, RET, ALK, BRAF]
    assert [(r.new_answers, r.pending_suggestions, r.new_candidates) for r in rows] == [
        (2, 2, 0), (1, 2, 0), (0, 1, 0), (0, 0, 1)]  # BRAF: imatinib in 90100001
    everything = worklist(labelled, "PO", bm25, k=K, priority="new_answers", progress=False,
                          matcher=matcher, options=WorklistOptions(include_done=True))
    assert keys(everything) == [PDGFRA, RET, ALK, BRAF, EGFR, ABL1]
    assert not new_answers_ties(everything)


def test_new_answers_order_counts_candidates_without_suggestions(ws, bm25):
    """Issue 29 item 6: with no pending suggestion every relation tied and the order was the KB
    list's, silently; the order now counts the answer candidates itself."""
    matcher = EntityMatcher()
    rows = worklist(ws, "PO", bm25, k=K, priority="new_answers", progress=False,
                    matcher=matcher)  # candidates not asked for: counted anyway
    assert keys(rows) == [BRAF, EGFR, ABL1, ALK, PDGFRA, RET]  # KB order after the candidate
    assert [r.new_candidates for r in rows] == [1, 0, 0, 0, 0, 0]
    assert worklist_frame(rows)["answer candidates"].tolist() == [1, 0, 0, 0, 0, 0]
    assert not new_answers_ties(rows)
    first = worklist(ws, "PO", bm25, k=K, limit=1, priority="new_answers", progress=False,
                     matcher=matcher)  # counted over the returned rows only: EGFR has none
    assert keys(first) == [EGFR] and new_answers_ties(first)
    with pytest.raises(CurationError, match="the new_answers order need the entity matcher"):
        worklist(ws, "PO", bm25, k=K, priority="new_answers", progress=False)


def test_new_answer_count_ignores_known_answers(ws):
    alk = next(p for p in Relations(ws).partial("PO") if p.query_key == ALK)
    assert new_answer_count(alk, [("drug:crizotinib", "Crizotinib"), ("", " crizotinib "),
                                  ("", "Crizotinib + 2,4-pyrimidinediamine"),
                                  ("drug:lorlatinib", "Lorlatinib"), ("", "lorlatinib"),
                                  ("", "Alectinib"), ("", "alectinib")]) == 3


def test_limit_caps_rows_and_retrieval(labelled, bm25, monkeypatch):
    queries: list[str] = []
    search_batch = bm25.search_batch

    def counting(texts, k=10):
        queries.extend(texts)
        return search_batch(texts, k)

    monkeypatch.setattr(bm25, "search_batch", counting)
    monkeypatch.setattr(wl, "BATCH", 1)
    calls: list[tuple[int, int]] = []
    rows = worklist(labelled, "PO", bm25, k=K, limit=2, progress=lambda n, t: calls.append((n, t)))
    assert keys(rows) == [BRAF, PDGFRA]
    assert len(queries) == 4  # BRAF, EGFR (done), ABL1 (done), PDGFRA: then the limit is met
    assert calls == [(1, 6), (2, 6), (3, 6), (4, 6)]


def test_rerank_and_answer_candidates(ws, bm25):
    schema = ws.schemas()["PO"]
    matcher = EntityMatcher()
    rows = worklist(ws, "PO", bm25, k=K, progress=False, matcher=matcher,
                    options=WorklistOptions(rerank=True, candidates=True))
    by_key = {p.query_key: p for p in Relations(ws).partial("PO")}
    for row in rows:
        partial = by_key[row.query_key]
        curate = run_search(ws, bm25, schema, partial, row.query_text, K, matcher=matcher,
                            rerank=True)
        assert row.doc_ids == tuple(d.doc_id for d in curate.docs)
        assert row.model_version == curate.model_version == "bm25+rerank"
        assert row.new_candidates == sum(1 for c in curate.candidates if c.new)
    assert any(r.new_candidates for r in rows)
    assert worklist_frame(rows)["answer candidates"].tolist() == [r.new_candidates for r in rows]


def test_bad_arguments_say_what_to_do(ws, bm25):
    with pytest.raises(CurationError, match="Available options: evidence, new_answers, "
                                            "fewest_labels"):
        worklist(ws, "PO", bm25, priority="oldest", progress=False)
    with pytest.raises(CurationError, match="matcher=EntityMatcher"):
        worklist(ws, "PO", bm25, progress=False, options=WorklistOptions(candidates=True))
    with pytest.raises(CurationError, match="k >= 1 and limit >= 1"):
        worklist(ws, "PO", bm25, limit=0, progress=False)
    with pytest.raises(CurationError, match="Unknown schema"):
        worklist(ws, "NOPE", bm25, progress=False)


def test_evidence_levels_rank_strongest_first(ws):
    assert sorted(["C", "a", "E", "B"], key=level_rank) == ["a", "B", "C", "E"]
    assert sorted(["R1", "4", "3B", "2A", "LEVEL_2", "1", "3A"], key=level_rank) == [
        "1", "R1", "LEVEL_2", "2A", "3A", "3B", "4"]
    assert sorted(["high", "B", "2"], key=level_rank) == ["2", "B", "high"]
    by_key = {p.query_key: p for p in Relations(ws).partial("PO")}
    assert best_level(by_key[BRAF]) == "A" and best_level(by_key[ALK]) == "D"


def test_label_activity_per_day_and_grade(labelled):
    label(labelled, "alice", "other", "1", "complete", "2024-05-03")
    record = Labels(labelled).record(user="bob", schema="PTM", query_key="k", query_text="q",
                                     doc_id="9", grade="partial")
    with labelled.transaction():
        labelled.conn.execute("UPDATE labels SET created_at = '2024-05-02T23:59:59+00:00' "
                              "WHERE id = ?", (record.id,))
    frame = label_activity(labelled, "PO")
    assert list(frame.columns) == ["day", "grade", "labels"]
    assert frame["day"].dtype.kind == "M"
    got = [(d.strftime("%Y-%m-%d"), g, n) for d, g, n in frame.itertuples(index=False)]
    assert got == [("2024-05-01", "complete", 1), ("2024-05-01", "irrelevant", 1),
                   ("2024-05-02", "complete", 1), ("2024-05-02", "partial", 1),
                   ("2024-05-03", "complete", 2), ("2024-05-03", "skip", 1)]
    alice = label_activity(labelled, "PO", user="alice")
    assert alice["labels"].sum() == 4  # the superseded partial is left out
    every = label_activity(labelled)
    assert every.loc[every["day"] == pd.Timestamp("2024-05-02"), "labels"].sum() == 3
    empty = label_activity(labelled, "PO", user="nobody")
    assert empty.empty and list(empty.columns) == ["day", "grade", "labels"]


def test_progress_by_user(labelled, bm25):
    frame = progress_by_user(labelled, "PO")
    assert frame.to_dict("records") == [
        {"user": "alice", "labels": 3, "complete": 2, "partial": 0, "irrelevant": 1, "skip": 0,
         "relations": 2, "last label": "2024-05-03"},
        {"user": "bob", "labels": 3, "complete": 1, "partial": 1, "irrelevant": 0, "skip": 1,
         "relations": 3, "last label": "2024-05-03"}]
    rows = worklist(labelled, "PO", bm25, k=K, progress=False,
                    options=WorklistOptions(include_done=True))
    total = sum(len(r.doc_ids) for r in rows)  # 3 + 2 + 1 + 2 + 1 + 1
    frame = progress_by_user(labelled, "PO", rows)
    assert frame["worklist abstracts"].tolist() == [total, total] == [10, 10]
    assert frame["worklist labelled"].tolist() == [3, 2]  # bob's skip lies outside the top-3
    assert frame["worklist progress"].tolist() == pytest.approx([0.3, 0.2])
    assert progress_by_user(labelled, "PTM").empty


def test_data_stamp_changes_with_labels_and_suggestions(ws):
    first = data_stamp(ws)
    stored = label(ws, "alice", BRAF, "90100001", "complete")
    second = data_stamp(ws)
    assert second != first
    with ws.transaction():
        ws.conn.execute("DELETE FROM labels WHERE id = ?", (stored.id,))
    assert data_stamp(ws) != second
    suggest(ws, RET, "4", "Pralsetinib")
    third = data_stamp(ws)
    with ws.transaction():
        ws.conn.execute("UPDATE source_suggestions SET status = 'accepted'")
    assert data_stamp(ws) not in (first, second, third)
