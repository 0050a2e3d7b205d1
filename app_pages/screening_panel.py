"""Curate page: screening that learns within the query and says when to stop (issue 38).

One hook line in app_pages/curate.py, :func:`learned_result`, called before the results are
drawn: the sidebar's "Keywords" expander, the relation's screening queue (the first stages' top
1,000, its labelled documents and its PubMed hits in the workspace; built once per schema,
relation, query text, ranker version and documents stamp, kept in the session within a memory
budget, :func:`trim_queues`; a re-score after a label only runs the per-query model) and, when
the order is "learned within the query", the shown documents reordered by it
(:func:`curation.screening.order.learned_order`: their ``order_labels`` then say after how
many labels, which the label rows record). The panel
(:func:`screening_insight`, an expander atop the right-hand column, so the first abstract stays
above the fold, whose label sums it up) shows the relevant found so far, the estimated relevant
left among the unscreened candidates with its interval, the stopping advice for a chosen recall
target, the order choice and the found-so-far chart.

Every curator's current label of the relation counts. Nothing here blocks a click: without an
active learned ranker, or when the queue cannot be built, the panel says so and the page goes on
in the ranked order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from app_pages.common import (
    AppContext,
    flash,
    get_ranked,
    get_retriever,
    retriever_ready,
    short_hash,
    show_flash,
)
from app_pages.safe import md
from curation.ranking.versions import active_ranker
from curation.screening.calibration import (
    DEFAULT_CALIBRATION,
    Calibration,
    version_calibration,
)
from curation.screening.chart import found_chart
from curation.screening.order import learned_order, order_words
from curation.screening.queue import ScreeningQueue, relation_queue
from curation.screening.view import ORDER_LEARNED, ScreeningView, screening_view
from curation.search.keywords import (
    KINDS,
    Keywords,
    add_keyword,
    get_keywords,
    mark_keywords,
    remove_keywords,
)
from curation.search.session import SearchResult, documents_stamp
from curation.store.labels import Labels
from curation.store.pubmed_hits import PubmedHits
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace
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


@dataclass(frozen=True)
class Screening:
    """This run's screening of the relation in view (kept for the panel under the results)."""

    query_key: str
    view: ScreeningView | None
    mode: str
    size: int
    notice: str = ""
    calibration: Calibration = DEFAULT_CALIBRATION


def _slug(schema: Schema, partial: PartialRelation) -> str:
    return f"{schema.name}_{short_hash(partial.query_key)}"


def relation_labels(ctx: AppContext, schema: str, query_key: str) -> list[tuple[str, Any]]:
    """Every curator's current labels of the relation as (doc id, grade), oldest first."""
    return [(lab.doc_id, lab.grade)
            for lab in reversed(Labels(ctx.ws).find(schema=schema, query_key=query_key))]


def _queue(ctx: AppContext, schema: Schema, partial: PartialRelation, text: str,
           labelled: list[str]) -> ScreeningQueue | str:
    """The relation's queue from the session, built on first use; a str says why there is
    none (kept too, so a failing build is not retried on every click)."""
    active = active_ranker(ctx.ws, schema.name)
    if active.version is None:
        return ("The estimate of what is left needs an active learned ranker for "
                f"{schema.name}; an admin activates one on the Models page.")
    if not retriever_ready(ctx.ws, "bm25"):
        return "The screening queue needs the BM25 index, which is not built yet."
    cache: dict = st.session_state.setdefault(QUEUES, {})
    key = (schema.name, partial.query_key, text, active.version.id, documents_stamp(ctx.ws))
    if key not in cache:
        try:
            with st.spinner("Scoring the relation's candidates for screening ..."):
                ranked = get_ranked(ctx.ws, schema, active.version, get_retriever(ctx.ws, "bm25"))
                hits = PubmedHits(ctx.ws).relation_documents(schema.name, partial.query_key)
                cache[key] = relation_queue(
                    ranked.context, ranked.ranker, text, partial.query, partial.query_key,
                    extra=[*labelled, *hits],
                    calibration=version_calibration(active.version.manifest))
        except (CurationError, OSError, ValueError, RuntimeError) as exc:
            logger.warning("screening queue of %s failed: %s", partial.query_key, exc)
            cache[key] = f"The screening queue could not be built ({exc})."
        trim_queues(cache)
    return cache[key]


def trim_queues(cache: dict, count: int = CACHED_QUEUES,
                budget: int = CACHED_QUEUE_BYTES) -> None:
    """Drop the oldest cached queues until at most ``count`` are left and those left hold at
    most ``budget`` bytes; the newest is always kept."""
    sizes = {k: v.nbytes if isinstance(v, ScreeningQueue) else 0 for k, v in cache.items()}
    while len(cache) > 1 and (len(cache) > count or sum(sizes.values()) > budget):
        oldest = next(iter(cache))
        del cache[oldest], sizes[oldest]


def _mode(slug: str, labels: int) -> str:
    """The order shown: the curator's choice for this relation, else learned once it has a
    label; the choice widget is set to match before it is drawn."""
    mode = st.session_state.get(f"screen_order_{slug}") or ORDERS[1 if labels else 0]
    st.session_state[f"screen_order_{slug}_w"] = mode
    return mode


def _remember_mode(slug: str) -> None:
    st.session_state[f"screen_order_{slug}"] = st.session_state[f"screen_order_{slug}_w"]


def learned_result(ctx: AppContext, schema: Schema, partial: PartialRelation, text: str,
                   result: SearchResult) -> SearchResult:
    """Hook before the results: the keyword sidebar, the screening of the relation (drawn by
    :func:`screening_insight`), and ``result`` in the learned order when that order is chosen
    and some label moved it."""
    keyword_sidebar(ctx, schema)
    labels = relation_labels(ctx, schema.name, partial.query_key)
    slug = _slug(schema, partial)
    mode = _mode(slug, len(labels))
    queue = _queue(ctx, schema, partial, text, sorted({d for d, _ in labels}))
    if isinstance(queue, str):
        st.session_state["screening_now"] = Screening(partial.query_key, None, mode, 0, queue)
        return result
    target = float(st.session_state.get(f"screen_target_{slug}") or TARGETS[-1])
    try:
        view = screening_view(queue, labels, target=target)
    except CurationError as exc:  # never block a click: the page goes on as ranked
        st.session_state["screening_now"] = Screening(partial.query_key, None, mode, 0,
                                                      f"The screening estimate failed ({exc}).")
        return result
    st.session_state["screening_now"] = Screening(partial.query_key, view, mode, len(queue),
                                                  calibration=queue.calibration)
    if mode != ORDERS[1] or view.order_mode != ORDER_LEARNED:
        return result
    return replace(result, docs=learned_order(result.docs, view))


def screening_insight(ctx: AppContext, schema: Schema, partial: PartialRelation) -> None:
    """The panel of what is found, what is left and when to stop (an expander whose label
    sums it up)."""
    now = st.session_state.get("screening_now")
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
    cols = st.columns(3)
    cols[0].metric("Relevant found", rem.found, help="Every curator's current labels of the "
                   "relation: complete or partial count as relevant")
    cols[1].metric("Estimated relevant left", f"{rem.expected:.1f}",
                   help=md(f"{rem.level:.0%} interval {rem.low}-{rem.high}, among the "
                           f"{rem.unscreened} unscreened candidates"))
    cols[2].metric("Screened", f"{rem.screened} of {now.size}")
    st.caption(md(f"Estimated relevant left among the {rem.unscreened} unscreened candidates: "
                  f"about {rem.expected:.1f} ({rem.level:.0%} interval {rem.low} to "
                  f"{rem.high})."))
    st.selectbox("Recall target", TARGETS, index=len(TARGETS) - 1,
                 key=f"screen_target_{slug}", format_func=lambda t: f"{t:.0%}")
    advice = view.advice
    (st.success if advice.stop else st.warning)(md(advice.message))
    st.caption(md("How sure: the estimate assumes the ranker's scores are calibrated on this "
                  "relation (a model of relevance, not a guarantee); it is an estimate until "
                  "several relevant documents are found. For a guarantee, screen a random "
                  f"sample of the rest. {calibration_words(now.calibration)}"))
    st.radio("Order", ORDERS, key=f"screen_order_{slug}_w", horizontal=True,
             on_change=_remember_mode, args=(slug,),
             help="learned within the query: the unlabelled candidates re-ordered after every "
                  "label of the relation (all curators); label rows record it")
    learned = now.mode == ORDERS[1] and view.order_mode == ORDER_LEARNED
    st.caption(md(f"Cards shown {order_words(view.order_labels if learned else None)}."))
    st.plotly_chart(found_chart(view), key=f"screen_chart_{slug}")


def calibration_words(calibration: Calibration) -> str:
    """Where the scores' calibration comes from, in words."""
    if calibration.queries:
        return (f"Scores calibrated on {calibration.queries:d} held-out queries of the active "
                "ranker version.")
    return ("Scores calibrated by the default calibration (disease_gene dev queries): the "
            "active ranker version has none of its own; a new ranker round fits one.")


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
