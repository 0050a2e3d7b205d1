"""FAISS wrapper: exact / IVF / HNSW search, ids, save -> load, CPU fallback."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from retrievers import RetrieverError
from retrievers.faiss_index import PARAMS, VectorIndex, describe_saved
from retrievers.index_config import AUTO_FLAT_MAX, AUTO_KIND, IndexConfig, auto_nlist, resolve_kind

DIM = 32


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def clustered() -> tuple[list[str], np.ndarray, np.ndarray]:
    """20 well-separated clusters of 100 unit vectors; queries are noisy copies of 50 points."""
    rng = np.random.default_rng(0)
    centres = unit(rng.normal(size=(20, DIM)))
    points = unit(np.repeat(centres, 100, axis=0) + 0.15 * rng.normal(size=(2000, DIM)))
    picks = rng.choice(2000, size=50, replace=False)
    queries = unit(points[picks] + 0.01 * rng.normal(size=(50, DIM)))
    return [f"doc{i}" for i in range(2000)], points, queries


def build(config: IndexConfig, ids: list[str], vectors: np.ndarray) -> VectorIndex:
    index = VectorIndex(DIM, config)
    index.add(ids, vectors)
    return index


@pytest.mark.parametrize("config", [IndexConfig("ivf", nprobe=8), IndexConfig("ivf", nlist=40),
                                    IndexConfig("hnsw"), IndexConfig("HNSW", hnsw_m=16)],
                         ids=["ivf-auto", "ivf-40", "hnsw", "hnsw-m16"])
def test_approximate_indexes_return_the_exact_top1(clustered, config: IndexConfig) -> None:
    ids, points, queries = clustered
    exact_scores, exact = build(IndexConfig(), ids, points).search(queries, 5)
    scores, approx = build(config, ids, points).search(queries, 5)
    assert (approx[:, 0] == exact[:, 0]).all()
    assert scores[:, 0] == pytest.approx(exact_scores[:, 0], abs=1e-5)


def test_flat_is_exact_inner_product(clustered) -> None:
    ids, points, queries = clustered
    scores, positions = build(IndexConfig(), ids, points).search(queries[:3], 4)
    brute = queries[:3] @ points.T  # (3, 2000)
    expected = np.argsort(-brute, axis=1)[:, :4]
    assert (positions == expected).all()
    assert scores == pytest.approx(np.take_along_axis(brute, expected, axis=1), abs=1e-5)


def test_auto_nlist_bounds() -> None:
    assert auto_nlist(2000) == 51  # capped by 2000 // 39 (4 * sqrt(2000) = 178)
    assert auto_nlist(1_000_000) == 4000
    assert auto_nlist(10) == 1


def test_ivf_on_few_vectors_still_works(caplog: pytest.LogCaptureFixture) -> None:
    vectors = unit(np.random.default_rng(1).normal(size=(5, DIM)))
    with caplog.at_level(logging.WARNING, logger="retrievers"):
        index = build(IndexConfig("ivf", nlist=100), [str(i) for i in range(5)], vectors)
    assert "nlist=100 > 5 training vectors" in caplog.text
    _, positions = index.search(vectors, 1)
    assert positions[:, 0].tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw"])
def test_save_load_round_trip(clustered, kind: str, tmp_path: Path) -> None:
    ids, points, queries = clustered
    index = build(IndexConfig(kind, nprobe=4), ids, points)
    index.save(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"index.faiss", "ids.json", "params.json"}
    loaded = VectorIndex.load(tmp_path)
    assert loaded.ids == ids and loaded.config == index.config and len(loaded) == 2000
    for a, b in zip(index.search(queries, 3), loaded.search(queries, 3), strict=True):
        assert np.array_equal(a, b)


def test_incremental_add_keeps_ids_aligned(clustered) -> None:
    ids, points, _ = clustered
    index = build(IndexConfig("ivf"), ids[:1000], points[:1000])
    index.add(ids[1000:], points[1000:])
    _, positions = index.search(points[1500:1501], 1)
    assert index.ids[positions[0, 0]] == "doc1500"


def test_k_beyond_size_and_empty_index() -> None:
    index = VectorIndex(DIM)
    scores, positions = index.search(np.zeros((2, DIM), dtype=np.float32), 5)
    assert scores.shape == positions.shape == (2, 0)
    vectors = unit(np.ones((1, DIM)))
    index.add(["only"], vectors)
    _, positions = index.search(vectors, 5)
    assert positions.tolist() == [[0]]


def test_shape_mismatch_names_expected_shape() -> None:
    with pytest.raises(RetrieverError, match=r"expected shape \(2, 32\)"):
        VectorIndex(DIM).add(["a", "b"], np.zeros((2, 16)))


def test_unknown_kind_lists_options() -> None:
    with pytest.raises(RetrieverError, match="Unknown index kind 'lsh'. Available options: auto, "
                                             "flat, hnsw, ivf"):
        IndexConfig("lsh")
    with pytest.raises(RetrieverError, match="Unknown auto_kind 'flat'. Available options: hnsw, "
                                             "ivf"):
        IndexConfig(auto_kind="flat")
    with pytest.raises(RetrieverError, match="IndexConfig.nprobe must be an integer >= 1, got 0"):
        IndexConfig("ivf", nprobe=0)


def test_cpu_fallback_without_gpu(caplog: pytest.LogCaptureFixture) -> None:
    import faiss

    if faiss.get_num_gpus() > 0:
        pytest.skip("this machine has a GPU for faiss")
    with caplog.at_level(logging.WARNING, logger="retrievers"):
        index = build(IndexConfig(use_gpu=True), ["a"], unit(np.ones((1, DIM))))
    assert not index.on_gpu and "faiss sees no GPU" in caplog.text
    assert index.nbytes > DIM * 4


def test_missing_folder_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(RetrieverError, match="no FAISS index in .*build and save one first"):
        VectorIndex.load(tmp_path)


def test_a_failed_save_keeps_the_previous_index(clustered, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ids, points, _ = clustered
    folder = tmp_path / "vectors"
    build(IndexConfig(), ids[:10], points[:10]).save(folder)
    bigger = build(IndexConfig(), ids, points)

    def killed(obj: object) -> dict:  # after index.faiss and ids.json, before params.json
        raise KeyboardInterrupt("killed while saving")

    monkeypatch.setattr("retrievers.faiss_index.asdict", killed)
    with pytest.raises(KeyboardInterrupt):
        bigger.save(folder)
    monkeypatch.undo()
    loaded = VectorIndex.load(folder)
    assert loaded.ids == ids[:10] and len(loaded) == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors"]  # no temporary folder left


def test_auto_is_the_default_and_picks_by_size() -> None:
    assert IndexConfig().kind == "auto"
    assert resolve_kind(IndexConfig(), AUTO_FLAT_MAX) == "flat"
    assert resolve_kind(IndexConfig(), AUTO_FLAT_MAX + 1) == AUTO_KIND
    assert resolve_kind(IndexConfig("ivf"), 10) == "ivf"  # an explicit kind is never changed
    assert resolve_kind(IndexConfig(auto_flat_max=10, auto_kind="ivf"), 11) == "ivf"


@pytest.mark.parametrize(("size", "kind"), [(100, "flat"), (2000, "hnsw")])
def test_auto_builds_by_the_first_batch_and_records_the_kind(clustered, size: int, kind: str,
                                                             tmp_path: Path) -> None:
    ids, points, queries = clustered
    index = build(IndexConfig(auto_flat_max=500, ef_search=64), ids[:size], points[:size])
    assert index.kind == kind and index.config.kind == "auto"
    index.save(tmp_path)
    loaded = VectorIndex.load(tmp_path)
    assert loaded.kind == kind and loaded.config == index.config
    assert describe_saved(tmp_path)[0].startswith(f"{kind} of {size:,} vectors (auto: flat up "
                                                  "to 500)")
    for a, b in zip(index.search(queries, 5), loaded.search(queries, 5), strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("config", [IndexConfig("flat"), IndexConfig("ivf", nlist=40, nprobe=6),
                                    IndexConfig("hnsw", hnsw_m=12, ef_search=40)],
                         ids=["flat", "ivf", "hnsw"])
def test_kind_and_parameters_round_trip_through_params_json(clustered, config: IndexConfig,
                                                            tmp_path: Path) -> None:
    ids, points, queries = clustered
    index = build(config, ids, points)
    index.save(tmp_path)
    params = json.loads((tmp_path / PARAMS).read_text(encoding="utf-8"))
    assert params["kind"] == config.kind and params["config"] == asdict(config)
    assert params["nlist"] == (40 if config.kind == "ivf" else None)
    loaded = VectorIndex.load(tmp_path)
    assert (loaded.kind, loaded.config, loaded.nlist) == (config.kind, config, index.nlist)
    native = loaded._index  # the search parameters reach faiss after a load
    loaded.search(queries[:1], 1)
    if config.kind == "ivf":
        assert native.nprobe == 6
    elif config.kind == "hnsw":
        assert (native.hnsw.efSearch, native.hnsw.nb_neighbors(1)) == (40, 12)
    detail = {"flat": "", "ivf": ", nlist=40, nprobe=6", "hnsw": ", hnsw_m=12, ef_search=40"}
    assert describe_saved(tmp_path) == [f"{config.kind} of 2,000 vectors{detail[config.kind]}"]


def test_an_index_saved_before_kinds_were_recorded_loads_as_asked(clustered,
                                                                   tmp_path: Path) -> None:
    ids, points, queries = clustered
    build(IndexConfig("hnsw"), ids[:50], points[:50]).save(tmp_path)
    params = json.loads((tmp_path / PARAMS).read_text(encoding="utf-8"))
    for key in ("auto_flat_max", "auto_kind"):
        del params["config"][key]
    del params["kind"]
    (tmp_path / PARAMS).write_text(json.dumps(params), encoding="utf-8")
    loaded = VectorIndex.load(tmp_path)
    assert loaded.kind == "hnsw" and loaded.search(queries[:1], 1)[1].shape == (1, 1)


@pytest.mark.parametrize("config", [IndexConfig("ivf", nprobe=32),
                                    IndexConfig("hnsw", ef_search=32)], ids=["ivf", "hnsw"])
def test_approximate_recall_at_10(config: IndexConfig) -> None:
    """Recall@10 against exact search on 3,000 graded (not well-separated) vectors."""
    rng = np.random.default_rng(3)
    topics = unit(rng.normal(size=(30, DIM)))
    points = unit(topics[rng.integers(0, 30, 3100)] + 0.35 * rng.normal(size=(3100, DIM)))
    ids, queries, points = [str(i) for i in range(3000)], points[3000:], points[:3000]
    _, exact = build(IndexConfig("flat"), ids, points).search(queries, 10)
    _, approx = build(config, ids, points).search(queries, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(approx, exact, strict=True)])
    assert recall >= 0.9


def test_single_queries_run_on_one_thread_and_restore_it(clustered,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import faiss

    ids, points, queries = clustered
    index = build(IndexConfig("flat"), ids, points)
    seen: list[int] = []
    search = index._index.search

    def spy(*args: object) -> object:
        seen.append(faiss.omp_get_max_threads())
        return search(*args)

    monkeypatch.setattr(index._index, "search", spy)
    before = faiss.omp_get_max_threads()
    index.search(queries[:1], 3)
    index.search(queries[:40], 3)
    assert seen == [1, before] and faiss.omp_get_max_threads() == before


@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw"])
def test_fp16_on_the_cpu_halves_the_vectors_and_keeps_the_ranking(clustered, kind: str,
                                                                  tmp_path: Path) -> None:
    ids, points, queries = clustered
    full = build(IndexConfig(kind, use_gpu=False), ids, points)
    half = build(IndexConfig(kind, use_gpu=False, fp16=True), ids, points)
    assert half.nbytes < full.nbytes - len(ids) * DIM * 2 * 0.9  # 2 bytes less per number
    _, exact = full.search(queries, 10)
    _, approx = half.search(queries, 10)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(approx, exact, strict=True)]) >= 0.98
    half.save(tmp_path)
    loaded = VectorIndex.load(tmp_path)
    assert loaded.config.fp16 and np.array_equal(loaded.search(queries, 10)[1], approx)
    assert describe_saved(tmp_path)[0].startswith(f"{kind} of 2,000 vectors, fp16")


def test_auto_is_exact_when_the_index_goes_to_a_gpu() -> None:
    assert resolve_kind(IndexConfig(), 10**7, gpu=True) == "flat"
    assert resolve_kind(IndexConfig("hnsw"), 10, gpu=True) == "hnsw"
