"""Worklist: which partial relations still have unlabelled top-k abstracts, in the order the
curator picks (KB evidence level, most suggested new answers, fewest labels), with progress per
relation and per user and a chart of labels per day and grade.

The schema, KB, retriever, rerank and "Abstracts to show" are the Curate page's own sidebar
controls (shared keys), so the worklist ranks exactly what Curate will show. Selecting a row offers
"Open in Curate", which sets Curate's relation picker and switches page. The ranking runs in
:func:`curation.search.worklist.worklist` (batched, capped by "Relations"); its rows are kept in
the session until labels, suggestions, relations or the options change.

"Watched relations" (above the table) lists the schema's watches
(:func:`curation.pubmed.watch_digest.watch_digest`): per watched relation "N new abstracts since
DATE" (new abstracts nobody has labelled yet), the best new abstract's score first, with *Open in
Curate*; a watch whose last run failed says why, that the next run catches up, and offers its
owner or an admin "Run again now" (a ``watch`` job). The list is paged (:data:`WATCH_PAGE` a
page, a page selector when there are more), so a team with a thousand watches draws fifty.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import (
    AppContext,
    fingerprint,
    flash,
    get_matcher,
    get_retriever,
    run_page,
    settle_heap,
    show_flash,
)
from app_pages.curate import ALL_KBS, MODES, ensure_ready, pick_schema, retriever_controls
from app_pages.safe import html_frame, html_text, md
from curation.jobs.queue import duplicate_note
from curation.pubmed.watch import may_manage
from curation.pubmed.watch_digest import DigestRow, watch_digest
from curation.pubmed.watch_jobs import submit_watch_run
from curation.search.activity import label_activity, progress_by_user
from curation.search.worklist import (
    Priority,
    WorklistOptions,
    WorklistRow,
    data_stamp,
    new_answers_ties,
    worklist,
    worklist_frame,
)
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

CURATE_PAGE = "app_pages/curate.py"
PRIORITY_LABELS = {Priority.EVIDENCE: "KB evidence level",
                   Priority.NEW_ANSWERS: "Most suggested new answers",
                   Priority.FEWEST_LABELS: "Fewest labels"}
CACHE_KEY = "wl_cache"
WATCH_PAGE = 50  # watched relations a page
WATCH_PAGE_KEY = "wl_watch_page"
CACHED = 4  # worklists kept per session
FORCED_HELP = ("Most suggested new answers counts the new answer candidates in each listed "
               "relation's top abstracts (slower: about 6-9 s for 200 relations on the demo "
               "data): without them, relations that no pending suggestion names would all tie")
GRADE_COLORS = {"complete": "#2e7d32", "partial": "#f9a825", "irrelevant": "#c62828",
                "skip": "#9e9e9e"}


def _controls() -> tuple[Priority, int, bool, bool]:
    cols = st.columns([3, 1, 1, 1], vertical_alignment="bottom")
    priority = cols[0].radio("Priority", list(Priority), key="wl_priority", horizontal=True,
                             format_func=lambda p: md(PRIORITY_LABELS[p]))
    limit = cols[1].number_input("Relations", min_value=10, max_value=5000, step=50,
                                 key="wl_limit",
                                 help="At most this many relations, taken in priority order; "
                                      "each one runs the retriever once")
    done = cols[2].checkbox("Show finished", key="wl_done", wrap=True,
                            help="Also list relations whose top abstracts are all labelled")
    order = Priority.parse(priority)
    if order is Priority.NEW_ANSWERS:  # this order counts them: shown ticked, not a choice
        cols[3].checkbox("Count candidates", value=True, disabled=True, wrap=True,
                         key="wl_candidates_forced", help=FORCED_HELP)
        return order, int(limit), done, True
    candidates = cols[3].checkbox("Count candidates", key="wl_candidates", wrap=True,
                                  help="New answer candidates in each relation's top "
                                       "abstracts (slower)")
    return order, int(limit), done, candidates


def rows_for(ctx: AppContext, schema: Schema, retriever: tuple[str, bool, int],
             choice: tuple[Priority, int, bool, bool]) -> list[WorklistRow]:
    """The worklist, from the session when nothing it depends on changed."""
    name, rerank, k = retriever
    priority, limit, done, candidates = choice
    source = st.session_state.get(f"kb_{schema.name}", ALL_KBS)
    options = WorklistOptions(source=None if source == ALL_KBS else source, include_done=done,
                              rerank=rerank, candidates=candidates)
    key = (schema.name, name, k, ctx.user.name, priority.value, limit, options,
           data_stamp(ctx.ws), fingerprint(ctx.ws))
    cache: dict = st.session_state[CACHE_KEY]
    if key not in cache:
        bar = st.progress(0.0, text="Ranking the relations' abstracts ...")
        cache[key] = worklist(
            ctx.ws, schema, get_retriever(ctx.ws, name), k=k, user=ctx.user.name, limit=limit,
            priority=priority, matcher=get_matcher() if rerank or candidates else None,
            options=options,
            progress=lambda n, total: bar.progress(n / max(total, 1),
                                                   text=f"Worklist: {n:,} of {total:,} relations"))
        bar.empty()
        settle_heap(collect=False)
        while len(cache) > CACHED:
            cache.pop(next(iter(cache)))
    return cache[key]


def new_answers_note(rows: list[WorklistRow], limit: int) -> None:
    """How the "Most suggested new answers" order was made, and when it decided nothing."""
    if new_answers_ties(rows):
        st.warning("No listed relation has a pending source suggestion of a new answer or a "
                   "new answer candidate in its top abstracts, so this order ties everywhere: "
                   "the list is in KB order (most cited first). Pick another priority, or "
                   "raise Relations to look further.")
        return
    st.caption("Ordered by new answers of pending source suggestions, then pending "
               "suggestions, then new answer candidates in the top abstracts, counted "
               + (f"for all {len(rows):,} of them." if len(rows) < limit else
                  f"for these {len(rows):,} relations only (the first by suggestions, then KB "
                  "order): raise Relations to count further."))


def _open_in_curate(schema: Schema, query_key: str) -> None:
    """Curate's relation picker on the KB relation ``query_key`` (its search and filters
    cleared so the relation is listed), then the Curate page."""
    st.session_state["query_mode"] = MODES[0]
    st.session_state["rel_search"] = ""
    for slot in schema.slot_names:
        st.session_state.pop(f"flt_{schema.name}_{slot}", None)
    st.session_state.pop(f"flt_{schema.name}_level", None)
    st.session_state[f"relation_pick_{schema.name}"] = query_key
    st.switch_page(CURATE_PAGE)


def _open_watched(schema: Schema, row: DigestRow) -> None:
    """A watched relation in Curate: the KB relation, or its entities typed in."""
    if row.in_kb:
        _open_in_curate(schema, row.query_key)
    st.session_state["query_mode"] = MODES[1]
    for slot in schema.query_slots:
        st.session_state[f"typed_{schema.name}_{slot}"] = row.slots.get(slot, "")
    st.switch_page(CURATE_PAGE)


def _run_again(ctx: AppContext, row: DigestRow) -> None:
    """A failed watch's "Run again now" (its owner or an admin): a ``watch`` job."""
    if not may_manage(ctx.user, row.watch):
        return
    if st.button("Run again now", key=f"wl_watch_run_{row.watch.id:d}"):
        try:
            job = submit_watch_run(ctx.ws, row.watch.id, user=ctx.user)
        except CurationError as exc:
            flash("error", md(exc))
        else:
            note = duplicate_note(job)
            flash("info", f"Watch {row.watch.id:d} (job {job.id:d}) is {md(note)}; it was not "
                          "started twice." if note else
                  f"Running watch {row.watch.id:d} in the background (job {job.id:d}).")
        st.rerun()


def _watch_page(total: int) -> int:
    """The page selector of the watched relations (when they fill more than one page); the
    index of the first row of the page shown."""
    pages = -(-total // WATCH_PAGE)
    if pages <= 1:
        return 0
    if int(st.session_state.get(WATCH_PAGE_KEY, 1)) > pages:  # fewer watches than before
        st.session_state[WATCH_PAGE_KEY] = pages
    cols = st.columns([1, 4], vertical_alignment="bottom")
    page = cols[0].number_input("Page", min_value=1, max_value=pages, step=1,
                                key=WATCH_PAGE_KEY,
                                help=f"{WATCH_PAGE:d} watched relations a page")
    start = (int(page) - 1) * WATCH_PAGE
    cols[1].caption(f"Watched relations {start + 1:,}-{min(start + WATCH_PAGE, total):,} of "
                    f"{total:,} (page {int(page):d} of {pages:d}); `kbcurate watch list` lists "
                    "them all.")
    return start


def watched(ctx: AppContext, schema: Schema, rows: list[DigestRow]) -> None:
    """Per watched relation "N new abstracts since DATE" (best new score first) with *Open in
    Curate*, and why a watch's last run failed (with "Run again now"); one page of them."""
    st.markdown("**Watched relations**")
    start = _watch_page(len(rows))
    warned: set[int] = set()
    for i, row in enumerate(rows[start:start + WATCH_PAGE], start):
        cols = st.columns([4, 1], vertical_alignment="center")
        best = (f" · best score {row.best_score:.3g} (PMID {row.best_pmid})"
                if row.best_score is not None else "")
        line = f"{row.headline()}{best} · watch {row.watch.id:d} by {row.watch.owner}"
        cols[0].markdown(f"**{md(row.relation)}** · {md(line)}")
        if row.new and cols[1].button("Open in Curate", key=f"wl_watch_open_{i}"):
            _open_watched(schema, row)
        if row.failed and row.watch.id not in warned and row.last_run is not None:
            warned.add(row.watch.id)
            run = row.last_run
            st.warning(f"The last run of watch {row.watch.id:d} ({md(row.watch.label)}), "
                       f"{md(run.finished_at[:16].replace('T', ' '))} UTC, failed: "
                       f"{md(run.error)}. The next run catches up from "
                       f"{md(row.watch.mindate)}.")
            _run_again(ctx, row)


def table(schema: Schema, rows: list[WorklistRow], candidates: bool) -> None:
    """The relations with progress columns; a selected row can be opened in Curate."""
    columns = ["relation", "evidence", "progress", "team progress", "to label (you)",
               "to label (anyone)", "labels", "your labels", "new answers",
               "pending suggestions"] + (["answer candidates"] if candidates else [])
    event = st.dataframe(
        worklist_frame(rows), key="wl_table", on_select="rerun", selection_mode="single-row",
        hide_index=True, width="stretch", height=320, column_order=columns,
        column_config={
            "relation": st.column_config.TextColumn("Relation", width="large"),
            "progress": st.column_config.ProgressColumn(
                "Your progress", min_value=0.0, max_value=1.0, format="percent",
                help="Share of the top abstracts you have labelled"),
            "team progress": st.column_config.ProgressColumn(
                "Team progress", min_value=0.0, max_value=1.0, format="percent",
                help="Share of the top abstracts anyone has labelled"),
        })
    selected = [i for i in event.selection.rows if 0 <= i < len(rows)]
    if not selected:
        st.caption("Select a row to open its relation in Curate.")
        return
    row = rows[selected[0]]
    cols = st.columns([3, 1], vertical_alignment="center")
    cols[0].markdown(f"**{md(row.label)}** · {md(row.query_text)} · {row.todo:d} to label")
    if cols[1].button("Open in Curate", key="wl_open", type="primary"):
        _open_in_curate(schema, row.query_key)


def activity(ctx: AppContext, schema: Schema, rows: list[WorklistRow]) -> None:
    """Labels per day by grade, and each user's progress."""
    import plotly.express as px

    frame = label_activity(ctx.ws, schema.name)
    st.markdown("**Labels per day and grade** (current labels; relabelled versions left out)")
    if frame.empty:
        st.caption("No label on this schema yet.")
        return
    fig = px.bar(html_frame(frame), x="day", y="labels", color="grade",
                 color_discrete_map=GRADE_COLORS, title=f"{html_text(schema.name)} labels")
    fig.update_xaxes(type="date", tickformat="%Y-%m-%d")
    st.plotly_chart(fig, key="wl_activity", width="stretch")
    st.markdown("**Progress per user**")
    st.dataframe(
        progress_by_user(ctx.ws, schema.name, rows), key="wl_users", hide_index=True,
        width="stretch",
        column_config={"worklist progress": st.column_config.ProgressColumn(
            "Worklist progress", min_value=0.0, max_value=1.0, format="percent",
            help="Share of the listed relations' top abstracts this user has labelled")})


def render(ctx: AppContext) -> None:
    schema = pick_schema(ctx)
    retriever = retriever_controls(ctx, schema)
    st.subheader("Worklist")
    show_flash()
    digest = watch_digest(ctx.ws, schema.name)
    if digest:
        watched(ctx, schema, digest)
    choice = _controls()
    ensure_ready(ctx, retriever[0])  # stops with progress or a build button until it is
    rows = rows_for(ctx, schema, retriever, choice)
    if rows:
        st.caption(f"{len(rows):,} relations by {md(PRIORITY_LABELS[choice[0]])} · top "
                   f"{retriever[2]:d} abstracts of {md(retriever[0])}"
                   + (" with entity rerank" if retriever[1] else ""))
        if choice[0] is Priority.NEW_ANSWERS:
            new_answers_note(rows, choice[1])
        table(schema, rows, choice[3])
    else:
        st.info("Every listed relation's top abstracts are labelled: tick Show finished, "
                "raise Relations, or pick another schema or retriever.")
    activity(ctx, schema, rows)


def main() -> None:
    run_page(render)


if __name__ == "__main__":
    main()
