"""Why this rank: the features that raised a document's score most, in a curator's words.

Takes the per-feature contributions of :meth:`curation.ranking.model.Ranker.contributions`
(LightGBM's ``pred_contrib``) and phrases the top ones that pushed the score up: "names BRAF and
V600E in the title", "a treatment shares a sentence with the query entities", "close to the
KB-trained model", "the cross-encoder read the query and abstract together: score 2.31, in
the top 4%". Plain text; the app escapes it like any other text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kb_sources.types import Entity


@dataclass(frozen=True)
class Reason:
    feature: str
    contribution: float
    text: str


def _names(entities: Sequence[Entity]) -> str:
    texts = list(dict.fromkeys(e.text for e in entities)) or ["the query entity"]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " or " + texts[-1]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _pairing(n: int, answer: str) -> str:
    return f"{_count(n, 'sentence')} {'pairs' if n == 1 else 'pair'} a {answer} with the query " \
           "entities"


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _cross(value: float, share: float | None) -> str:
    """The cross-encoder's reason: its score, and the top share of the query's scored
    candidates the document is in, when known."""
    where = (f", in the top {max(1, math.ceil(100 * share))}%"
             if share is not None and math.isfinite(share) else "")
    return f"the cross-encoder read the query and abstract together: score {value:.2f}{where}"


def phrase(feature: str, value: float, query: Mapping[str, Sequence[Entity]],
           answer_type: str, row: Mapping[str, float] | None = None) -> str:
    """One feature's value in words (``row``: the document's other values, which some phrases
    quote: the cross-encoder's score and place)."""
    row = row or {}
    if feature in ("cross_score", "cross_share"):
        score = value if feature == "cross_score" else row.get("cross_score", math.nan)
        share = value if feature == "cross_share" else row.get("cross_share")
        if math.isfinite(score):
            return _cross(score, share)
        return "the cross-encoder has not read it yet"
    if feature.startswith("slot:"):
        _, slot, part = feature.split(":", 2)
        who = _names(query.get(slot, ()))
        return {"title": f"names {who} in the title",
                "abstract": f"names {who} in the abstract",
                "mentions": f"mentions {who} {_times(round(math.expm1(value)))}",
                "kind": f"matches {who} by its name or a normalised form",
                "first": f"names {who} early in the text"}.get(part, feature)
    every = " and ".join(_names(v) for v in query.values() if v) or "the query entities"
    answer = answer_type or "answer"
    return {
        "bm25_score": "shares many words with the query (BM25)",
        "bm25_rank": "ranks high on word overlap (BM25)",
        "rrf": "ranks high in BM25 and the dense model together",
        "dense_cos": "close to the KB-trained model",
        "base_cos": "close to the base model",
        "dense_missing": "outside the KB-trained model's top candidates",
        "cross_missing": "the cross-encoder has not read it (not among its top candidates)"
        if value else "the cross-encoder read it",
        "slots_named": f"names {every}" if value >= 1 else "names some of the query entities",
        "slots_in_title": f"names {every} in the title",
        "answer_entities": f"names {_count(round(math.expm1(value)), answer)}",
        "answer_with_query": f"a {answer} shares a sentence with the query entities",
        "evidence_sentences": _pairing(round(math.expm1(value)), answer),
        "kb_sibling_cited": "the KB cites it for another relation of the same entity",
    }.get(feature, feature)


def reasons(names: Sequence[str], values: np.ndarray, contributions: np.ndarray,
            query: Mapping[str, Sequence[Entity]], answer_type: str, top: int = 3
            ) -> list[Reason]:
    """The ``top`` features that raised this row's score most (positive contributions only)."""
    order = sorted(range(len(names)), key=lambda i: (-float(contributions[i]), names[i]))
    row = {n: float(v) for n, v in zip(names, values, strict=True)}
    out: list[Reason] = []
    for i in order:
        if len(out) == top or not contributions[i] > 0:
            break
        text = phrase(names[i], float(values[i]), query, answer_type, row)
        if any(r.text == text for r in out):  # the cross score and its place say one thing
            continue
        out.append(Reason(names[i], float(contributions[i]), text))
    return out
