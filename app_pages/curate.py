"""Curate: pick a partial relation, read its ranked, highlighted abstracts, label them.

Flow: schema and retriever in the sidebar -> browse/filter the KB's partial relations (or type
query entities) -> edit the templated query -> ranked abstracts (cached per query in the session,
so a label click re-draws without re-searching) -> labels and answer suggestions.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import (
    AppContext,
    get_matcher,
    get_ranked,
    get_retriever,
    job_status,
    levels,
    partial_relations,
    retriever_ready,
    run_page,
    save_pending_labels,
    settle_heap,
    short_hash,
    show_flash,
)
from app_pages.curate_results import results_panel
from app_pages.curate_screening import screening_panel, shown_doc
from app_pages.curate_suggestions import suggestions_panel
from app_pages.place import DEFAULTS_FOR, place_params, remember_place, take_pending_query
from app_pages.pubmed_panel import pubmed_panel, stale_result, with_badges
from app_pages.safe import md
from app_pages.screening_panel import learned_result, screening_insight
from curation.jobs.queue import JobStatus, get_job
from curation.search.choices import (
    ensure_index_job,
    last_index_job,
    parse_retriever_choice,
    resolve_retriever_choice,
    retriever_choices,
)
from curation.search.cross_scores import on_relation_opened
from curation.search.ranked import (
    default_caption,
    default_for,
    fallback_for,
    is_ranked_choice,
    ranked_choices,
    resolve_ranked_choice,
)
from curation.search.relation_table import relations_frame
from curation.search.session import (
    SearchResult,
    documents_stamp,
    relation_filters,
    relation_label,
    run_search,
    schema_sources,
    schemas_with_relations,
    search_relations,
    typed_partial,
)
from curation.store.entities import Entities
from curation.store.relations import PartialRelation
from kb_sources.errors import CurationError
from kb_sources.schema import Schema

MODES = ("KB relation", "Type entities")
VIEWS = ("List", "Screening")
SHOWN = 500  # relations listed in the table and the picker
CACHED_SEARCHES = 16
KNOWN_SHOWN = 8  # known answers named under the query


ALL_KBS = "(all)"


def pick_schema(ctx: AppContext) -> Schema:
    schemas = ctx.ws.schemas()
    names = [n for n in schemas_with_relations(ctx.ws) if n in schemas] or list(schemas)
    names.sort(key=lambda n: n != "PO")  # the CIViC schema first when present
    if st.session_state.get("schema") not in names:
        st.session_state["schema"] = names[0]
    name = st.sidebar.selectbox("Relation schema", names, key="schema")
    st.sidebar.caption(md(schemas[name].description))
    sources = schema_sources(ctx.ws, name)
    if len(sources) > 1:
        st.sidebar.selectbox("Knowledge base", [ALL_KBS, *sources], key=f"kb_{name}")
    return schemas[name]


def retriever_controls(ctx: AppContext, schema: Schema) -> tuple[str, bool, int]:
    """Retriever, rerank and depth in the sidebar. Opening a schema, or a change of its default
    (:func:`~curation.search.ranked.default_for`) while open, selects the default unless the URL
    named a retriever; the caption says what the default is and why."""
    default = default_for(ctx.ws, schema.name)
    choices = [*ranked_choices(ctx.ws, schema.name), *retriever_choices(ctx.ws, schema.name)]
    marker = (schema.name, default.choice, default.rerank)
    if st.session_state.get(DEFAULTS_FOR) == schema.name:  # a link named the retriever: it wins
        st.session_state[DEFAULTS_FOR] = marker  # ... until the default changes
    if st.session_state.get(DEFAULTS_FOR) != marker:
        st.session_state[DEFAULTS_FOR] = marker
        if default.choice in choices:
            st.session_state["retriever"], st.session_state["rerank"] = (default.choice,
                                                                          default.rerank)
    if st.session_state.get("retriever") not in choices:  # a version of another schema
        st.session_state["retriever"] = default.choice if default.choice in choices else "bm25"
    name = st.sidebar.selectbox("Retriever / model version", choices, key="retriever",
                                help="ranked: the learned ranker (retrains itself after every "
                                     "20 labels); dense · VERSION: trained model versions "
                                     "(kbcurate train / models)")
    ranked = is_ranked_choice(name)
    rerank = st.sidebar.checkbox("Entity-aware rerank", key="rerank", disabled=ranked,
                                 help="Reorder the top hits by how many query entities they "
                                      "name (the learned ranker has this built in)")
    st.sidebar.caption(md(default_caption(ctx.ws, schema.name, default)))
    if default.notice:  # the active ranker cannot be used: say so, and what an admin can do
        st.sidebar.warning(md(default.notice))
    k = st.sidebar.slider("Abstracts to show", 5, 50, step=5, key="top_k")
    # "dense · active" / "hybrid · active" pinned to the active version now (its own index)
    pinned = name if ranked else resolve_retriever_choice(ctx.ws, schema.name, name)
    return pinned, rerank and not ranked, k


def head_row(schema: Schema) -> tuple[str, str, str]:
    """The page's one header row: its name, where the query comes from, the relation search
    (KB relations) and the view (list or screening). Returns (mode, search text, view)."""
    search = ""
    with st.container(horizontal=True, vertical_alignment="center", key="curate_head"):
        st.subheader("Curate", width="content")
        mode = st.radio("Query from", MODES, key="query_mode", horizontal=True,
                        label_visibility="collapsed")
        if mode == MODES[0]:
            search = st.text_input("Search relations", key="rel_search",
                                   label_visibility="collapsed", icon=":material/search:",
                                   placeholder="Search relations: "
                                               + ", ".join(schema.slot_names) + " ...")
        view = st.segmented_control("View", VIEWS, key="view_mode",
                                    label_visibility="collapsed",
                                    help="Screening: one abstract at a time, labelled with the "
                                         "keys 1 2 3 0, N note, U undo, J/K next/previous")
    return mode, search, view or VIEWS[0]


def typed_relation(ctx: AppContext, schema: Schema) -> tuple[PartialRelation, str]:
    """The partial relation of the entities typed in one row, and the query text beside them."""
    slots = schema.query_slots
    cols = st.columns([*([1] * len(slots)), 2], vertical_alignment="bottom")
    values = {s: cols[i].text_input(md(s.capitalize()), key=f"typed_{schema.name}_{s}")
              for i, s in enumerate(slots)}
    if not any(v.strip() for v in values.values()):
        st.info(f"Type {md(', '.join(slots))} to build a query.")
        st.stop()
    partial = typed_partial(ctx.ws, schema, values)
    with cols[-1]:
        text = edit_query(schema, partial)
    resolved = "; ".join(_resolution(ctx, partial, s, v) for s, v in values.items() if v.strip())
    st.caption(md(f"Resolved: {resolved} · {known_caption(schema, partial)}"))
    return partial, text


def kb_relation(ctx: AppContext, schema: Schema, search: str) -> tuple[PartialRelation, str]:
    """A KB partial relation (the table in an expander, the picker) and its query text."""
    rows = _browse(ctx, schema, search)
    listed = rows[:SHOWN]
    pick_key = f"relation_pick_{schema.name}"
    wanted = st.session_state.get(pick_key)
    if wanted and all(p.query_key != wanted for p in listed):  # a link to a relation further down
        listed += [p for p in rows[SHOWN:] if p.query_key == wanted][:1]
    keys = [p.query_key for p in listed]
    by_key = {p.query_key: p for p in listed}
    if st.session_state.get(pick_key) not in by_key:
        st.session_state[pick_key] = keys[0]
    pick, query = st.columns([3, 2], vertical_alignment="bottom")
    key = pick.selectbox("Partial relation (answer hidden)", keys, key=pick_key,
                         format_func=lambda k: relation_label(by_key[k], schema))
    partial = by_key[key]
    with query:
        text = edit_query(schema, partial)
    st.caption(md(known_caption(schema, partial)))
    return partial, text


def _resolution(ctx: AppContext, partial: PartialRelation, slot: str, typed: str) -> str:
    """How one typed entity was read: the KB entity it resolved to, or unknown to the KB
    (plain text: the caller escapes it)."""
    entity = partial.query[slot][0]
    if not Entities(ctx.ws).exists(entity.key):
        return f"{slot} {typed.strip()} (not in the KB: matched as typed)"
    return f"{slot} {typed.strip()} → {entity.text}"


def _browse(ctx: AppContext, schema: Schema, search: str) -> list[PartialRelation]:
    """The relations matching the search and filters; the table and the filters sit in an
    expander whose label counts them. Stops the page when nothing matches."""
    level_key = f"flt_{schema.name}_level"
    values = {s: str(st.session_state.get(f"flt_{schema.name}_{s}") or "")
              for s in schema.slot_names}  # the filters' values before they are drawn below
    level = st.session_state.get(level_key) or "(any)"
    filters = relation_filters(schema, values, None if level == "(any)" else level)
    source = st.session_state.get(f"kb_{schema.name}", ALL_KBS)
    rows = search_relations(partial_relations(ctx.ws, schema.name, filters,
                                              None if source == ALL_KBS else source), search)
    count = f"{len(rows):,} partial relations" + (f" (first {SHOWN} listed)"
                                                   if len(rows) > SHOWN else "")
    if filters:
        count += " · filtered by " + ", ".join(f"{k} {v}" for k, v in filters.items())
    with st.expander(f"Relation table and filters · {md(count)}", key="relations_box"):
        cols = st.columns(len(schema.slot_names) + 1)
        for i, slot in enumerate(schema.slot_names):
            cols[i].text_input(md(slot.capitalize()), key=f"flt_{schema.name}_{slot}")
        known = levels(ctx.ws, schema.name)
        cols[-1].selectbox("Evidence level", ["(any)", *known], key=level_key,
                           disabled=not known)
        table_key = f"relations_table_{schema.name}"
        if rows:
            st.dataframe(relations_frame(rows[:SHOWN], schema.answer), hide_index=True,
                         height=250, key=table_key, width="stretch", on_select="rerun",
                         selection_mode="single-row", column_config=_table_columns(schema))
    if not rows:
        st.info("No partial relation matches. Clear the search or filters, or import a KB.")
        st.stop()
    _select_clicked_row(table_key, rows[:SHOWN], f"relation_pick_{schema.name}")
    return rows


def _table_columns(schema: Schema) -> dict[str, object]:
    """Widths that show whole entity names ("V600E/K and AMPLIFICATION"), short headers."""
    columns: dict[str, object] = {slot: st.column_config.TextColumn(slot, width="medium")
                                  for slot in schema.slot_names if slot != schema.answer}
    columns[f"known {schema.answer}"] = st.column_config.TextColumn(
        f"known {schema.answer}", width="large", help="The first five known answers")
    columns["n_answers"] = st.column_config.NumberColumn("answers", width="small")
    columns["n_pmids"] = st.column_config.NumberColumn("PMIDs", width="small")
    columns["sources"] = st.column_config.TextColumn("KB", width="small")
    return columns


def _select_clicked_row(table_key: str, shown: list[PartialRelation], pick_key: str) -> None:
    """A click on a table row picks that relation (once per click: the picker below stays free
    to choose another one afterwards)."""
    try:
        rows = list(st.session_state[table_key]["selection"]["rows"])
    except (KeyError, TypeError):  # nothing selected yet
        rows = []
    applied_key = f"{table_key}_applied"
    clicked = (rows[0], shown[rows[0]].query_key) if rows and rows[0] < len(shown) else None
    if clicked is not None and st.session_state.get(applied_key) != clicked:
        st.session_state[pick_key] = clicked[1]
    st.session_state[applied_key] = clicked


def edit_query(schema: Schema, partial: PartialRelation) -> str:
    default = partial.render(schema).text
    key = f"qtext_{schema.name}_{short_hash(partial.query_key)}"
    take_pending_query(key)
    text = st.text_input("Query (edit freely)", value=default, key=key)
    return text.strip()


def known_caption(schema: Schema, partial: PartialRelation) -> str:
    """The KB's known answers and cited PMIDs of the relation (plain text: the caller escapes
    it)."""
    answers = partial.answer_texts()
    known = ", ".join(answers[:KNOWN_SHOWN]) or "none"
    if len(answers) > KNOWN_SHOWN:
        known += f" and {len(answers) - KNOWN_SHOWN} more"
    return f"Known {schema.answer} in the KB: {known} · {len(partial.pmids)} cited PMIDs"


def ensure_ready(ctx: AppContext, name: str) -> None:
    """Stop the page with visible progress until the retriever's index is built (in a job);
    the learned ranker needs the BM25 index."""
    name = "bm25" if is_ranked_choice(name) else name
    if retriever_ready(ctx.ws, name):
        return
    base, options = parse_retriever_choice(name)
    job = last_index_job(ctx.ws, base, options)
    if job is not None and not job.finished:
        st.info(f"Building the {md(name)} index in the background; results appear when it is "
                "ready. The rest of the app keeps working.")
        _index_progress(ctx, job.id)
        st.stop()
    if job is not None and job.status is JobStatus.FAILED:
        st.error(f"Building the {md(name)} index failed: {md(job.error)}")
    elif name == "bm25" and (job is None or job.status is JobStatus.DONE):  # quick: no asking
        ensure_index_job(ctx.ws, base, options, user=ctx.user)
        st.rerun()
    if st.button(f"Build the {md(name)} index in the background", key="build_index"):
        ensure_index_job(ctx.ws, base, options, user=ctx.user)
        st.rerun()
    st.info(f"The {md(name)} index is not built for the current documents yet.")
    st.stop()


@st.fragment(run_every=1.5)
def _index_progress(ctx: AppContext, job_id: int) -> None:
    job = job_status(ctx.ws, get_job(ctx.ws, job_id), ctx.user, key="index_job")
    if job.finished:
        st.rerun(scope="app")


def search(ctx: AppContext, schema: Schema, partial: PartialRelation, text: str,
           retriever: tuple[str, bool, int]) -> SearchResult:
    """Ranked abstracts for the query, from the session cache when this query ran before."""
    name, rerank, k = retriever
    version, ranked = None, None
    if is_ranked_choice(name):
        try:  # pinned now: a promotion during the search changes the next one
            version = resolve_ranked_choice(ctx.ws, schema.name, name)
            ranked = get_ranked(ctx.ws, schema, version, get_retriever(ctx.ws, "bm25"))
        except CurationError as exc:  # gone or damaged: fall back, and say so
            fallback = fallback_for(ctx.ws, schema.name)
            version, name, rerank = None, fallback.choice, fallback.rerank
            if not retriever_ready(ctx.ws, name):
                name, rerank = "bm25", True
            st.warning(md(f"{str(exc).rstrip('.')}. This search uses {name}"
                          f"{' + rerank' if rerank else ''} instead."))
    cache: dict = st.session_state["search_cache"]
    key = (schema.name, partial.query_key, text, version.id if version else name, rerank, k,
           documents_stamp(ctx.ws))  # new documents (a PubMed search): search again
    if key not in cache:  # first search of it: the cross-encoder reads it in the background
        on_relation_opened(ctx.ws, schema.name, partial.query_key, text, user=ctx.user,
                           cross=ranked.context.cross if ranked is not None else None)
        with st.spinner("Ranking abstracts ..."):
            if ranked is not None:
                cache[key] = run_search(ctx.ws, get_retriever(ctx.ws, "bm25"), schema, partial,
                                        text, k, matcher=get_matcher(), ranked=ranked)
            else:
                cache[key] = run_search(ctx.ws, get_retriever(ctx.ws, name), schema, partial,
                                        text, k, matcher=get_matcher(), rerank=rerank)
            cache[key] = with_badges(ctx, cache[key], partial)
        settle_heap(collect=False)  # the matcher's new cache entries live on
        while len(cache) > CACHED_SEARCHES:
            cache.pop(next(iter(cache)))
    return cache[key]


def _place(schema: Schema, partial: PartialRelation, text: str,
           retriever: tuple[str, bool, int], screening: bool) -> dict[str, str]:
    """This page's place for the URL (app_pages/place.py); screening: the abstract shown."""
    _, rerank, k = retriever
    name = st.session_state.get("retriever") or retriever[0]  # links keep "dense · active"
    edited = text if text != partial.render(schema).text.strip() else None
    view = {"screening": screening, "doc": shown_doc() if screening else None}
    if st.session_state.get("query_mode") == MODES[1]:
        typed = {s: st.session_state.get(f"typed_{schema.name}_{s}", "")
                 for s in schema.query_slots}
        return place_params(schema=schema.name, retriever=name, rerank=rerank, k=k,
                            typed=typed, query=edited, **view)
    return place_params(schema=schema.name, retriever=name, rerank=rerank, k=k,
                        relation=partial.query_key, query=edited, **view)


def render(ctx: AppContext) -> None:
    schema = pick_schema(ctx)
    retriever = retriever_controls(ctx, schema)
    mode, search_text, view = head_row(schema)
    show_flash()
    save_pending_labels(ctx)  # labels kept while the workspace was busy
    if mode == MODES[1]:
        partial, text = typed_relation(ctx, schema)
    else:
        partial, text = kb_relation(ctx, schema, search_text)
    if not text:  # no results (and so no label) for a query nobody can see
        st.info("The query is empty, so nothing is ranked and nothing can be labelled. Type a "
                "query, or pick the relation again to restore its template.")
        st.stop()
    screening = view == VIEWS[1]
    place = _place(schema, partial, text, retriever, screening)
    remember_place(place)
    pubmed_panel(ctx, schema, partial, text)
    result = stale_result(ctx, schema, partial, text, retriever[0])
    if result is None:
        ensure_ready(ctx, retriever[0])
        result = search(ctx, schema, partial, text, retriever)
    # issues 38, 43: the queue of what ranks the page, its order, when to stop; keywords
    result = learned_result(ctx, schema, partial, text, result, retriever[:2])
    left, right = st.columns([2.4, 1], gap="medium")
    with left:
        if screening:
            screening_panel(ctx, schema, partial, result, place)
        else:
            results_panel(ctx, schema, partial, result)
    with right:
        screening_insight(ctx, schema, partial)  # found, left, when to stop (issue 38)
        suggestions_panel(ctx, schema, partial, result)


def main() -> None:
    run_page(render)


if __name__ == "__main__":
    main()
