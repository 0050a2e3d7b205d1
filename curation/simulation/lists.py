"""The screening lists a replay starts from: per held-out query, its candidates in the static
order, the ranker's scores and which candidates are relevant (cached on disk).

The ranker is the one ``kbcurate rank train`` would fit today, trained in memory (seeded) on the
task's train split (KB grades over BM25's top 100, the answer-type dictionary holding train
answers only). Each dev and test query's candidates are BM25's top ``depth`` (1,000 by default:
the screening queue), scored by that ranker; relevant = the KB cites the document for the
query. Building the lists of a task takes a minute or two; the result is cached under
``WS/cache/screening/`` keyed by the corpus, the relations, the depth and the ranker options, so
replays after the first run read arrays only.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from curation.evaluation.harness import SPLITS, EvalQuery, build_task
from curation.evaluation.runner import ranking_context
from curation.ranking.features import gather
from curation.ranking.grades import grade_table
from curation.ranking.model import Ranker, RankerOptions, fit
from curation.ranking.pipeline import RankingContext
from curation.screening.queue import SCREENING_DEPTH
from curation.store.documents import Documents
from curation.store.workspace import Workspace
from curation.training.ranker import training_groups
from kb_sources.errors import CurationError
from kb_sources.types import joined_text

logger = logging.getLogger(__name__)

_CACHE_VERSION = 1
#: Candidates per train query the ranker is trained on (``kbcurate rank train``'s default).
TRAIN_DEPTH = 100


@dataclass(frozen=True)
class ScreeningList:
    """One query's candidates in the static order.

    Attributes:
        qid: Query id (the partial relation's key).
        split: "dev", "test", or a list's own name.
        doc_ids: Candidates, best static score first.
        static: The ranker's score of each candidate.
        relevant: Whether each candidate is relevant.
    """

    qid: str
    split: str
    doc_ids: tuple[str, ...]
    static: np.ndarray = field(repr=False)
    relevant: np.ndarray = field(repr=False)

    @property
    def n_relevant(self) -> int:
        return int(self.relevant.sum())


def task_lists(ws: Workspace, schema: str, *, depth: int = SCREENING_DEPTH,
               options: RankerOptions | None = None, progress: bool = True,
               use_cache: bool = True, train: bool = False) -> list[ScreeningList]:
    """The screening lists of every dev and test query of ``schema`` (cached).

    Args:
        train: Also the train queries, each scored by a ranker fitted on the other half of the
            train split (2-fold, split by query entity), so no train list is scored by a ranker
            that saw it; for choosing the learner's options beside dev.

    Raises:
        CurationError: The schema has no train query to fit the ranker on.
    """
    options = options or RankerOptions()
    key = _cache_key(ws, schema, depth, options, train)
    name = f"{schema}-d{depth}{'-train' if train else ''}.npz"
    path = ws.root / "cache" / "screening" / name
    if use_cache:
        cached = _read_cache(path, key)
        if cached is not None:
            return cached
    lists = _build(ws, schema, depth, options, progress, train)
    _write_cache(path, key, lists)
    return lists


def _build(ws: Workspace, schema: str, depth: int, options: RankerOptions,
           progress: bool, with_train: bool) -> list[ScreeningList]:
    task = build_task(ws, schema)
    train = task.split("train")
    if not train:
        raise CurationError(f"{schema} has no train-split query to fit the ranker on; import "
                            "more KB relations or their abstracts")
    ctx = ranking_context(ws, task, depth=TRAIN_DEPTH, progress=progress)
    groups = training_groups(ctx, train, grade_table(schema, ws.root), {}, progress=progress)
    jobs = [(fit(groups, ctx.names, options), [q for q in task.queries
                                               if q.split in ("dev", "test")])]
    if with_train:
        fold = {g: i % 2 for i, g in enumerate(sorted({q.group for q in train}))}
        for f in (0, 1):
            rest = [g for q, g in zip(train, groups, strict=True) if fold[q.group] != f]
            jobs.append((fit(rest, ctx.names, options),
                         [q for q in train if fold[q.group] == f]))
    out = []
    for ranker, queries in jobs:
        for q in tqdm(queries, desc=f"screening lists {schema}", disable=not progress,
                      mininterval=0.5):
            out.append(_scored(ctx, ranker, q, depth))
    logger.info("screening lists %s: %d queries", schema, len(out))
    return out


def _scored(ctx: RankingContext, ranker: Ranker, q: EvalQuery, depth: int) -> ScreeningList:
    cands = gather(ctx.bm25.search(q.text, depth), depth=depth)
    x = ctx.features(q.query, cands, q.qid)
    scores = ranker.score(x) if len(cands.doc_ids) else np.zeros(0)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    gold = set(q.gold)
    ids = tuple(cands.doc_ids[i] for i in order)
    return ScreeningList(q.qid, q.split, ids, np.asarray(scores, float)[order],
                         np.array([d in gold for d in ids], dtype=bool))


def list_texts(ws: Workspace, item: ScreeningList) -> list[str]:
    """Title + abstract of each candidate, in the list's order ("" when a document is gone)."""
    parts = Documents(ws).parts(item.doc_ids)
    return [joined_text(*parts.get(d, ("", ""))) for d in item.doc_ids]


def _cache_key(ws: Workspace, schema: str, depth: int, options: RankerOptions,
               train: bool) -> str:
    docs, last = Documents(ws).marker()
    counts = Documents(ws).counts()
    return json.dumps({"version": _CACHE_VERSION, "schema": schema, "depth": depth,
                       "documents": [docs, last], "relations": counts[1],
                       "ranker": options.to_json(), "train_depth": TRAIN_DEPTH,
                       "splits": list(SPLITS), "train": train}, sort_keys=True)


def _read_cache(path: Path, key: str) -> list[ScreeningList] | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != key:
                return None
            bounds = data["offsets"]
            ids, static, relevant = data["doc_ids"], data["static"], data["relevant"]
            return [ScreeningList(str(q), str(s), tuple(str(d) for d in ids[a:b]),
                                  static[a:b].copy(), relevant[a:b].copy())
                    for q, s, a, b in zip(data["qids"], data["splits"], bounds[:-1],
                                          bounds[1:], strict=True)]
    except (OSError, ValueError, KeyError) as exc:
        logger.warning("screening cache %s unreadable (%s); rebuilding", path, exc)
        return None


def _write_cache(path: Path, key: str, lists: list[ScreeningList]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    offsets = np.cumsum([0] + [len(x.doc_ids) for x in lists])
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(
        tmp, key=np.array(key), qids=np.array([x.qid for x in lists], dtype=str),
        splits=np.array([x.split for x in lists], dtype=str), offsets=offsets,
        doc_ids=np.array([d for x in lists for d in x.doc_ids], dtype=str),
        static=np.concatenate([x.static for x in lists]) if lists else np.zeros(0),
        relevant=np.concatenate([x.relevant for x in lists]) if lists else np.zeros(0, bool))
    tmp.replace(path)
