"""Issue 43, items 3 and 4 in the library: a relation ranked by something other than the learned
ranker gets a screening queue from that ranking's order, calibrated on the rank on held-out
queries (the schema's own, else pooled over the workspace's schemas, else the built-in
default: the panel says which), and screening mode's next candidate after the shown list."""

from __future__ import annotations

import json

import numpy as np
import pytest

from curation.evaluation.harness import build_task
from curation.screening.calibration import DEFAULT_RANK_CALIBRATION, Calibration, fit_calibration
from curation.screening.order import next_candidate
from curation.screening.queue import build_queue, order_queue
from curation.screening.sources import (
    DEFAULT,
    OWN,
    POOLED,
    HeldoutLists,
    RankingOrder,
    choose_calibration,
    heldout_stamp,
    ranking_source,
    version_source,
)
from curation.screening.view import screening_view
from curation.search.indexing import get_index
from curation.store.importer import import_items
from curation.store.settings import Settings
from curation.training.round_measure import heldout_pool
from kb_sources.errors import CurationError
from kb_sources.types import Document
from retrievers.base import Hit
from tests.loop_fixtures import make_loop_workspace


def lists_from(schema: str, rng: np.random.Generator, queries: int, a: float = -0.5,
               c: float = -1.5, n: int = 300) -> HeldoutLists:
    """Held-out lists drawn from log-odds = a + c * ln(rank)."""
    p = 1.0 / (1.0 + np.exp(-(a + c * np.log(np.arange(1, n + 1)))))
    relevant = tuple(tuple(int(r) for r in np.flatnonzero(rng.random(n) < p) + 1)
                     for _ in range(queries))
    return HeldoutLists(schema, (n,) * queries, relevant)


def found_at(schema: str, *ranks: int) -> HeldoutLists:
    """One 300-candidate list per query, its one relevant candidate at the rank given."""
    return HeldoutLists(schema, (300,) * len(ranks), tuple((r,) for r in ranks))


def test_a_ranking_is_calibrated_on_its_own_queries_else_pooled_else_the_default():
    dg = lists_from("disease_gene", np.random.default_rng(7), 400)
    own = choose_calibration("disease_gene", "BM25 + entity rerank", {"disease_gene": dg})
    assert own.kind == OWN and own.queries == dg.queries >= 20 and own.calibration.slope == 0
    assert own.calibration.intercept == pytest.approx(-0.5, abs=0.25)
    assert own.calibration.rank_slope == pytest.approx(-1.5, abs=0.15)
    assert own.words() == (f"Calibrated on disease_gene's {dg.queries} held-out queries (BM25 "
                           "+ entity rerank).")
    po = found_at("PO", 1, 2, 1, 7, 30)
    pooled = choose_calibration("PO", "BM25 + entity rerank",
                                {"PO": po, "disease_gene": found_at("disease_gene", *range(1, 13)),
                                 "chemical_gene": found_at("chemical_gene", 1, 3, 5),
                                 "PTM": HeldoutLists("PTM", (0,), ((),))})
    assert pooled.kind == POOLED and (pooled.queries, pooled.schemas, pooled.own) == (20, 3, 5)
    assert pooled.words() == ("Borrowed: pooled over 3 schemas' 20 held-out queries (BM25 + "
                              "entity rerank); PO has too few (5 of the 20 needed).")
    assert pooled.calibration.slope == 0 and pooled.calibration.rank_slope < 0
    default = choose_calibration("PO", "dense · PO-edel@2", {"PO": po})
    assert default.kind == DEFAULT and default.calibration is DEFAULT_RANK_CALIBRATION
    assert default.words() == ("Default calibration (built in: disease_gene dev queries, "
                               "BM25): the workspace has too few held-out queries for dense · "
                               "PO-edel@2 (5 of the 20 needed).")
    ranker = version_source("PO", "learned ranker PO-ranker@1",
                            {"calibration": {"intercept": -1.0, "slope": 0.5,
                                             "rank_slope": -0.2, "queries": 5}})
    assert ranker.calibration == Calibration(-1.0, 0.5, -0.2, 5)
    assert ranker.words() == ("Calibrated on PO's 5 held-out queries (learned ranker "
                              "PO-ranker@1).")


def test_a_rank_only_fit_keeps_the_score_term_at_zero():
    rng = np.random.default_rng(3)
    lists = lists_from("x", rng, 80, a=0.2, c=-2.0, n=200)
    flags = lists.flags()
    scores = [rng.normal(size=len(y)) + 5 * y for y in flags]  # scores that would separate
    fitted = fit_calibration([np.sort(s)[::-1] for s in scores], flags, rank_only=True)
    assert fitted.slope == 0 and fitted.rank_slope == pytest.approx(-2.0, abs=0.2)
    assert fit_calibration(scores, flags).slope > 0  # the usual fit uses them


def test_a_queue_is_built_from_a_non_ranker_order(tmp_workspace):
    ws = make_loop_workspace(tmp_workspace)
    ranked = [("201", 0.9), ("101", 0.95), ("301", 12.5), ("302", 11.0), ("no-such-doc", 3.0)]
    cal = Calibration(-0.5, 0.0, -1.3)
    queue = order_queue(ws, "melanoma", ranked, extra=["101", "305"], calibration=cal)
    # the ranking's order, not its scores' (a rerank's head, then the first stage's tail)
    assert queue.doc_ids == ("201", "101", "301", "302", "no-such-doc", "305")
    assert queue.static.tolist() == [0.9, 0.95, 12.5, 11.0, 3.0, 0.0]
    assert queue.prior == pytest.approx(-0.5 - 1.3 * np.log(np.arange(1, 7)))
    assert queue.calibration == cal and queue.rows.shape[0] == 6
    assert screening_view(queue, []).order == queue.doc_ids  # no label: as ranked
    with pytest.raises(CurationError, match=r"needs a rank-only calibration \(slope 0\)"):
        order_queue(ws, "melanoma", ranked, calibration=Calibration(-0.5, 0.48, -0.7))


def test_held_out_lists_are_searched_once_per_ranking_and_corpus_and_kept(tmp_workspace):
    ws = make_loop_workspace(tmp_workspace)
    bm25 = get_index(ws, "bm25", progress=False)
    searched: list[str] = []

    def search(text: str, k: int) -> list[Hit]:
        searched.append(text)
        return bm25.search(text, k)

    order = RankingOrder("bm25", "BM25", search)
    pool = heldout_pool(build_task(ws, "disease_gene"))
    source = ranking_source(ws, "disease_gene", order,
                            lambda name: heldout_pool(build_task(ws, name)), min_queries=2)
    assert len(searched) == len(pool) > 0
    assert source.kind == OWN and source.queries == len(pool)
    assert source.words() == (f"Calibrated on disease_gene's {len(pool)} held-out queries "
                              "(BM25).")
    kept = json.loads(Settings(ws).value("screening_heldout:bm25:disease_gene"))
    assert kept["stamp"] == heldout_stamp(ws) and len(kept["lengths"]) == len(pool)
    again = ranking_source(ws, "disease_gene", order,
                           lambda name: heldout_pool(build_task(ws, name)), min_queries=2)
    assert again == source and len(searched) == len(pool)  # read back, not searched
    import_items(ws, [Document("999", "melanoma BRAF", "BRAF melanoma", source="handmade")],
                 reader="test", path="handmade", progress=False)
    ranking_source(ws, "disease_gene", order, lambda name: heldout_pool(build_task(ws, name)),
                   min_queries=2)
    assert len(searched) == 2 * len(pool)  # a new corpus: searched again
    few = ranking_source(ws, "disease_gene", order,
                         lambda name: heldout_pool(build_task(ws, name)))
    assert few.kind == DEFAULT and few.calibration is DEFAULT_RANK_CALIBRATION


def test_screening_mode_takes_the_queues_next_candidate_after_the_list():
    texts = {"a": "braf v600e melanoma", "b": "braf v600e melanoma vemurafenib",
             "c": "hip fracture elderly", "d": "braf melanoma vemurafenib response",
             "e": "asthma inhaler children"}
    queue = build_queue("q", list(texts), list(texts.values()), [5, 4, 3, 2, 1],
                        calibration=Calibration(-1.0, 0.5))
    static = screening_view(queue, [])
    assert next_candidate(queue, static, {"a", "b"}, learned=True) == ("c", None)
    view = screening_view(queue, [("a", "complete"), ("c", "irrelevant")])
    assert next_candidate(queue, view, {"a", "b"}, learned=True) == ("d", 2)  # learned: d up
    assert next_candidate(queue, view, {"a", "b"}, learned=False) == ("d", None)
    assert next_candidate(queue, view, {"b", "d", "e"}, learned=False) == ("a", None)
    assert next_candidate(queue, view, set(texts), learned=True) is None
