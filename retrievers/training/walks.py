"""BiCA's hard negatives from walks over a document graph (Sinha et al.; TRAINING.md 2).

:func:`walk_negatives` is Algorithm 1 as the released code has it
(``build-corpus/pubmed-query-scoring.py``, ``find_diverse_hard_negatives``):

1. starts: the ``n_paths`` hop-1 documents most similar to the query (cosine);
2. one visited set shared by every path of the query;
3. each start that is not yet visited is visited and becomes a negative; then ``path_length - 1``
   steps, each over the complete similarity graph of the candidates (hop 1 and hop 2): keep the
   ``top_k`` *unvisited* candidates most similar to the current node and sample one with
   probability softmax(raw cosines) (temperature 1, so close to uniform); it is visited and
   becomes a negative. A path ends early when no unvisited candidate is left;
4. one uniformly random unvisited candidate is added (``include_random``).

Two departures from the released code, both guards against false negatives: the visited set starts
with ``exclude`` (every positive of the query, not only the seed), and excluded hop-1 documents are
never starts (the released code could not meet one: a seed is not among its own references).

:func:`knn_graph` builds the k-nearest-neighbour graph used where citations are missing, and
:func:`neighbourhood` collects hop 1 and hop 2 of seed documents over any adjacency.

Everything here is numpy (and the exact FAISS index of retrievers.faiss_index for the kNN
search) over row indices of one vector matrix; callers map their document ids to rows.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)

_NORM_TOLERANCE = 1e-2  # float16 encoders normalise to about 1e-3

#: An adjacency: node -> neighbours (a mapping), or row i -> neighbours of row i (a sequence, e.g.
#: the list :func:`knn_graph` returns).
Adjacency = Mapping[Hashable, Iterable[Any]] | Sequence[Iterable[Any]]


@dataclass(frozen=True)
class WalkResult:
    """The negatives one query's walks found (row indices of the vector matrix).

    Attributes:
        negatives: Every negative once, in the order found: the paths' nodes, then the random one.
        paths: The nodes of each path that ran (a start already visited runs no path), each at
            most ``path_length`` long.
        random: The random unvisited candidate, or None (``include_random`` off, or none left).
    """

    negatives: tuple[int, ...]
    paths: tuple[tuple[int, ...], ...]
    random: int | None


def _positive_int(value: object, name: str, example: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise RetrieverError(f"{name} must be a positive integer, got {value!r}; "
                             f"set for example {name}={example}")
    return int(value)


def _rows(values: Iterable[object], name: str, n: int) -> list[int]:
    """Row indices in ``[0, n)`` (order kept, duplicates dropped)."""
    out: dict[int, None] = {}
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise RetrieverError(f"{name} must hold row indices of `vectors` (integers), got "
                                 f"{v!r} of type {type(v).__name__}")
        if not 0 <= int(v) < n:
            raise RetrieverError(f"{name} holds row {int(v)}, but `vectors` has {n} rows; "
                                 f"expected indices in [0, {n})")
        out[int(v)] = None
    return list(out)


def _matrix(vectors: object) -> np.ndarray:
    if not isinstance(vectors, np.ndarray) or vectors.ndim != 2 or vectors.shape[1] == 0 \
            or not np.issubdtype(vectors.dtype, np.floating):
        shape = getattr(vectors, "shape", None)
        raise RetrieverError(f"vectors must be a 2-D float array (one row per document), got "
                             f"{type(vectors).__name__} of shape {shape}")
    return vectors


def _check_normalised(rows: np.ndarray, what: str) -> None:
    norms = np.linalg.norm(rows, axis=-1)
    bad = ~np.isfinite(norms) | (np.abs(norms - 1.0) > _NORM_TOLERANCE)
    if np.any(bad):
        first = float(np.atleast_1d(norms)[np.argmax(np.atleast_1d(bad))])
        raise RetrieverError(f"{what} must be L2-normalised (cosine = dot product), found a norm "
                             f"of {first:.4f}; divide by np.linalg.norm(..., axis=-1, "
                             "keepdims=True) or encode with normalize=True")


def _generator(rng: np.random.Generator | int) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise RetrieverError(f"rng must be a numpy Generator or an int seed, got "
                         f"{type(rng).__name__}; pass rng=np.random.default_rng(42) or rng=42")


def walk_negatives(
    query_vec: np.ndarray,
    hop1: Sequence[int],
    candidates: Sequence[int],
    vectors: np.ndarray,
    *,
    n_paths: int = 3,
    path_length: int = 3,
    top_k: int = 5,
    include_random: bool = True,
    exclude: Collection[int] = (),
    rng: np.random.Generator | int,
) -> WalkResult:
    """BiCA's Algorithm 1 for one query (see the module docstring).

    Ties in similarity are broken by position in ``candidates`` (then ``hop1``), so a seeded
    walk depends only on its inputs.

    Args:
        query_vec: The query's vector, shape (dim,), L2-normalised.
        hop1: Rows of the hop-1 documents (the starts are chosen among them). They are
            candidates too, whether or not ``candidates`` lists them.
        candidates: Rows of the documents a walk may visit: hop 1 and hop 2 (C1 ∪ C2). Their
            order fixes the random choices for a seed.
        vectors: Document vectors, shape (n, dim), L2-normalised rows (cosine = dot product).
        n_paths: Number of starts (paths), BiCA 3.
        path_length: Nodes per path, the start included (BiCA 3).
        top_k: Unvisited candidates the next step is sampled from (BiCA 5).
        include_random: Add one uniformly random unvisited candidate at the end.
        exclude: Rows never returned: every positive of the query. They start out visited.
        rng: numpy Generator or int seed.

    Returns:
        The :class:`WalkResult`; empty when no hop-1 document is left after ``exclude`` (the
        caller falls back to other negatives).

    Raises:
        RetrieverError: A matrix of the wrong shape or not normalised, a row index out of range,
            a non-positive count, or an ``rng`` that is neither a Generator nor an int.
    """
    vectors = _matrix(vectors)
    n, dim = vectors.shape
    query = np.asarray(query_vec)
    if query.shape != (dim,) or not np.issubdtype(query.dtype, np.floating):
        raise RetrieverError(f"query_vec must be a float vector of shape ({dim},) like the rows "
                             f"of `vectors`, got shape {query.shape}")
    n_paths = _positive_int(n_paths, "n_paths", "3")
    path_length = _positive_int(path_length, "path_length", "3")
    top_k = _positive_int(top_k, "top_k", "5")
    generator = _generator(rng)
    excluded = set(_rows(exclude, "exclude", n))
    starts_pool = [r for r in _rows(hop1, "hop1", n) if r not in excluded]
    pool = list(dict.fromkeys([*_rows(candidates, "candidates", n), *starts_pool]))
    if not starts_pool:
        return WalkResult((), (), None)
    _check_normalised(query, "query_vec")
    _check_normalised(vectors[pool], "the candidate rows of `vectors`")

    pool_arr = np.asarray(pool, dtype=np.int64)
    pool_vecs = vectors[pool_arr].astype(np.float32, copy=False)  # (len(pool), dim)
    position = {r: i for i, r in enumerate(pool)}
    to_query = vectors[starts_pool].astype(np.float32, copy=False) @ query.astype(np.float32)
    order = np.argsort(-to_query, kind="stable")[:n_paths]
    starts = [starts_pool[i] for i in order]

    visited = np.zeros(len(pool), dtype=bool)  # over pool positions; excluded ones start visited
    for r in excluded & set(position):
        visited[position[r]] = True
    negatives: list[int] = []
    paths: list[tuple[int, ...]] = []
    for start in starts:
        current = position[start]
        if visited[current]:
            continue
        visited[current] = True
        path = [start]
        for _ in range(path_length - 1):
            free = np.flatnonzero(~visited)  # pool positions, ascending
            if free.size == 0:
                break
            sims = pool_vecs[free] @ pool_vecs[current]  # (len(free),)
            top = np.argsort(-sims, kind="stable")[:top_k]
            weights = np.exp(sims[top] - sims[top].max())  # softmax of raw cosines, T = 1
            choice = int(generator.choice(top.size, p=weights / weights.sum()))
            current = int(free[top[choice]])
            visited[current] = True
            path.append(pool[current])
        paths.append(tuple(path))
        negatives += path
    random_row = None
    if include_random:
        free = np.flatnonzero(~visited)
        if free.size:
            random_row = pool[int(free[generator.integers(free.size)])]
            negatives.append(random_row)
    return WalkResult(tuple(negatives), tuple(paths), random_row)


def knn_graph(vectors: np.ndarray, k: int, *, batch: int = 2048) -> list[np.ndarray]:
    """Each row's ``k`` nearest other rows by cosine (exact search, faiss ``IndexFlatIP``).

    Args:
        vectors: L2-normalised rows, shape (n, dim).
        k: Neighbours per row (fewer when there are not ``k`` other rows).
        batch: Rows searched per faiss call.

    Returns:
        One int64 array per row: its neighbours' row indices, most similar first, never the
        row itself. The graph is directed (row i -> its neighbours); :func:`neighbourhood`
        follows it as given.

    Raises:
        RetrieverError: ``vectors`` is not a 2-D float array, or ``k``/``batch`` not positive.
    """
    from retrievers.faiss_index import IndexConfig, VectorIndex

    vectors = _matrix(vectors)
    k = _positive_int(k, "k", "10")
    batch = _positive_int(batch, "batch", "2048")
    n, dim = vectors.shape
    if n == 0:
        return []
    data = np.ascontiguousarray(vectors, dtype=np.float32)
    index = VectorIndex(dim, IndexConfig("flat", use_gpu=False))  # faiss IndexFlatIP
    index.add([str(row) for row in range(n)], data)
    depth = min(k + 1, n)
    out: list[np.ndarray] = []
    for start in range(0, n, batch):
        _, found = index.search(data[start:start + batch], depth)  # (rows, depth)
        for offset, ids in enumerate(found):
            row = start + offset
            ids = ids[(ids != row) & (ids >= 0)]
            out.append(ids[:k].astype(np.int64))
    return out


def _neighbours(adjacency: Adjacency, node: Any) -> list[Any]:
    if isinstance(adjacency, Mapping):
        found = adjacency.get(node, ())
    elif isinstance(node, numbers.Integral) and 0 <= int(node) < len(adjacency):
        found = adjacency[int(node)]
    else:
        found = ()
    if isinstance(found, (set, frozenset)):
        return sorted(found)
    return [x.item() if isinstance(x, np.generic) else x for x in found]


def neighbourhood(adjacency: Adjacency, seeds: Iterable[Any], hops: int = 2
                  ) -> tuple[list[Any], list[Any]]:
    """Hop 1 and hop 2 (C1, C2) of seed nodes.

    Edges are followed as the adjacency gives them. For citations, pass citing -> cited edges
    (BiCA's direction: hop 1 = what a seed cites) or add each edge both ways to reach citing
    documents too; a :func:`knn_graph` list is followed row -> its nearest neighbours.

    Args:
        adjacency: node -> neighbours (a mapping; missing nodes have none), or a sequence
            indexed by integer node. Neighbours given as a set are sorted; other containers keep
            their order.
        seeds: The seed nodes (the query's positives).
        hops: Depth; the second list holds every node at distance 2..hops (1: it is empty).

    Returns:
        ``(hop1, hop2)``: nodes at distance 1, and at distance 2..hops, in order of discovery
        (seeds in the order given). Seeds are in neither list.

    Raises:
        RetrieverError: ``hops`` is not a positive integer.
    """
    hops = _positive_int(hops, "hops", "2")
    seen: dict[Any, None] = dict.fromkeys(seeds)
    frontier = list(seen)
    layers: list[list[Any]] = []
    for _ in range(hops):
        layer: list[Any] = []
        for node in frontier:
            for nb in _neighbours(adjacency, node):
                if nb not in seen:
                    seen[nb] = None
                    layer.append(nb)
        layers.append(layer)
        frontier = layer
    return layers[0], [x for layer in layers[1:] for x in layer]
