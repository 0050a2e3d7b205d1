"""The learned ranker behind the Curate page: its menu entries, the loaded ranker, the reasons on
each card, and each schema's default ranking.

Menu entries: ``ranked · active`` follows the schema's active ranker version (a version promoted
by a learn-as-you-label round ranks the next search), ``ranked · <schema>-ranker@N`` pins one.
The first stage is the BM25 index; a version trained with dense features also reads the dense
indexes it was trained with (a trained dense version's, the base model's), when they are built
(otherwise those features are missing values, as for any document outside the dense top N); a
version trained with the cross-encoder's score reads it from the workspace's cache (the
``cross_scores`` job fills it; :mod:`curation.search.cross_scores`).

The default ranking of a schema is what ``kbcurate evaluate --retriever best`` measured best on
its held-out split (:mod:`curation.evaluation.best`), recorded in the workspace, unless an
admin's activation of a ranker version is newer than that measurement (then the active ranker),
or the measurement rests on too few queries (then what the workspace's other schemas measured:
:func:`pooled_default`); a workspace that measured nothing yet starts on bm25 + the entity
rerank (:func:`default_for`). When the active ranker version
cannot be used (its folder gone, its file damaged), the schema falls back to the next measured
configuration with a notice naming the version and what an admin can do
(:func:`fallback_for`); ``ranked · active`` is not offered until an admin activates or trains
a version that loads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from curation.matching.matcher import EntityMatcher
from curation.ranking.cross import version_cross
from curation.ranking.model import Ranker
from curation.ranking.pipeline import RANKED, RankingContext
from curation.ranking.versions import (
    RankerVersion,
    active_ranker,
    get_version,
    list_versions,
    load_ranker,
)
from curation.search.indexing import get_index, index_ready
from curation.store.identities import ACTIVE, VERSION_SEP, RetrieverChoice
from curation.store.rankers import Rankers, RankingChoice
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema
from kb_sources.types import Entity
from retrievers.base import Hit, Retriever

logger = logging.getLogger(__name__)

#: The menu entry that follows the schema's active ranker version.
RANKED_ACTIVE = str(RetrieverChoice(RANKED, ACTIVE))
#: The reason of a document whose features all lowered its score.
NO_REASON = "nothing in it raised the score above an average candidate's"
#: What a workspace ranks with before any evaluation measured something better.
FALLBACK = "bm25+rerank"


def is_ranked_choice(choice: str) -> bool:
    """Whether a menu entry is the learned ranker ("ranked · ...")."""
    try:
        return RetrieverChoice.parse(choice).is_ranked
    except CurationError:
        return False


def ranked_choices(ws: Workspace, schema: str) -> list[str]:
    """``ranked · active`` (when the schema has an active version that can be used), then every
    saved version of the schema, newest first."""
    versions = list_versions(ws, schema)
    head = [RANKED_ACTIVE] if active_ranker(ws, schema).version is not None else []
    return head + [str(RetrieverChoice(RANKED, v.id)) for v in reversed(versions)]


def resolve_ranked_choice(ws: Workspace, schema: str, choice: str) -> RankerVersion:
    """The version a ranked menu entry names now (``active``: the schema's active version).

    Raises:
        CurationError: The entry is not a ranked one, the schema has no active version, or the
            version does not exist or belongs to another schema.
    """
    try:
        parsed = RetrieverChoice.parse(choice)
    except CurationError:
        parsed = None
        name, _, ident = choice.partition(VERSION_SEP)
        if name == RANKED and ident:
            get_version(ws, ident)  # says why it is no version id (a path, a typo)
    if parsed is None or not parsed.is_ranked or parsed.version is None or parsed.rerank:
        raise CurationError(f"{choice!r} is not a ranked menu entry; expected 'ranked · active' "
                            "or 'ranked · <schema>-ranker@N'")
    ident = str(parsed.version)
    if parsed.follows_active:
        state = active_ranker(ws, schema)
        if state.problem:
            raise CurationError(state.notice(fallback_for(ws, schema).configuration))
        version = state.version
        if version is None:
            raise CurationError(f"{schema} has no active ranker version yet; train one "
                                f"(kbcurate rank train --schema {schema}) or label 20 "
                                "abstracts so the first round runs")
        return version
    version = get_version(ws, ident)
    if version.schema != schema:
        raise CurationError(f"{ident} ranks {version.schema}, not {schema}; pick a version of "
                            f"{schema}")
    return version


@dataclass
class RankedSearch:
    """A loaded ranker version with its ranking context (one per version and corpus state).

    Shared by every session of a server process: each call passes the caller's workspace
    connection, which the context reads titles and abstracts through.
    """

    version: RankerVersion
    ranker: Ranker
    context: RankingContext

    @property
    def label(self) -> str:
        """The model-version label of its hits (what label rows record)."""
        return str(RetrieverChoice(RANKED, self.version.id))

    def search(self, ws: Workspace, text: str, query: Mapping[str, Sequence[Entity]], k: int,
               query_key: str = "") -> tuple[list[Hit], dict[str, tuple[str, ...]]]:
        """The top ``k`` hits and, per document, the top three reasons in words."""
        if not text.strip():
            raise CurationError("The query is empty; pick a relation or type a question")
        ranked = self.context.rank(self.ranker, text, query, k, query_key, ws=ws)
        hits = [Hit(r.hit.doc_id, r.hit.score, r.hit.rank, self.label) for r in ranked]
        why = {r.hit.doc_id: tuple(reason.text for reason in
                                   self.context.explain(self.ranker, r.features, query))
               or (NO_REASON,) for r in ranked}
        return hits, why


def open_first_stages(ws: Workspace, *, dense_version: str | None = None, base: bool = False,
                      build: bool = True, progress: bool = False
                      ) -> tuple[Retriever | None, Retriever | None]:
    """The dense first stages of a ranker: the index of a trained dense version and the base
    model's dense index (each only when asked for).

    ``build``: build a missing index (encodes the whole corpus: minutes to hours on a CPU);
    otherwise a missing one is None (its features count as missing values) and logged.
    """
    def open_one(options: dict[str, Any]) -> Retriever | None:
        if build or index_ready(ws, "dense", options):
            return get_index(ws, "dense", options, progress=progress)
        logger.warning("the dense index %s is not built; its ranker features count as missing "
                       "(kbcurate index --retriever dense%s)", options or "(base)",
                       f" --model {options['model']}" if options else "")
        return None

    return (open_one({"model": dense_version}) if dense_version else None,
            open_one({}) if base else None)


def version_first_stages(ws: Workspace, version: RankerVersion, *, build: bool = False,
                         progress: bool = False) -> tuple[Retriever | None, Retriever | None]:
    """The dense first stages a version was trained with (``dense``: a dense version id,
    ``base``: the base model), opened as :func:`open_first_stages` does."""
    dense = version.manifest.get("dense")
    return open_first_stages(ws, dense_version=dense if isinstance(dense, str) else None,
                             base=bool(version.manifest.get("base")), build=build,
                             progress=progress)


def open_ranked(ws: Workspace, schema: Schema, version: RankerVersion, bm25: Retriever, *,
                matcher: EntityMatcher | None = None) -> RankedSearch:
    """Load a version (checksum checked) and build its ranking context over ``bm25`` and the
    dense indexes it was trained with (those built), and the cross-encoder's cached scores when
    it was trained with them (never computed here: a missing score is a missing feature). The
    answer-type dictionary is the whole workspace's: in the app every known answer may be
    tagged."""
    ranker = load_ranker(version, ws)
    depth = int(version.manifest.get("depth", 100))
    dense, base = version_first_stages(ws, version)
    ctx = RankingContext(ws, schema, bm25, dense=dense, base=base, matcher=matcher, depth=depth,
                         cross=version_cross(ws, version.manifest))
    if list(ctx.names) != list(ranker.names):
        raise CurationError(f"{version.id} was trained on other features than this code "
                            "builds; train a new version with `kbcurate rank train --schema "
                            f"{schema.name}`")
    return RankedSearch(version, ranker, ctx)


# -- the default ranking --------------------------------------------------------------------------
@dataclass(frozen=True)
class DefaultRanking:
    """What a schema ranks with when a curator opens it.

    Attributes:
        choice: The menu entry ("bm25", "hybrid · PO-edel@2", "ranked · active").
        rerank: The entity-aware rerank is on.
        configuration: The measured configuration ("bm25+rerank", "ranked", ...).
        reason: One line for the sidebar ("chosen by test NDCG@10 0.69 vs 0.66 for
            bm25+rerank"), or why the fallback is used.
        record: The stored measurement (None for the fallback when nothing was measured).
        notice: Why the measured best is not used now (the active ranker cannot be used), and
            what an admin can do; empty otherwise. Pages and the CLI show it.
    """

    choice: str
    rerank: bool
    configuration: str
    reason: str
    record: RankingChoice | None
    notice: str = ""


def configuration_choice(configuration: str, record: RankingChoice | None = None
                         ) -> tuple[str, bool]:
    """(menu entry, rerank) of a measured configuration name."""
    if configuration == RANKED:
        return RANKED_ACTIVE, False
    base, plus, _ = configuration.partition("+")
    rerank = bool(plus)
    if base == "hybrid" and record is not None and record.dense_version:
        return str(RetrieverChoice("hybrid", record.dense_version)), rerank
    return base, rerank


def default_for(ws: Workspace, schema: str) -> DefaultRanking:
    """The schema's default ranking, in this order:

    1. the active learned ranker, when an admin's activation (or a round's promotion) is newer
       evidence than the stored measurement: none was made, it rests on too few queries, or it
       measured another ranker version (or none);
    2. :func:`pooled_default` when the schema's own measurement is missing or rests on too few
       queries: what the workspace's other schemas measured on enough queries;
    3. the recorded best configuration; when that is the ranker and the active version cannot
       be used, :func:`fallback_for` with a notice.
    """
    record = Rankers(ws).default_ranking(schema)
    state = active_ranker(ws, schema)
    if state.version is not None and (record is None or record.best != RANKED and (
            record.caution() or record.ranker_version != state.ident)):
        why = ("no measurement has compared it yet" if record is None else
               f"{schema}'s own measurement is too small to overrule it ({record.caution()})"
               if record.caution() else "it was activated after the last measurement "
               f"({record.best} best, {record.ranker_version or 'no ranker'} measured)")
        return DefaultRanking(RANKED_ACTIVE, False, RANKED, f"the active learned ranker "
                              f"{state.ident}: {why}", record)
    if record is None or record.caution() and (record.best != RANKED or state.version is None):
        return pooled_default(ws, schema, record)
    configuration = record.best
    choice, rerank = configuration_choice(configuration, record)
    if configuration == RANKED and state.version is None:
        fallback = fallback_for(ws, schema)
        why = (f"{RANKED} was measured best but no ranker version is active now"
               if not state.problem else f"{RANKED} was measured best but "
               f"{state.ident} cannot be used")
        return replace(fallback, reason=f"{why}; {fallback.reason}",
                       notice=state.notice(fallback.configuration) if state.problem else "")
    return DefaultRanking(choice, rerank, configuration, describe(record), record)


def default_caption(ws: Workspace, schema: str, default: DefaultRanking) -> str:
    """What the schema's default ranking is and why (plain text: the caller escapes it):
    "Default: ranked · disease_gene-ranker@3, chosen by test NDCG@10 0.741 vs 0.661 for
    bm25+rerank"."""
    what = default.configuration
    if is_ranked_choice(default.choice):
        version = active_ranker(ws, schema).version
        what = f"{default.configuration} · {version.id if version else 'none active'}"
    return f"Default: {what}, {default.reason}"


def pooled_gains(ws: Workspace, schema: str, better: str, than: str) -> list[float]:
    """``better``'s score minus ``than``'s in every other schema's stored measurement made on
    enough queries (no caution) that scored both, in schema order."""
    gains = []
    for other in sorted(ws.schemas()):
        measured = Rankers(ws).default_ranking(other) if other != schema else None
        if measured and not measured.caution() and {better, than} <= set(measured.scores):
            gains.append(measured.scores[better] - measured.scores[than])
    return gains


def pooled_evidence(ws: Workspace, schema: str, better: str, than: str) -> str:
    """"bm25+rerank beats bm25 on 4 of 4 schemas measured on enough queries (NDCG@10 +5.5 pp
    on average)" when ``better`` won on every other schema measured on enough queries (at
    least one; :func:`pooled_gains`), else ""."""
    gains = pooled_gains(ws, schema, better, than)
    if not gains or min(gains) < 0:
        return ""
    mean = 100 * sum(gains) / len(gains)
    return (f"{_words(better)} beats {_words(than)} on {len(gains)} of {len(gains)} schemas "
            f"measured on enough queries (NDCG@10 {mean:+.1f} pp on average)")


def _words(configuration: str) -> str:
    return {"bm25": "bm25", FALLBACK: "bm25 with the entity rerank",
            RANKED: "the learned ranker"}.get(configuration, configuration)


def pooled_default(ws: Workspace, schema: str, record: RankingChoice | None) -> DefaultRanking:
    """bm25 or bm25 + rerank for a schema too small to decide (or not measured), by what the
    workspace's other schemas measured on enough queries: the rerank unless it lost to plain
    bm25 on average there (with no such schema: bm25 + rerank, the workspace default)."""
    own = (f"{schema}'s own measurement is too small to choose ({record.caution()})"
           if record is not None else "no evaluation has chosen yet (kbcurate evaluate "
           "--retriever best)")
    gains = pooled_gains(ws, schema, FALLBACK, "bm25")
    if not gains and record is None:
        return DefaultRanking("bm25", True, FALLBACK, own, None)
    if not gains:
        return DefaultRanking("bm25", True, FALLBACK, f"{own}; no schema of the workspace was "
                              "measured on enough queries, so bm25 with the entity rerank, the "
                              "workspace default", record)
    mean = 100 * sum(gains) / len(gains)
    wins = sum(g >= 0 for g in gains)
    base = FALLBACK if mean >= 0 else "bm25"
    return DefaultRanking("bm25", base == FALLBACK, base, f"{own}; the workspace's evidence: "
                          f"bm25 with the entity rerank {'beats' if mean >= 0 else 'trails'} "
                          f"bm25 on {wins} of {len(gains)} schemas measured on enough queries "
                          f"(NDCG@10 {mean:+.1f} pp on average)", record)


def fallback_for(ws: Workspace, schema: str) -> DefaultRanking:
    """What a schema ranks with when the learned ranker cannot: the best measured configuration
    other than ``ranked`` (bm25 + rerank when none was measured)."""
    record = Rankers(ws).default_ranking(schema)
    scores = {k: v for k, v in (record.scores if record else {}).items() if k != RANKED}
    if not scores:
        return DefaultRanking("bm25", True, FALLBACK, "the fallback: bm25 with the entity "
                              "rerank", record)
    best = max(scores, key=lambda k: (round(scores[k], 6), k == FALLBACK))
    choice, rerank = configuration_choice(best, record)
    return DefaultRanking(choice, rerank, best, f"the next measured configuration "
                          f"({record.split} {record.metric} {scores[best]:.3f})", record)


def describe(record: RankingChoice) -> str:
    """"chosen by test NDCG@10 0.690 vs 0.660 for bm25+rerank" from a stored measurement, with
    a warning when it rests on fewer than 20 queries ("...; warning: measured on only 2 test
    queries (< 20): too few to choose between rankings")."""
    scores, best = record.scores, record.best
    others = sorted(((v, k) for k, v in scores.items() if k != best), reverse=True)
    what = f"{record.split} {record.metric.replace('ndcg', 'NDCG')} {scores.get(best, 0.0):.3f}"
    if best == RANKED and record.ranker_version:
        what += f" ({record.ranker_version})"
    if others:
        what += f" vs {others[0][0]:.3f} for {others[0][1]}"
    caution = record.caution()
    return f"chosen by {what}" + (f"; warning: {caution}" if caution else "")
