"""BiCA: walks over a document graph (Algorithm 1), the kNN graph, and KB-aware triplets."""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import pytest
from loop_fixtures import make_loop_workspace

from curation.evaluation.harness import build_task
from curation.store.importer import import_items, insert_pairs
from curation.training.recipes.bica.triplets import (
    BicaConfig,
    Triplet,
    build_bica_examples,
    triplet_digest,
)
from kb_sources.errors import CurationError
from kb_sources.types import Document
from retrievers.errors import RetrieverError
from retrievers.training.walks import WalkResult, knn_graph, neighbourhood, walk_negatives

# -- walks ------------------------------------------------------------------------------------


def unit_rows(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def on_circle(degrees: list[float]) -> np.ndarray:
    rad = np.radians(degrees)
    return np.stack([np.cos(rad), np.sin(rad)], axis=1).astype(np.float32)


def replay(result: WalkResult, query: np.ndarray, hop1: list[int], candidates: list[int],
           vectors: np.ndarray, exclude: set[int], n_paths: int, top_k: int) -> None:
    """Check a walk against Algorithm 1 step by step (vectors must have no ties)."""
    pool = set(candidates) | set(hop1)
    usable = [h for h in hop1 if h not in exclude]
    starts = sorted(usable, key=lambda h: -float(vectors[h] @ query))[:n_paths]
    visited = set(exclude)
    ran = iter(result.paths)
    for start in starts:
        if start in visited:
            continue  # a start an earlier path visited runs no path
        path = next(ran)
        assert path[0] == start
        visited.add(start)
        for prev, node in zip(path, path[1:], strict=False):
            free = sorted(pool - visited, key=lambda c: -float(vectors[c] @ vectors[prev]))
            assert node in free[:top_k], (prev, node, free[:top_k])
            visited.add(node)
    assert next(ran, None) is None
    if result.random is not None:
        assert result.random in pool - visited


def test_walk_never_revisits_and_respects_lengths_k_and_exclusions():
    vectors = unit_rows(40)
    query = unit_rows(1, seed=99)[0]
    hop1, candidates, exclude = list(range(8)), list(range(40)), {0, 3, 12, 20}
    shapes = Counter()
    for seed in range(25):
        r = walk_negatives(query, hop1, candidates, vectors, exclude=exclude, rng=seed)
        flat = [n for path in r.paths for n in path]
        assert 1 <= len(r.paths) <= 3 and all(1 <= len(p) <= 3 for p in r.paths)
        shapes[tuple(len(p) for p in r.paths)] += 1
        assert r.negatives == (*flat, r.random) and r.random is not None
        assert len(set(r.negatives)) == len(r.negatives)  # no revisit across the paths
        assert not set(r.negatives) & exclude
        assert r.random not in flat
        replay(r, query, hop1, candidates, vectors, exclude, n_paths=3, top_k=5)
    assert shapes[(3, 3, 3)] > 0 and len(shapes) > 1  # some walks skip a start already visited


def test_top_k_one_is_the_greedy_walk_on_a_circle():
    # nodes at 0, 10, 25, 45, 70, 100, 140 degrees; the query sits at 0
    vectors = on_circle([0, 10, 25, 45, 70, 100, 140])
    query = on_circle([0])[0]
    r = walk_negatives(query, [0, 3], list(range(7)), vectors, n_paths=2, path_length=3,
                       top_k=1, include_random=False, rng=1)
    # path 1 from node 0: nearest unvisited 1 (10), then 2 (25); path 2 from node 3: 4, then 5
    assert r.paths == ((0, 1, 2), (3, 4, 5)) and r.random is None
    assert r.negatives == (0, 1, 2, 3, 4, 5)


def test_a_start_visited_by_an_earlier_path_is_skipped():
    vectors = on_circle([0, 5, 90, 180])
    query = on_circle([0])[0]
    # starts are 0 and 1; the walk from 0 (top_k=1) visits 1 first, so start 1 runs no path
    r = walk_negatives(query, [0, 1], [0, 1, 2, 3], vectors, n_paths=2, path_length=2,
                       top_k=1, include_random=True, rng=0)
    assert r.paths == ((0, 1),)
    assert r.random in {2, 3} and r.negatives == (0, 1, r.random)


def test_step_is_sampled_by_softmax_of_raw_cosines():
    # from node 0 the unvisited candidates are 1 (cos 0.8) and 2 (cos 0.0); top_k=2
    vectors = on_circle([0, float(np.degrees(np.arccos(0.8))), 90])
    query = on_circle([0])[0]
    picks = Counter(
        walk_negatives(query, [0], [0, 1, 2], vectors, n_paths=1, path_length=2, top_k=2,
                       include_random=False, rng=seed).paths[0][1] for seed in range(2000))
    expected = np.exp(0.8) / (np.exp(0.8) + np.exp(0.0))  # 0.690
    assert set(picks) == {1, 2}
    assert abs(picks[1] / 2000 - expected) < 0.04


def test_walk_is_seeded():
    vectors, query = unit_rows(30), unit_rows(1, seed=5)[0]
    runs = [walk_negatives(query, range(6), range(30), vectors, rng=s) for s in range(6)]
    assert runs[0] == walk_negatives(query, range(6), range(30), vectors, rng=0)
    again = walk_negatives(query, range(6), range(30), vectors, rng=np.random.default_rng(3))
    assert again == runs[3]
    assert len({r.negatives for r in runs}) > 1  # the seed matters


def test_walk_ends_early_and_without_hop1_returns_nothing():
    vectors, query = unit_rows(5), unit_rows(1, seed=1)[0]
    short = walk_negatives(query, [0], [0, 1], vectors, path_length=3, rng=0)
    assert short.paths == ((0, 1),) and short.random is None and short.negatives == (0, 1)
    assert walk_negatives(query, [], [0, 1, 2], vectors, rng=0) == WalkResult((), (), None)
    # every hop-1 document excluded: no start, so no walk (the caller falls back)
    assert walk_negatives(query, [0, 1], [0, 1, 2, 3], vectors, exclude=[0, 1],
                          rng=0) == WalkResult((), (), None)


def test_walk_validates_its_inputs():
    vectors, query = unit_rows(5), unit_rows(1, seed=1)[0]
    with pytest.raises(RetrieverError, match=r"candidates holds row 9.*expected indices in"):
        walk_negatives(query, [0], [0, 9], vectors, rng=0)
    with pytest.raises(RetrieverError, match="n_paths must be a positive integer"):
        walk_negatives(query, [0], [0, 1], vectors, n_paths=0, rng=0)
    with pytest.raises(RetrieverError, match=r"query_vec must be .* shape \(8,\)"):
        walk_negatives(query[:4], [0], [0, 1], vectors, rng=0)
    with pytest.raises(RetrieverError, match="L2-normalised"):
        walk_negatives(query, [0], [0, 1], vectors * 2, rng=0)
    with pytest.raises(RetrieverError, match="rng must be a numpy Generator or an int"):
        walk_negatives(query, [0], [0, 1], vectors, rng="seed")
    with pytest.raises(RetrieverError, match="row indices"):
        walk_negatives(query, ["a"], [0, 1], vectors, rng=0)


def test_knn_graph_on_hand_made_vectors():
    vectors = on_circle([0, 10, 30, 90])
    graph = knn_graph(vectors, 2, batch=3)  # batches of 3 rows: the last batch holds one
    assert [g.tolist() for g in graph] == [[1, 2], [0, 2], [1, 0], [2, 1]]
    assert [sorted(g.tolist()) for g in knn_graph(vectors, 10)] == [
        [1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]  # k > n - 1: every other row, never self
    twins = knn_graph(on_circle([0, 0, 90]), 1)  # identical rows: each finds the other
    assert twins[0].tolist() == [1] and twins[1].tolist() == [0] and twins[2].tolist()[0] in (0, 1)
    with pytest.raises(RetrieverError, match="k must be a positive integer"):
        knn_graph(vectors, 0)


def test_neighbourhood_follows_edges_as_given():
    cites = {"a": ["b", "c"], "b": ["d"], "c": ["d", "a"], "d": ["e"]}
    assert neighbourhood(cites, ["a"]) == (["b", "c"], ["d"])
    assert neighbourhood(cites, ["a"], hops=3) == (["b", "c"], ["d", "e"])
    assert neighbourhood(cites, ["a"], hops=1) == (["b", "c"], [])
    assert neighbourhood(cites, ["e"]) == ([], [])  # directed: e cites nothing
    both = {"e": {"d"}, "d": {"b", "c", "e"}}  # sets are sorted
    assert neighbourhood(both, ["e"]) == (["d"], ["b", "c"])
    knn = knn_graph(on_circle([0, 10, 30, 90]), 1)  # 0->1, 1->0, 2->1, 3->2
    assert neighbourhood(knn, [3]) == ([2], [1])


# -- KB-aware triplets ------------------------------------------------------------------------

#: Train queries of the loop workspace under split seed 13 (dev/test: 105, 108, 109, 114, 115).
TRAIN = {"breast cancer": ("106", "107"), "colon cancer": ("112", "113"),
         "glioma": ("103", "104"), "melanoma": ("101", "102"), "neurofibromatosis": ("111",),
         "retinoblastoma": ("110",)}
HELD_OUT_GOLD = {"105", "108", "109", "114", "115"}


def citation_edges() -> list[tuple[str, str]]:
    edges = []
    for i in range(1, 16):
        if i == 11:
            continue  # neurofibromatosis (111): no edge at all
        if i == 10:
            edges += [("110", "210"), ("110", "310")]  # retinoblastoma: 2 hop-1 documents
            continue
        edges += [(f"{100 + i}", f"{200 + i}"), (f"{100 + i}", f"{300 + i}"),
                  (f"{100 + i}", f"{301 + i}"), (f"{200 + i}", f"{316 + i % 5}")]
    edges += [(f"{300 + j}", f"{304 + j}") for j in range(1, 17)]
    edges += [("101", "102"),  # a positive citing the query's other positive
              ("101", "105"),  # a train positive citing a dev query's gold document
              ("103", "400"),  # a document without abstract
              ("103", "999")]  # a PMID outside the workspace
    return edges


@pytest.fixture
def bica_ws(tmp_workspace):
    make_loop_workspace(tmp_workspace)
    import_items(tmp_workspace, [Document("400", "Letter to the editor", "", source="handmade")],
                 reader="test", path="handmade", progress=False)
    insert_pairs(tmp_workspace, "INSERT OR IGNORE INTO citations(citing, cited) VALUES (?, ?)",
                 citation_edges(), reader="citations", path="handmade", actor="test")
    return tmp_workspace


def _unit(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    v = np.random.default_rng(seed).normal(size=16)
    return (v / np.linalg.norm(v)).astype(np.float32)


class FakeEncoder:
    """Deterministic unit vectors per doc id / query text; records what it was asked."""

    def __init__(self) -> None:
        self.doc_calls: list[list[str]] = []

    def documents(self, doc_ids: list[str]) -> np.ndarray:
        self.doc_calls.append(list(doc_ids))
        return np.stack([_unit("doc:" + d) for d in doc_ids])

    def queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([_unit("query:" + t) for t in texts])


def build(ws, fake=None, **options):
    fake = fake or FakeEncoder()
    return build_bica_examples(ws, "disease_gene", BicaConfig(**options), vectors=fake.documents,
                               query_vectors=fake.queries, embedder_id="fake", progress=False)


def qid(disease: str) -> str:
    return f"disease=disease:{disease}"


def test_triplets_come_from_train_queries_and_never_use_a_positive(bica_ws):
    es = build(bica_ws)
    task = build_task(bica_ws, "disease_gene", seed=13)
    assert {q.qid for q in task.split("train")} == {qid(d) for d in TRAIN}
    assert {t.qid for t in es.triplets} == {qid(d) for d in TRAIN}
    for disease, positives in TRAIN.items():
        mine = [t for t in es.triplets if t.qid == qid(disease)]
        assert {t.positive_doc for t in mine} == set(positives)
        assert all(t.query == f"Genes associated with {disease}?" for t in mine)
        negatives = {t.negative_doc for t in mine}
        assert not negatives & set(positives)
        assert not negatives & HELD_OUT_GOLD  # dev/test gold is never a negative
        assert "400" not in negatives and "999" not in negatives  # no abstract / not in corpus
    melanoma = [t for t in es.triplets if t.qid == qid("melanoma")]
    assert {t.source for t in melanoma} == {"walk", "random"}
    walked = {t.negative_doc for t in melanoma if t.source == "walk"}
    # the starts are hop-1 documents of 101/102 (both directions), never 102 or 105
    assert walked & {"201", "202", "301", "302", "303"}
    assert all(es.text(t.negative_doc).endswith(".") and " [SEP] " in es.text(t.negative_doc)
               for t in es.triplets)


def test_queries_without_enough_edges_fall_back_to_bm25_and_are_counted(bica_ws):
    es = build(bica_ws)
    m = es.manifest
    assert m["fallbacks"] == {"fewer than n_paths usable hop-1 documents": 1, "no edge": 1}
    for disease in ("neurofibromatosis", "retinoblastoma"):
        mine = [t for t in es.triplets if t.qid == qid(disease)]
        assert mine and {t.source for t in mine} == {"bm25"}
    nf1 = {t.negative_doc for t in es.triplets if t.qid == qid("neurofibromatosis")}
    assert "211" in nf1 and "111" not in nf1  # "Clinical course of neurofibromatosis"
    assert m["queries"] == 6 and m["walked"] == 4
    assert m["queries_with_citation_edges"] == 5  # all train queries but neurofibromatosis
    # documents on an in-corpus edge: 1xx and 2xx but 111 and 211, 301-320, and 400
    on_edge = {str(d) for d in range(101, 116)} - {"111"}
    on_edge |= {str(200 + i) for i in range(1, 16) if i != 11} | {str(d) for d in range(301, 321)}
    on_edge.add("400")
    assert m["graph"]["coverage"] == {"documents": 51, "on_citation_edge": len(on_edge),
                                      "fraction": round(len(on_edge) / 51, 4)}
    assert m["graph"]["citation_edges"] == len(set(citation_edges())) - 1  # 103 -> 999 dropped
    # no BM25 fallback asked for: those queries are dropped, and counted
    none = build(bica_ws, bm25_fallback=0)
    assert none.manifest["skipped"] == {"query without negative": 2}
    assert {t.qid for t in none.triplets} == {qid(d) for d in TRAIN} - {
        qid("neurofibromatosis"), qid("retinoblastoma")}


def test_manifest_counts_equal_the_rows(bica_ws):
    es = build(bica_ws)
    m = es.manifest
    per_query: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for t in es.triplets:
        per_query.setdefault((t.qid, t.query), set()).add((t.negative_doc, t.source))
    assert m["triplets"] == len(es.triplets)
    assert sum(m["triplets_by_source"].values()) == len(es.triplets)
    sources = Counter(s for negs in per_query.values() for _, s in negs)
    assert m["negatives"] == {s: sources[s] for s in ("walk", "random", "bm25")}
    assert m["negatives"]["bm25"] >= 2 and m["negatives"]["walk"] >= 4 * 3
    assert m["negatives"]["random"] == m["walked"] == 4  # one random negative per walk
    assert m["mean_negatives_per_query"] == round(
        sum(len(v) for v in per_query.values()) / len(per_query), 4)
    rows = sum(len(TRAIN[d]) * len(per_query[(qid(d), f"Genes associated with {d}?")])
               for d in TRAIN)
    assert rows == len(es.triplets)  # one row per (query, positive, negative)
    assert m["sha256"] == triplet_digest(es.triplets)
    assert m["recipe"] == "bica" and m["embedder"] == "fake"
    assert m["split"] == {"seed": 13, "fractions": [0.6, 0.2, 0.2], "split": "train",
                          "queries": 6}
    assert m["config"]["graph"] == "citations" and m["graph"]["knn_k"] is None


def test_triplets_are_seeded(bica_ws):
    a, b = build(bica_ws, seed=7), build(bica_ws, seed=7)
    assert a.triplets == b.triplets and a.manifest["sha256"] == b.manifest["sha256"]
    others = {build(bica_ws, seed=s).manifest["sha256"] for s in (1, 2, 3)}
    assert len(others | {a.manifest["sha256"]}) > 1


def test_a_negative_with_a_positives_text_is_dropped(bica_ws):
    # 501 repeats positive 101 word for word; with n_paths=6 every usable hop-1 document of
    # melanoma (201, 202, 301, 302, 303, 501) starts a path, so the walk finds 501
    import_items(bica_ws, [Document("501", "BRAF in melanoma",
                                    "Mutations of BRAF cause melanoma in many families.",
                                    source="handmade")],
                 reader="test", path="handmade", progress=False)
    insert_pairs(bica_ws, "INSERT OR IGNORE INTO citations(citing, cited) VALUES (?, ?)",
                 [("101", "501")], reader="citations", path="dup", actor="test")
    es = build(bica_ws, n_paths=6)
    assert es.manifest["walked"] == 1 and es.manifest["skipped"] == {
        "negative with a positive's text": 1}
    melanoma = {t.negative_doc for t in es.triplets if t.qid == qid("melanoma")}
    assert {"201", "202", "301", "302", "303"} <= melanoma and "501" not in melanoma
    assert all(es.text(t.positive_doc) != es.text(t.negative_doc) for t in es.triplets)


def test_walk_vectors_are_asked_once_for_the_walk_documents_only(bica_ws):
    fake = FakeEncoder()
    build(bica_ws, fake)
    (asked,) = fake.doc_calls
    assert asked == sorted(asked) and len(set(asked)) == len(asked)
    assert not set(asked) & {"111", "400", "999"}  # no edge / no abstract / not in the corpus


def test_knn_graph_gives_every_query_a_walk(bica_ws):
    fake = FakeEncoder()
    es = build(bica_ws, fake, graph="knn", knn_k=4)
    assert fake.doc_calls[0] == sorted(fake.doc_calls[0]) and len(fake.doc_calls[0]) == 51
    assert es.manifest["fallbacks"] == {} and es.manifest["walked"] == 6
    assert es.manifest["graph"]["knn_k"] == 4
    assert {t.source for t in es.triplets} == {"walk", "random"}
    for disease, positives in TRAIN.items():
        negatives = {t.negative_doc for t in es.triplets if t.qid == qid(disease)}
        assert negatives and not negatives & (set(positives) | HELD_OUT_GOLD | {"400"})
    both = build(bica_ws, FakeEncoder(), graph="both", knn_k=4)
    assert both.manifest["fallbacks"] == {} and both.manifest["queries_with_citation_edges"] == 5


def test_title_queries_have_their_positive_only(bica_ws):
    es = build(bica_ws, query_source="both")
    m = es.manifest
    assert m["walk_queries"] == {"template": 6, "title": 10}  # one per positive
    titles = [t for t in es.triplets if not t.query.startswith("Genes associated with")]
    assert titles
    for t in titles:
        assert es.text(t.positive_doc).startswith(t.query + " [SEP] ")
        disease = next(d for d, pos in TRAIN.items() if t.positive_doc in pos)
        assert t.qid == qid(disease) and t.negative_doc not in TRAIN[disease]


def test_config_and_vector_errors(bica_ws):
    with pytest.raises(CurationError, match="Unknown graph 'pagerank'.*citations, knn, both"):
        BicaConfig(graph="pagerank")
    with pytest.raises(CurationError, match="BicaConfig.knn_k must be an integer >= 1.*knn_k=10"):
        BicaConfig(knn_k=0)
    with pytest.raises(CurationError, match="BicaConfig.document_format"):
        BicaConfig(document_format="{body}")
    with pytest.raises(CurationError, match="Pass both vectors"):
        build_bica_examples(bica_ws, "disease_gene", vectors=FakeEncoder().documents,
                            progress=False)
    fake = FakeEncoder()
    with pytest.raises(CurationError, match="not L2-normalised"):
        build_bica_examples(bica_ws, "disease_gene", vectors=lambda ids: 3 * fake.documents(ids),
                            query_vectors=fake.queries, progress=False)
    with pytest.raises(CurationError, match=r"shape \(2, 16\).*expected 13 rows of floats"):
        build_bica_examples(bica_ws, "disease_gene", BicaConfig(max_queries=1, seed=0),
                            vectors=lambda ids: fake.documents(ids)[:2],
                            query_vectors=fake.queries, progress=False)


def test_base_vectors_go_through_the_workspace_cache(bica_ws, tiny_model_path):
    from curation.training.recipes.bica.triplets import base_vectors
    from retrievers.cache import EmbeddingCache

    base = base_vectors(bica_ws, str(tiny_model_path), max_seq_length=32, progress=False)
    first = base.documents(["101", "102", "201"])
    assert first.shape[0] == 3 and np.allclose(np.linalg.norm(first, axis=1), 1, atol=1e-4)
    cache = EmbeddingCache(bica_ws.root / "cache" / "embeddings", base.model_id)
    assert len(cache) == 3
    again = base.documents(["201", "101"])
    assert np.allclose(again, first[[2, 0]]) and len(cache) == 3
    q = base.queries(["Genes associated with melanoma?"])
    assert q.shape == (1, first.shape[1])
    es = build_bica_examples(bica_ws, "disease_gene",
                             BicaConfig(model=str(tiny_model_path), max_seq_length=32),
                             progress=False)
    assert es.manifest["embedder"] == base.model_id and es.triplets
    assert isinstance(es.triplets[0], Triplet)
