"""Issue 38 in the app (AppTest): the Curate page's screening panel (found so far, what is left,
when to stop), the order learned within the query that the label rows record, and the
curator's keyword lists in the sidebar."""

from __future__ import annotations

import re

import pytest
from app_helpers import APP, add_users, build_app_workspace, label_rows, shown, sign_in
from streamlit.testing.v1 import AppTest

from curation.access.users import Role, User
from curation.search.indexing import get_index
from curation.search.keywords import Keywords, get_keywords
from curation.store.labels import Labels
from curation.store.workspace import Workspace
from tests.loop_fixtures import make_loop_workspace

PMID = re.compile(r">PMID (\d+)</a>")
BOSS = User("boss", Role.ADMIN)


@pytest.fixture
def ranked_root(tmp_path, monkeypatch):
    """The hand-made loop KB with its BM25 index and a small active ranker (seconds)."""
    from curation.ranking.model import RankerOptions
    from curation.training.ranker import promote_ranker, train_ranker

    root = tmp_path / "ws"
    with Workspace.init(root) as ws:
        make_loop_workspace(ws)
        get_index(ws, "bm25", progress=False)
        train_ranker(ws, "disease_gene", user=BOSS, progress=False,
                     options=RankerOptions(n_estimators=20, min_child_samples=1, seed=13))
        promote_ranker(ws, "disease_gene-ranker@1", user=BOSS, reason="small test ranker")
    add_users(root, alice="curator", bob="curator", boss="admin")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def panel(at: AppTest):
    (box,) = [e for e in at.expander if shown(e.label).startswith("Screening")]
    return box


def cards(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith('<div class="kb-meta">')]


def order_radio(at: AppTest):
    (radio,) = [r for r in at.radio if r.key and r.key.startswith("screen_order_")]
    return radio


def test_panel_estimates_what_is_left_and_orders_by_every_curators_labels(ranked_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert not at.exception
    key = at.selectbox(key="relation_pick_disease_gene").value
    assert shown(panel(at).label).startswith("Screening · 0 relevant found · about ")
    assert order_radio(at).value == "as ranked"  # no label yet: the ranked order
    first = [PMID.search(c).group(1) for c in cards(at)]
    assert len(first) >= 4
    # two curators label the relation: both count
    with Workspace.open(ranked_root) as ws:
        for user, doc, grade in (("bob", first[0], "complete"), ("boss", first[1], "irrelevant"),
                                 ("bob", first[2], "partial")):
            Labels(ws).record(user=user, schema="disease_gene", query_key=key,
                              query_text="q", doc_id=doc, grade=grade)
    at.run()
    assert not at.exception
    label = shown(panel(at).label)
    assert label.startswith("Screening · 2 relevant found · about "), label
    assert "recall" in label and ("keep screening" in label or "you can stop" in label)
    assert order_radio(at).value == "learned within the query"
    assert any("3 labels" in shown(c.value) for c in panel(at).caption)
    assert panel(at).get("plotly_chart")
    metrics = {m.label: m.value for m in panel(at).metric}
    assert metrics["Relevant found"] == "2"
    # alice labels the first card shown: its row says the order was learned after 3 labels
    html = cards(at)
    assert all(f"<b>#{i + 1}</b>" in c for i, c in enumerate(html))
    unlabelled = [PMID.search(c).group(1) for c in html]
    doc = next(d for d in unlabelled if d not in first[:3])
    grade = next(w for w in at.segmented_control
                 if w.key and w.key.startswith(f"grade_{doc}_"))
    grade.set_value("irrelevant").run()
    assert not at.exception
    row = label_rows(ranked_root)[-1]
    assert row["order_labels"] == 3 and "in-query" not in row["model_version"]
    # the curator switches back to the ranked order: label rows say "as ranked" (NULL)
    at.run()
    order_radio(at).set_value("as ranked").run()
    assert order_radio(at).value == "as ranked"
    html = cards(at)
    doc = next(PMID.search(c).group(1) for c in html if "labelled <b>" not in c)
    grade = next(w for w in at.segmented_control
                 if w.key and w.key.startswith(f"grade_{doc}_"))
    grade.set_value("irrelevant").run()
    row = label_rows(ranked_root)[-1]
    assert row["doc_id"] == doc and row["model_version"] and row["order_labels"] is None


def test_keywords_are_saved_per_user_from_the_sidebar(ranked_root):
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="kw_new_include").input("<script>")
    (add,) = [b for b in at.button if b.label == "Add include"]
    add.click().run()
    assert not at.exception
    at.text_input(key="kw_new_exclude").input("review")
    (add,) = [b for b in at.button if b.label == "Add exclude"]
    add.click().run()
    with Workspace.open(ranked_root) as ws:
        assert get_keywords(ws, "alice", "disease_gene") == Keywords(("<script>",), ("review",))
        assert get_keywords(ws, "bob", "disease_gene") == Keywords()
    at.multiselect(key="kw_del_include_disease_gene").set_value(["<script>"]).run()
    (remove,) = [b for b in at.button if b.key == "kw_rm_include"]
    remove.click().run()
    with Workspace.open(ranked_root) as ws:
        assert get_keywords(ws, "alice", "disease_gene") == Keywords((), ("review",))


def test_without_an_active_ranker_the_panel_says_so_and_the_page_goes_on(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert not at.exception
    box = panel(at)
    assert [shown(i.value) for i in box.info] == [
        "The estimate of what is left needs an active learned ranker for "
        f"{at.selectbox(key='schema').value}; an admin activates one on the Models page."]
    assert cards(at)  # the results are drawn as ranked


def test_the_session_keeps_queues_within_a_count_and_a_memory_budget():
    import numpy as np

    from app_pages.screening_panel import trim_queues
    from curation.screening.queue import build_queue

    def queue(n: int):
        texts = [f"braf v600e melanoma note {i % 7} ward {i % 3}" for i in range(n)]
        return build_queue("q", [f"d{i}" for i in range(n)], texts, np.zeros(n))

    small, big = queue(20), queue(400)
    cache = {"a": small, "b": "The screening queue could not be built (no index).", "c": big}
    trim_queues(cache, count=8, budget=big.nbytes + small.nbytes)
    assert list(cache) == ["a", "b", "c"]  # within both limits: nothing dropped
    trim_queues(cache, count=8, budget=big.nbytes)
    assert list(cache) == ["b", "c"]  # the oldest go first until the rest fit
    trim_queues(cache, count=1, budget=0)
    assert list(cache) == ["c"]  # the newest stays, even over the budget
