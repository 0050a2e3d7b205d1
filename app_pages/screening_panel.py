"""Curate page: screening that learns within the query and says when to stop (issues 38, 43).

One hook line in app_pages/curate.py, :func:`learned_result`, called before the results are
drawn: the sidebar's "Keywords" expander, the relation's screening queue and, when the order is
"learned within the query", the shown documents reordered by it
(:func:`curation.screening.order.learned_order`: the label rows record after how many labels).
The queue follows what ranks the page: the learned ranker version (its scores and calibration)
or any other ranking (BM25, the rerank, dense, hybrid: its order, calibrated on the rank by
:mod:`curation.screening.sources`), plus the relation's labelled documents and PubMed hits;
built once per schema, relation, query text, ranking and documents stamp, kept in the session
within a memory budget (:func:`~curation.screening.queue.trim_queues`). The panel
(:func:`screening_insight`, an expander atop the right-hand column whose label sums it up)
shows the figures as a small table (it wraps where metric labels were cut at 1280 px), the
stopping advice for a recall target, where the calibration comes from, the order choice and the
found-so-far chart.

Every curator's current label of the relation counts. Nothing here blocks a click: when the
queue cannot be built (no index yet), the panel says so and the page goes on in the ranked order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

import streamlit as st

from app_pages.common import (
    AppContext,
    flash,
    get_matcher,
    get_ranked,
    get_retriever,
    retriever_ready,
    short_hash,
    show_flash,
)
from app_pages.safe import md
from curation.evaluation.harness import build_task
from curation.ranking.versions import RankerVersion
from curation.screening.chart import found_chart
from curation.screening.order import learned_order, order_words
from curation.screening.queue import (
    SCREENING_DEPTH,
    ScreeningQueue,
    order_queue,
    relation_queue,
    trim_queues,
)
from curation.screening.sources import (
    CalibrationSource,
    RankingOrder,
    ranking_source,
    version_source,
)
from curation.screening.view import ORDER_LEARNED, ScreeningView, screening_view
from curation.search.keywords import (
    KINDS,
    Keywords,
    add_keyword,
    get_keywords,
    mark_keywords,
    remove_keywords,
)
from curation.search.ranked import fallback_for, is_ranked_choice, resolve_ranked_choice
from curation.search.ranking_names import ranking_label
from curation.search.rerank import RERANK_SUFFIX
from curation.search.session import RERANK_DEPTH, SearchResult, documents_stamp, rank
from curation.store.documents import Documents
from curation.store.labels import Labels
from curation.store.pubmed_hits import PubmedHits
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
from curation.training.round_measure import heldout_pool
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

logger = logging.getLogger(__name__)

ORDERS = ("as ranked", "learned within the query")
TARGETS = (0.8, 0.9, 0.95)
QUEUES = "screening_queues"
#: Queues kept per session (the oldest go first), and the bytes they may hold together
#: (a 1,000-candidate queue keeps about 2 MB, a 40,000-candidate one about 60 MB).
CACHED_QUEUES = 8
CACHED_QUEUE_BYTES = 256 * 2**20
KEYWORDS = "kw_marks"
KEYWORD_MESSAGES = "keywords"  # the flash place of the keyword box
KEYWORD_JUST_ADDED = "kw_just_added"  # the kind whose field Enter just emptied
#: The session key of this run's :class:`Screening` (screening mode reads its queue).
SCREENING_NOW = "screening_now"


@dataclass(frozen=True)
class Screening:
    """This run's screening of the relation in view (kept for the panel and screening mode).

    Attributes:
        query_key: The relation.
        view: Its order, estimate and advice after the labels (None: no queue, see notice).
        mode: The order chosen (:data:`ORDERS`).
        size: Candidates in the queue.
        notice: Why there is no queue.
        source: Where the queue's calibration comes from.
        queue: The queue itself (screening mode goes on through it past the shown list).
    """

    query_key: str
    view: ScreeningView | None
    mode: str
    size: int
    notice: str = ""
    source: CalibrationSource | None = None
    queue: ScreeningQueue | None = field(default=None, repr=False)


def _slug(schema: Schema, partial: PartialRelation) -> str:
    return f"{schema.name}_{short_hash(partial.query_key)}"


def relation_labels(ctx: AppContext, schema: str, query_key: str) -> list[tuple[str, Any]]:
    """Every curator's current labels of the relation as (doc id, grade), oldest first."""
    return [(lab.doc_id, lab.grade)
            for lab in reversed(Labels(ctx.ws).find(schema=schema, query_key=query_key))]


def page_ranking(ws: Workspace, schema: Schema, choice: tuple[str, bool],
                 result: SearchResult) -> RankerVersion | RankingOrder | str:
    """What ranked ``result``: the learned ranker version, or the retriever entry ``choice``
    (pinned name, rerank) as a :class:`RankingOrder` (the search's fallback when the ranker
    could not be used); a str says why no queue can be built."""
    name, rerank = choice
    if is_ranked_choice(result.model_version):
        return resolve_ranked_choice(ws, schema.name, result.model_version)
    if is_ranked_choice(name):  # the search fell back, as app_pages.curate.search does
        fallback = fallback_for(ws, schema.name)
        name, rerank = fallback.choice, fallback.rerank
        if not retriever_ready(ws, name):
            name, rerank = "bm25", True
    if not retriever_ready(ws, name):
        return (f"Nothing to screen yet: the screening queue needs the {name} index, which is "
                "not built yet. The panel fills in once it is built.")
    retriever = get_retriever(ws, name)

    def doc_text(doc_id: str) -> str:
        row = Documents(ws).rows_by_id([doc_id]).get(doc_id)
        return "" if row is None else row.text

    def head(text: str, entities: Any) -> list:
        return rank(retriever, text, RERANK_DEPTH, entities=entities, rerank=True,
                    doc_text=doc_text, matcher=get_matcher())[0]

    return RankingOrder(name + (RERANK_SUFFIX if rerank else ""),
                        ranking_label(result.model_version), retriever.search,
                        head if rerank else None)


def _build(ctx: AppContext, schema: Schema, partial: PartialRelation, text: str,
           extra: list[str], ranking: RankerVersion | RankingOrder
           ) -> tuple[ScreeningQueue, CalibrationSource]:
    """The relation's queue and its calibration's source (seconds; the first queue of a
    ranking also searches the held-out queries, kept in the workspace afterwards)."""
    if isinstance(ranking, RankingOrder):
        source = ranking_source(ctx.ws, schema.name, ranking,
                                lambda name: heldout_pool(build_task(ctx.ws, name)))
        entities = [e for ents in partial.query.values() for e in ents]
        ranked = ranking.order(text, entities, SCREENING_DEPTH)
        return order_queue(ctx.ws, partial.query_key, ranked, extra=extra,
                           calibration=source.calibration), source
    ranked = get_ranked(ctx.ws, schema, ranking, get_retriever(ctx.ws, "bm25"))
    source = version_source(schema.name, ranking_label(ranked.label), ranking.manifest)
    return relation_queue(ranked.context, ranked.ranker, text, partial.query, partial.query_key,
                          extra=extra, calibration=source.calibration), source


def _queue(ctx: AppContext, schema: Schema, partial: PartialRelation, text: str,
           labelled: list[str], choice: tuple[str, bool], result: SearchResult
           ) -> tuple[ScreeningQueue, CalibrationSource] | str:
    """The relation's queue from the session, built on first use; a str says why there is
    none (kept too, so a failing build is not retried on every click)."""
    try:
        ranking = page_ranking(ctx.ws, schema, choice, result)
    except CurationError as exc:
        return f"The screening queue could not be built ({exc})."
    if isinstance(ranking, str):
        return ranking
    cache: dict = st.session_state.setdefault(QUEUES, {})
    key = (schema.name, partial.query_key, text,
           ranking.id if isinstance(ranking, RankerVersion) else ranking.key,
           documents_stamp(ctx.ws))
    if key not in cache:
        try:
            with st.spinner("Ordering the relation's candidates for screening (a new ranking "
                            "is first calibrated on held-out queries) ..."):
                hits = PubmedHits(ctx.ws).relation_documents(schema.name, partial.query_key)
                cache[key] = _build(ctx, schema, partial, text, [*labelled, *hits], ranking)
        except (CurationError, OSError, ValueError, RuntimeError) as exc:
            logger.warning("screening queue of %s failed: %s", partial.query_key, exc)
            cache[key] = f"The screening queue could not be built ({exc})."
        trim_queues(cache, CACHED_QUEUES, CACHED_QUEUE_BYTES)
    return cache[key]


def _mode(slug: str, labels: int) -> str:
    """The order shown: the curator's choice for this relation, else learned once it has a
    label; the choice widget is set to match before it is drawn."""
    mode = st.session_state.get(f"screen_order_{slug}") or ORDERS[1 if labels else 0]
    st.session_state[f"screen_order_{slug}_w"] = mode
    return mode


def _remember_mode(slug: str) -> None:
    st.session_state[f"screen_order_{slug}"] = st.session_state[f"screen_order_{slug}_w"]


def learned_result(ctx: AppContext, schema: Schema, partial: PartialRelation, text: str,
                   result: SearchResult, choice: tuple[str, bool]) -> SearchResult:
    """Hook before the results: the keyword sidebar, the screening of the relation (drawn by
    :func:`screening_insight`; ``choice``: the page's retriever entry and rerank), and
    ``result`` in the learned order when that order is chosen and some label moved it."""
    keyword_sidebar(ctx, schema)
    labels = relation_labels(ctx, schema.name, partial.query_key)
    slug = _slug(schema, partial)
    mode = _mode(slug, len(labels))
    built = _queue(ctx, schema, partial, text, sorted({d for d, _ in labels}), choice, result)
    if isinstance(built, str):
        st.session_state[SCREENING_NOW] = Screening(partial.query_key, None, mode, 0, built)
        return result
    queue, source = built
    target = float(st.session_state.get(f"screen_target_{slug}") or TARGETS[-1])
    try:
        view = screening_view(queue, labels, target=target)
    except CurationError as exc:  # never block a click: the page goes on as ranked
        st.session_state[SCREENING_NOW] = Screening(partial.query_key, None, mode, 0,
                                                    f"The screening estimate failed ({exc}).")
        return result
    st.session_state[SCREENING_NOW] = Screening(partial.query_key, view, mode, len(queue),
                                                source=source, queue=queue)
    if mode != ORDERS[1] or view.order_mode != ORDER_LEARNED:
        return result
    return replace(result, docs=learned_order(result.docs, view))


def screening_insight(ctx: AppContext, schema: Schema, partial: PartialRelation) -> None:
    """The panel of what is found, what is left and when to stop (an expander whose label
    sums it up)."""
    now = st.session_state.get(SCREENING_NOW)
    if not isinstance(now, Screening) or now.query_key != partial.query_key:
        return
    slug = _slug(schema, partial)
    with st.expander(md(_summary(now)), key=f"screen_box_{slug}"):
        if now.view is None:
            st.info(md(now.notice))
            return
        _insight(now, slug)


def _summary(now: Screening) -> str:
    """The panel's label (plain text): "Screening · 3 relevant found · about 1.2 left (90%
    interval 0-3) · keep screening"."""
    if now.view is None:
        return "Screening: found so far and when to stop"
    rem = now.view.remaining
    verdict = "you can stop" if now.view.advice.stop else "keep screening"
    return (f"Screening · {rem.found} relevant found · about {rem.expected:.1f} left "
            f"({rem.level:.0%} interval {rem.low}-{rem.high}) · {verdict} for "
            f"{rem.target:.0%} recall")


def _insight(now: Screening, slug: str) -> None:
    view = now.view
    assert view is not None
    rem = view.remaining
    st.markdown(f"| Screening | now |\n|:--|:--|\n| Found | **{rem.found:,d}** relevant |\n"
                f"| Left | about **{rem.expected:.1f}** ({rem.level:.0%} interval {rem.low:,d} "
                f"to {rem.high:,d}) |\n| Screened | **{rem.screened:,d}** of {now.size:,d} |")
    st.caption(md(f"Found: every curator's complete or partial labels of the relation. Left: "
                  f"estimated relevant among the {rem.unscreened:,d} unscreened candidates."))
    st.selectbox("Recall target", TARGETS, index=len(TARGETS) - 1,
                 key=f"screen_target_{slug}", format_func=lambda t: f"{t:.0%}")
    advice = view.advice
    st.markdown((":green[:material/check_circle:] " if advice.stop else  # a line, no alert:
                 ":orange[:material/pending:] ") + md(advice.message))  # alerts are the page's
    words = now.source.words() if now.source is not None else ""
    st.caption(md(f"Stop rule: {advice.rule} (the rule that stopped nearest the last relevant "
                  "abstract in replays, docs/evaluation.md). How sure: recall reaches the target "
                  f"with probability {advice.confidence:.0%} by the calibrated estimate, which "
                  "assumes the ranking's scores are calibrated on this relation (a model, not a "
                  f"guarantee). For a guarantee, screen a random sample of the rest. {words}"))
    st.radio("Order", ORDERS, key=f"screen_order_{slug}_w", horizontal=True,
             on_change=_remember_mode, args=(slug,),
             help="learned within the query: the unlabelled candidates re-ordered after every "
                  "label of the relation (all curators); label rows record it")
    learned = now.mode == ORDERS[1] and view.order_mode == ORDER_LEARNED
    st.caption(md(f"Cards shown {order_words(view.order_labels if learned else None, view.handed_over)}."))  # noqa: E501
    st.plotly_chart(found_chart(view), key=f"screen_chart_{slug}",
                    config={"displayModeBar": False})  # its buttons covered the title


def keyword_sidebar(ctx: AppContext, schema: Schema) -> Keywords:
    """The sidebar's "Keywords" expander: the curator's include and exclude keywords of the
    schema, saved in the workspace; kept for :func:`keyword_marks`.

    Each kind has a field (Enter adds what it holds) and its own "Add" button, which checks
    only its own field; the keywords show as chips (a click removes one) and a multiselect
    removes several. Every action runs in a callback and reports through
    :func:`~app_pages.common.flash`, so a message shows once, next to the keywords.
    """
    try:
        keywords = get_keywords(ctx.ws, ctx.user.name, schema.name)
    except CurationError as exc:
        st.sidebar.warning(md(str(exc)))
        keywords = Keywords()
    st.session_state[KEYWORDS] = keywords
    where = (ctx.ws, ctx.user.name, schema.name)
    with st.sidebar.expander(f"Keywords · {len(keywords.include):d} include, "
                             f"{len(keywords.exclude):d} exclude" if keywords else "Keywords",
                             key="keywords_box"):
        show_flash(KEYWORD_MESSAGES)
        for kind in KINDS:
            _keyword_kind(where, getattr(keywords, kind), kind)
    return keywords


def _keyword_kind(where: tuple[Workspace, str, str], words: tuple[str, ...], kind: str) -> None:
    """One kind's field, "Add" button, chips and bulk removal."""
    st.text_input(md(f"Add {kind} keyword"), key=f"kw_new_{kind}", on_change=_add_keyword,
                  args=(*where, kind, False), placeholder="type, then Enter")
    st.button(md(f"Add {kind}"), key=f"kw_add_{kind}", on_click=_add_keyword,
              args=(*where, kind, True))
    if not words:
        st.caption(md(f"No {kind} keywords yet."))
        return
    schema = where[2]
    chips = f"kw_chips_{kind}_{schema}"
    st.pills(md(f"Your {kind} keywords (click one to remove it)"), list(words), key=chips,
             selection_mode="single", format_func=lambda w: f"{md(w)} ×",
             on_change=_remove_chip, args=(*where, kind, chips))
    picked = f"kw_del_{kind}_{schema}"
    remove = st.multiselect(md(f"Remove several {kind} keywords"), list(words), key=picked)
    if remove:
        st.button(f"Remove {len(remove):d}", key=f"kw_rm_{kind}", on_click=_remove_keywords,
                  args=(*where, kind, tuple(remove), picked))


def _add_keyword(ws: Workspace, user: str, schema: str, kind: str, clicked: bool) -> None:
    """Add what the ``kind`` field holds (Enter in it, or its "Add" button: ``clicked``).

    An empty field is no error: Enter in it, or a click right after Enter added its keyword
    (a browser sends both when the field loses the focus to the button), does nothing; a
    click on an empty field at any other time says what to do."""
    field = f"kw_new_{kind}"
    just_added = st.session_state.pop(KEYWORD_JUST_ADDED, None)
    text = " ".join(str(st.session_state.get(field) or "").split())
    if not text:
        if clicked and just_added != kind:
            flash("info", md(f"Type an {kind} keyword in the field first, then press Enter "
                             f"or click Add {kind}."), KEYWORD_MESSAGES)
        return
    try:
        before = get_keywords(ws, user, schema)
        after = add_keyword(ws, user, schema, kind, text)
    except CurationError as exc:
        flash("error", md(exc), KEYWORD_MESSAGES)
        return
    st.session_state[field] = ""
    st.session_state[KEYWORD_JUST_ADDED] = kind
    if after != before:
        flash("success", f"Added the {md(kind)} keyword **{md(text)}**.", KEYWORD_MESSAGES)


def _remove_chip(ws: Workspace, user: str, schema: str, kind: str, chips: str) -> None:
    """Remove the keyword whose chip was clicked."""
    word = st.session_state.get(chips)
    st.session_state[chips] = None
    if word:
        _remove_keywords(ws, user, schema, kind, (word,), None)


def _remove_keywords(ws: Workspace, user: str, schema: str, kind: str, words: tuple[str, ...],
                     picked: str | None) -> None:
    """Remove ``words`` from the ``kind`` list (and clear the multiselect ``picked``)."""
    st.session_state.pop(KEYWORD_JUST_ADDED, None)
    try:
        remove_keywords(ws, user, schema, kind, words)
    except CurationError as exc:
        flash("error", md(exc), KEYWORD_MESSAGES)
        return
    if picked:
        st.session_state[picked] = []
    flash("success", f"Removed {len(words):d} {md(kind)} keyword{'s' if len(words) > 1 else ''}: "
                     f"{md(', '.join(words))}.", KEYWORD_MESSAGES)


def keyword_marks(highlighted: str) -> str:
    """A card's highlighted (escaped) HTML with the curator's keywords marked; the hook for the
    card renderers (``highlighted = keyword_marks(highlighted_html(...))``)."""
    keywords = st.session_state.get(KEYWORDS)
    return mark_keywords(highlighted, keywords) if isinstance(keywords, Keywords) else highlighted
