"""The cross-encoder's score as a feature of the learned ranker (issue 45).

A cross-encoder reads the query and the abstract together: better evidence than a cosine, but one
transformer pass per pair, so it scores only the first stages' top K of each query
(:func:`cross_top`: K = 50 by reciprocal rank fusion over the retrievers open, BM25's order alone
when only BM25 is) and its scores are cached in the workspace
(:class:`~curation.store.cross_scores.CrossScores`, per cross version, query text and document).
A :class:`CrossFeature` turns the cache into three columns (:data:`~curation.ranking.features.
CROSS`):

* ``cross_score``: the cross-encoder's logit (missing, NaN, when there is none);
* ``cross_share``: the document's place among the query's scored documents over how many were
  scored (0.02 = the best of 50; missing when unscored);
* ``cross_missing``: 1 when there is no score (outside the top K, not computed yet, the cross
  version gone), else 0.

The page never computes a score: its feature reads the cache only (``scorer`` None) and a score
not there yet is a missing feature, never an error or a wait; the ``cross_scores`` background job
(:mod:`curation.search.cross_scores`) fills the cache. Batch callers (``kbcurate evaluate``, a
ranker round run by hand, a simulation) attach a scorer (:func:`open_cross` with ``compute``),
which scores the missing pairs of each query through the same cache.

Leakage: a cross version trained on the train split's relations scores those relations too well,
as the dense version's cosine does for its own training relations. The ranker's training rows
read both as they are (the dense features' habit, kept for the cross score): the learned weight
is optimistic on train queries, and the gate, which measures out of fold on the held-out queries
(dev + test, never trained on by a recipe; those whose query group a dense or cross version
learned curators' labels of are left out), keeps a version that trusts it too much from being
promoted. Training the cross version out of fold instead (each train relation scored by a model
that never saw it) was measured on disease_gene and did worse (docs/evaluation.md).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curation.ranking.features import CROSS, RRF_K, Candidates
from curation.store.cross_scores import CrossScores, model_key
from curation.store.models import Models, verify_weights
from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.types import joined_text

logger = logging.getLogger(__name__)

#: Candidates per query the cross-encoder scores (K), unless the workspace sets another.
DEFAULT_CROSS_K = 50
#: The workspace setting (``meta`` key) that changes K.
K_SETTING = "cross_k"
#: Pairs per forward pass of the cross-encoder.
BATCH_SIZE = 16

#: ``fn(query, documents) -> scores``: a loaded cross-encoder's scoring.
Score = Callable[[str, Sequence[str]], np.ndarray]


def check_k(k: Any) -> int:
    """``k`` when it is a whole number >= 1.

    Raises:
        CurationError: Anything else (the message says what to pass).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise CurationError(f"The cross-encoder's K (candidates scored per query) must be a "
                            f"whole number >= 1, e.g. {DEFAULT_CROSS_K}; got {k!r}")
    return k


def workspace_k(ws: Workspace) -> int:
    """The workspace's K (:data:`K_SETTING`; :data:`DEFAULT_CROSS_K` when unset or not a
    whole number >= 1)."""
    text = Settings(ws).value(K_SETTING)
    return int(text) if text and text.isdigit() and int(text) > 0 else DEFAULT_CROSS_K


def set_workspace_k(ws: Workspace, k: int) -> int:
    """Change the workspace's K (the job scores and rounds train on the new top K; versions
    trained before keep the K of their manifest).

    Raises:
        CurationError: Not a whole number >= 1.
    """
    with ws.transaction():
        Settings(ws).put(K_SETTING, str(check_k(k)))
    return k


def cross_top(candidates: Candidates, k: int = DEFAULT_CROSS_K) -> list[str]:
    """The first stages' top ``k`` of one query: by reciprocal rank fusion over the retrievers'
    tables (ties: the candidates' order); documents no retriever returned (labelled extras)
    are not among them."""
    def fused(doc_id: str) -> float:
        return sum(1.0 / (RRF_K + t[doc_id][0])
                   for t in (candidates.bm25, candidates.dense, candidates.base)
                   if t and doc_id in t)

    scored = [(fused(d), i, d) for i, d in enumerate(candidates.doc_ids)]
    return [d for s, _, d in sorted((x for x in scored if x[0] > 0),
                                    key=lambda x: (-x[0], x[1]))[:check_k(k)]]


def cross_columns(doc_ids: Sequence[str], scores: Mapping[str, float]) -> np.ndarray:
    """The :data:`CROSS` columns of the candidates ``doc_ids`` (rows in that order) from the
    scores found for some of them. Shape ``(len(doc_ids), 3)``."""
    order = sorted(scores, key=lambda d: (-scores[d], d))
    place = {d: (i + 1) / len(order) for i, d in enumerate(order)}
    out = np.empty((len(doc_ids), len(CROSS)), dtype=np.float64)
    for row, d in enumerate(doc_ids):
        if d in scores:
            out[row] = (scores[d], place[d], 0.0)
        else:
            out[row] = (math.nan, math.nan, 1.0)
    return out


@dataclass
class CrossFeature:
    """The cross-encoder block of a ranking context: which cached scores it reads.

    Attributes:
        version: The cross version id ("disease_gene-cross@2"); empty when the version a ranker
            was trained with is gone (every score is then missing).
        key: The cache's model key (:func:`~curation.store.cross_scores.model_key`).
        k: Candidates per query with a score (the first stages' top K).
        score: Computes missing scores (batch callers) and stores them in the cache; None:
            read the cache only (the page).
    """

    version: str
    key: str
    k: int = DEFAULT_CROSS_K
    score: Score | None = field(default=None, repr=False)

    def manifest(self) -> dict[str, Any]:
        """What a ranker version records about it (``manifest["cross"]``)."""
        return {"version": self.version, "key": self.key, "k": self.k}

    def scores(self, ws: Workspace, text: str, candidates: Candidates,
               parts: Mapping[str, tuple[str, str]]) -> dict[str, float]:
        """doc id -> score of the query's top K (those cached, plus those computed when a
        scorer is attached); never raises for a missing score."""
        if not self.key or not text.strip():
            return {}
        top = cross_top(candidates, self.k)
        found = CrossScores(ws).get_many(self.key, text, top)
        missing = [d for d in top if d not in found]
        if missing and self.score is not None:
            found.update(fill(ws, self.key, self.score, text, missing, parts))
        return found


def fill(ws: Workspace, key: str, score: Score, text: str, doc_ids: Sequence[str],
         parts: Mapping[str, tuple[str, str]]) -> dict[str, float]:
    """Score ``doc_ids`` against ``text`` (title and abstract joined) and store the scores in
    the cache; documents without text are left out. Returns what was stored."""
    ids = [d for d in doc_ids if d in parts and any(parts[d])]
    if not ids:
        return {}
    values = score(text, [joined_text(*parts[d]) for d in ids])
    out = {d: float(v) for d, v in zip(ids, values, strict=True)}
    CrossScores(ws).put_many(key, text, out)
    return out


def load_score(folder: Any, *, device: str | None = None, threads: int | None = None) -> Score:
    """The scoring function of a cross-encoder folder (:class:`retrievers.cross.CrossScorer`);
    ``threads``: torch's CPU threads (a background job keeps a core for the page)."""
    import torch

    from retrievers.cross import CrossScorer

    scorer = CrossScorer.load(folder, device=device)

    def score(query: str, documents: Sequence[str]) -> np.ndarray:
        if threads is None:
            return scorer.score(query, documents, batch_size=BATCH_SIZE)
        before = torch.get_num_threads()  # a job run in a caller's process gives them back
        torch.set_num_threads(max(1, int(threads)))
        try:
            return scorer.score(query, documents, batch_size=BATCH_SIZE)
        finally:
            torch.set_num_threads(before)
    return score


def open_cross(ws: Workspace, version: str, *, k: int | None = None, compute: bool = False,
               device: str | None = None, threads: int | None = None) -> CrossFeature:
    """The cross block of a cross version: its cache key, its K (default the workspace's),
    and a loaded scorer with ``compute`` (its weights checked against the registry's checksum
    first).

    Raises:
        UnknownNameError: No such version.
        CurationError: Its weights do not match the recorded checksum (with ``compute``).
    """
    found = Models(ws).get(version)
    score = None
    if compute:
        verify_weights(found)
        score = load_score(found.model_dir, device=device, threads=threads)
    return CrossFeature(found.id, model_key(found), check_k(workspace_k(ws) if k is None else k),
                        score)


def recorded_cross(ws: Workspace, recorded: Any) -> CrossFeature:
    """The cross block a ranker version was trained with (its manifest's ``cross``), reading
    the cache only; a version gone since gives a block whose scores are all missing."""
    data = recorded if isinstance(recorded, dict) else {}
    version, key = str(data.get("version") or ""), str(data.get("key") or "")
    k = data.get("k", DEFAULT_CROSS_K)
    k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else DEFAULT_CROSS_K
    if version and not Models(ws).is_version(version):
        logger.warning("the cross version %s a ranker was trained with is gone; its cross "
                       "features count as missing", version)
        return CrossFeature("", "", k)
    return CrossFeature(version, key, k)


def version_cross(ws: Workspace, manifest: Mapping[str, Any], *, compute: bool = False
                  ) -> CrossFeature | None:
    """The cross block of a ranker version: None when its features have none (versions
    trained before issue 45, or without an active cross version), else the cross version it
    was trained with, reading the cache (``compute``: scoring what is missing, batch callers
    only; a version whose weights cannot be loaded reads the cache only, with a warning)."""
    if CROSS[0] not in manifest.get("features", ()):
        return None
    recorded = recorded_cross(ws, manifest.get("cross"))
    if not compute or not recorded.version:
        return recorded
    try:
        return open_cross(ws, recorded.version, k=recorded.k, compute=True)
    except (CurationError, OSError) as exc:
        logger.warning("cannot load the cross version %s (%s); its scores come from the cache "
                       "only", recorded.version, exc)
        return recorded
