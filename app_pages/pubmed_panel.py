"""The Curate page's "Search PubMed" panel for the relation in view, and what the page shows
while a search refreshes the indexes.

The panel shows the Entrez query built from the relation (editable), how many ids to take, and
a button that submits a ``pubmed_search`` job (:func:`curation.pubmed.jobs.submit_pubmed_search`:
curators and admins). While the job runs, its progress bar (found / fetched / imported /
indexed) polls in a fragment; the rest of the page keeps working. A failed search (PubMed
unreachable, an E-utilities error) is a warning in the panel, nothing more.

Once a search has imported, the BM25 index covers the old corpus until the job has refreshed
it: meanwhile the page shows the results cached before (:func:`stale_result`) with a caption,
instead of waiting on the index. Cards of abstracts a search imported carry "from PubMed, DATE",
and those a watch of the relation found new "NEW since DATE" (:func:`with_badges`).

Without an NCBI contact email (NCBI asks for one with every request) the panel offers no search:
an admin gets a form that stores the email and an optional API key
(:func:`curation.pubmed.ncbi.set_ncbi_contact`: admins only, audited; the key is never shown
again), others a line saying that an admin sets it and how.

"Watch this relation" (curators and admins) adds or removes the user's watch of the relation in
view with the query in the box (:mod:`curation.pubmed.watch`); its runs (``kbcurate watch run``
from cron, or a ``watch`` job) list what is new on the Worklist.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import streamlit as st

from app_pages.common import (
    AppContext,
    flash,
    poll_job,
    retriever_ready,
    short_hash,
    show_flash,
)
from app_pages.safe import md
from curation.access.adjudication import REVIEWER_ROLES
from curation.access.users import User
from curation.jobs.queue import JobStatus, duplicate_note, list_jobs
from curation.pubmed.jobs import JOB_KIND, relation_slots, search_job, submit_pubmed_search
from curation.pubmed.ncbi import ncbi_contact, set_ncbi_contact
from curation.pubmed.query import partial_pubmed_query
from curation.pubmed.watch import add_watch, remove_watch
from curation.pubmed.watch_digest import new_since
from curation.search.cards import with_fetch_dates, with_new_since
from curation.search.ranked import is_ranked_choice
from curation.search.session import SearchResult
from curation.store.pubmed_hits import PubmedHits
from curation.store.relations import PartialRelation
from curation.store.watches import Watches
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.fetch import ESEARCH_MAX
from kb_sources.schema import Schema

PANEL = "pubmed"  # the flash place of the panel's messages
VIEW_KEY = "pubmed_view"  # (schema, query key) of the relation in view, for with_badges


def pubmed_panel(ctx: AppContext, schema: Schema, partial: PartialRelation, text: str) -> None:
    """The "Search PubMed" expander for the relation in view (see the module docstring)."""
    st.session_state[VIEW_KEY] = (schema.name, partial.query_key)
    slots = relation_slots(schema, partial)
    if not slots:
        return
    job = search_job(ctx.ws, schema.name, slots)
    running = job is not None and not job.finished
    with st.expander("Search PubMed for this relation", expanded=running, key="pubmed_box",
                     icon=":material/travel_explore:"):
        show_flash(PANEL)
        if running:
            if st.session_state.get("pubmed_search"):  # clicked as another's search started
                st.info(md(_joined(replace(job, joined=True))))
            poll_job(ctx, job.id, key="pubmed_job")
            return
        if job is not None:
            _last_outcome(job)
        _search_form(ctx, schema, partial, slots, text)


def _last_outcome(job: Any) -> None:
    """What the relation's last search did, or why it failed (PubMed down: a warning)."""
    if job.status is JobStatus.DONE:
        r = job.result
        st.success(f"Last PubMed search ({md(job.updated_at[:16].replace('T', ' '))} UTC): "
                   f"found {int(r.get('count', 0)):,}, fetched {int(r.get('fetched', 0)):,}, "
                   f"imported {int(r.get('imported', 0)):,} new abstracts; "
                   f"{int(r.get('from_pubmed_in_top', 0)):,} of the top "
                   f"{len(r.get('hits', [])):,} came from PubMed.")
    elif job.status is JobStatus.FAILED:
        st.warning(f"The last PubMed search failed: {md(job.error)}. PubMed may be unreachable; "
                   "everything else on this page keeps working. Try again later.")
    elif job.status is JobStatus.CANCELLED:
        st.info("The last PubMed search was cancelled; nothing half-fetched was imported.")


def _search_form(ctx: AppContext, schema: Schema, partial: PartialRelation,
                 slots: dict[str, str], text: str) -> None:
    """The query (editable), how many ids to take and the button (curators and admins)."""
    if ctx.user.role not in REVIEWER_ROLES:
        st.caption("Searching PubMed needs the curator or admin role.")
        return
    contact, _ = ncbi_contact(ctx.ws)
    if not contact.email:
        _contact_needed(ctx)
        return
    key = f"pmq_{schema.name}_{short_hash(partial.query_key)}"
    if key not in st.session_state:
        try:
            st.session_state[key] = partial_pubmed_query(ctx.ws, partial).text
        except CurationError as exc:
            st.warning(f"The PubMed query could not be built: {md(exc)}")
            return
    st.text_area("PubMed query (edit freely)", key=key, height=90)
    watch_toggle(ctx, schema, partial, slots, st.session_state[key])
    cols = st.columns([1, 3], vertical_alignment="bottom")
    hits = cols[0].number_input("Take", 1, ESEARCH_MAX, 200, step=100, key="pubmed_max",
                                help="PubMed ids to take, in PubMed's relevance order")
    cols[1].caption(md(f"NCBI contact: {contact.describe()}"))
    if st.button("Search PubMed", key="pubmed_search", icon=":material/search:"):
        try:
            job = submit_pubmed_search(ctx.ws, schema, slots, user=ctx.user,
                                       query=st.session_state[key], max_hits=int(hits),
                                       rank_text=text)
        except CurationError as exc:
            flash("error", md(exc), PANEL)
        else:
            flash("info", md(_joined(job)) if job.joined else
                  f"Searching PubMed in the background (job {job.id:d}); new abstracts join "
                  "the list when they are indexed.", PANEL)
        st.rerun()


def _contact_needed(ctx: AppContext) -> None:
    """No NCBI contact email yet: an admin gets a small form that stores one (and an optional
    API key), everyone else a line saying who sets it and how."""
    if not ctx.user.is_admin:
        st.info("PubMed search needs an NCBI contact email first: NCBI asks for one with every "
                "request. An admin sets it here on this panel, or with `kbcurate pubmed "
                "settings --email ADDRESS` (or NCBI_EMAIL in the server's environment).")
        return
    st.info("PubMed search needs an NCBI contact email first: NCBI asks for one with every "
            "request, to reach you about your searches. Set it for this workspace:")
    with st.form("ncbi_contact", border=False):
        st.text_input("NCBI contact email", key="ncbi_email", placeholder="you@lab.org")
        st.text_input("NCBI API key (optional)", key="ncbi_api_key", type="password",
                      help="Raises NCBI's limit from 3 to 10 requests a second; stored in the "
                           "workspace and never shown again")
        st.form_submit_button("Save NCBI contact", key="ncbi_save", on_click=_save_contact,
                              args=(ctx.ws, ctx.user))


def _save_contact(ws: Workspace, user: User) -> None:
    """Store the contact the admin typed (the library checks the role and the address and
    audits the key as "set", never its value); the key field is emptied either way."""
    email = str(st.session_state.get("ncbi_email") or "").strip()
    api_key = str(st.session_state.get("ncbi_api_key") or "").strip()
    st.session_state["ncbi_api_key"] = ""
    try:
        set_ncbi_contact(ws, user=user, email=email, api_key=api_key or None)
    except CurationError as exc:
        flash("error", md(exc), PANEL)
        return
    st.session_state["ncbi_email"] = ""
    flash("success", f"Saved the NCBI contact email {md(email)}"
                     + ("; API key set." if api_key else "."), PANEL)


def _joined(job: Any) -> str:
    """What a curator who asked for a search that another job already runs is told (plain
    text: the caller escapes it)."""
    return (f"This relation's PubMed search (job {job.id:d}) is {duplicate_note(job)}; it "
            "was not started twice: its results show here when it ends.")


def refreshing(ctx: AppContext) -> bool:
    """Whether a PubMed search of this workspace is running (it may be refreshing the index)."""
    return any(not job.finished for job in list_jobs(ctx.ws, JOB_KIND, limit=5))


def stale_result(ctx: AppContext, schema: Schema, partial: PartialRelation, text: str,
                 name: str) -> SearchResult | None:
    """While a PubMed search has imported but not yet indexed (the retriever's index is not
    ready): the newest result of this query cached before, with a caption, or an info and the
    page stops when there is none. None otherwise (the page searches as usual)."""
    index = "bm25" if is_ranked_choice(name) else name
    if retriever_ready(ctx.ws, index) or not refreshing(ctx):
        return None
    cache: dict = st.session_state["search_cache"]
    for key in reversed(list(cache)):
        if key[:3] == (schema.name, partial.query_key, text):
            st.caption("A PubMed search is refreshing the index: this list is from before it; "
                       "it updates when the new abstracts are indexed.")
            return cache[key]
    st.info("A PubMed search is adding abstracts and refreshing the index; the ranked list "
            "appears when it is ready. The rest of the app keeps working.")
    st.stop()


def watch_toggle(ctx: AppContext, schema: Schema, partial: PartialRelation,
                 slots: dict[str, str], query: str) -> None:
    """"Watch this relation": the user's watch of the relation in view, on or off (the toggle
    follows the database when a watch changed elsewhere, e.g. ``kbcurate watch remove``)."""
    watches = Watches(ctx.ws).of_relation(schema.name, partial.query_key)
    mine = next((w for w in watches if w.owner == ctx.user.name), None)
    key = f"watch_{schema.name}_{short_hash(partial.query_key)}"
    if st.session_state.get(f"{key}_seen") != (mine is not None):
        st.session_state[key] = st.session_state[f"{key}_seen"] = mine is not None
    cols = st.columns([1, 3], vertical_alignment="center")
    wanted = cols[0].toggle("Watch this relation", key=key,
                            help="Each run of the watch (daily from cron: `kbcurate watch run`) "
                                 "fetches and ranks what PubMed added since the last run, "
                                 "with the query above; the Worklist lists what is new")
    others = sorted(w.owner for w in watches if w.owner != ctx.user.name)
    note = [f"watched since {mine.created_at[:10]}, next run from {mine.mindate}"] if mine \
        else []
    if others:
        note.append("also watched by " + ", ".join(others))
    if note:
        cols[1].caption(md("; ".join(note)))
    if wanted == (mine is not None):
        return
    st.session_state[f"{key}_seen"] = None  # show the database's state after the change
    try:
        if wanted:
            add_watch(ctx.ws, ctx.user, schema.name, slots=slots, query=query)
            flash("success", "Watching this relation: its new abstracts will be listed on the "
                             "Worklist after each run.", PANEL)
        elif mine is not None:
            remove_watch(ctx.ws, ctx.user, mine.id)
            flash("info", "No longer watching this relation.", PANEL)
    except CurationError as exc:
        flash("error", md(exc), PANEL)
    st.rerun()


def with_badges(ctx: AppContext, result: SearchResult,
                partial: PartialRelation | None = None) -> SearchResult:
    """``result`` with the fetch date on the cards of abstracts a PubMed search imported and
    "NEW since DATE" on those a watch of the relation found new (the relation is ``partial``,
    else the one :func:`pubmed_panel` last showed)."""
    docs = result.docs
    dates = PubmedHits(ctx.ws).fetch_dates(d.doc_id for d in docs)
    if dates:
        docs = with_fetch_dates(docs, dates)
    view = (partial.schema, partial.query_key) if partial is not None else \
        st.session_state.get(VIEW_KEY)
    if view:
        new = new_since(ctx.ws, view[0], view[1], (d.doc_id for d in docs))
        if new:
            docs = with_new_since(docs, new)
    return result if docs is result.docs else replace(result, docs=docs)
