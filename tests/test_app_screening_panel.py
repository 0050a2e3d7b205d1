"""Issue 38 in the app (AppTest): the Curate page's screening panel (found so far, what is left,
when to stop), the order learned within the query that the label rows record, and the
curator's keyword lists in the sidebar."""

from __future__ import annotations

import json
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


def figures(at: AppTest) -> dict[str, str]:
    """The panel's figures table: row label -> value (markdown)."""
    (table,) = [m.value for m in panel(at).markdown if m.value.startswith("| Screening |")]
    rows = [line.strip("|").split("|") for line in table.splitlines()[2:]]
    return {label.strip(): value.strip() for label, value in rows}


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
    assert figures(at)["Found"] == "**2** relevant"
    assert any(shown(c.value).endswith("(learned ranker disease_gene-ranker@1).")
               for c in panel(at).caption)  # its version's own calibration
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


def test_without_a_learned_ranker_the_panel_estimates_and_learns_on_bm25(tmp_path, monkeypatch):
    """Issue 43, item 3: on a relation ranked by BM25 + rerank (no ranker version) the panel
    used to say it "needs an active learned ranker"; now the queue is BM25 + rerank's order,
    calibrated on the rank (too few held-out queries here: the built-in default, and the panel
    says so), and the labels learn the order within the query."""
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator", bob="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF").run()
    assert not at.exception
    assert not panel(at).info  # no "needs an active learned ranker"
    assert any(m.value.startswith(":orange[:material/pending:] ") and
               "keep screening" in shown(m.value).lower() for m in panel(at).markdown)
    assert shown(panel(at).label).startswith("Screening · 0 relevant found · about ")
    assert figures(at)["Screened"].startswith("**0** of ")
    words = [shown(c.value) for c in panel(at).caption]
    assert any("Default calibration (built in: disease_gene dev queries, BM25): the workspace "
               "has too few held-out queries for BM25 + entity rerank (" in w for w in words)
    # item 1: the panel names the stop rule the replays chose and how sure the estimate is
    assert any(w.startswith("Stop rule: calibrated_patience (the rule that stopped nearest the "
                            "last relevant abstract in replays, docs/evaluation.md). How sure: "
                            "recall reaches the target with probability 0%") for w in words)
    assert any("the rule stops at 60 irrelevant in a row, or 20 when calibrated P(recall >= "
               "target) >= 95%" in shown(m.value) for m in panel(at).markdown)
    first = [PMID.search(c).group(1) for c in cards(at)]
    key = at.selectbox(key="relation_pick_PO").value
    with Workspace.open(root) as ws:
        for doc, grade in ((first[0], "irrelevant"), (first[1], "complete")):
            Labels(ws).record(user="bob", schema="PO", query_key=key, query_text="q",
                              doc_id=doc, grade=grade)
    at.run()
    assert shown(panel(at).label).startswith("Screening · 1 relevant found · about ")
    assert order_radio(at).value == "learned within the query"
    html = cards(at)
    assert all(f"<b>#{i + 1}</b>" in c for i, c in enumerate(html))  # renumbered, learned
    doc = next(PMID.search(c).group(1) for c in html if PMID.search(c).group(1) not in first[:2])
    grade = next(w for w in at.segmented_control
                 if w.key and w.key.startswith(f"grade_{doc}_"))
    grade.set_value("irrelevant").run()
    assert not at.exception
    row = label_rows(root)[-1]
    assert row["doc_id"] == doc and row["order_labels"] == 2
    assert row["model_version"] == "bm25+rerank"


def test_without_an_index_no_queue_is_built_and_the_reason_is_given(tmp_path):
    """The one case where nothing can be built: the ranking's index is missing (a PubMed
    search refreshing it); the panel says so and the page goes on."""
    from app_pages.screening_panel import page_ranking
    from curation.search.session import SearchResult
    from kb_sources.schema import get_schema

    root = build_app_workspace(tmp_path / "ws", bm25=False)
    with Workspace.open(root) as ws:
        result = SearchResult("Treatment for gene BRAF?", "bm25+rerank", (), ())
        why = page_ranking(ws, get_schema("PO", ws.schemas()), ("bm25", True), result)
    assert why == ("Nothing to screen yet: the screening queue needs the bm25 index, which is "
                   "not built yet. The panel fills in once it is built.")


def test_the_panel_figures_fit_the_narrow_column(ranked_root):
    """Issue 43, layout: three metrics side by side in the right-hand column were cut at
    1280 px ("Relevan...", "Estimat...", "17 ..."); the figures are a two-column table whose
    labels are one short word, and the chart's total label grows into the plot from its left
    edge (anchored right, it ran over the y axis)."""
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert not at.exception
    assert not panel(at).metric
    rows = figures(at)
    assert list(rows) == ["Found", "Left", "Screened"]
    assert all(len(label) <= 8 for label in rows)
    assert rows["Found"] == "**0** relevant"
    assert re.fullmatch(r"about \*\*\d+\.\d\*\* \(90% interval \d+ to \d+\)", rows["Left"])
    assert re.fullmatch(r"\*\*0\*\* of \d+", rows["Screened"])
    chart = panel(at).get("plotly_chart")[0].proto
    layout = json.loads(chart.spec)["layout"]
    (note,) = layout["annotations"]
    assert note["text"].startswith("estimated total ") and note["xanchor"] == "left"
    assert note["x"] == 0 and note["xref"] == "x domain"
    assert layout["legend"]["orientation"] == "h"  # under the plot: the plot keeps the width


def test_the_session_keeps_queues_within_a_count_and_a_memory_budget():
    import numpy as np

    from curation.screening.queue import build_queue, trim_queues

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
