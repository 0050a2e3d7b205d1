"""What every page shares: the session's workspace and user, process-wide caches, messages.

Models, indexes and the matcher load once per process (``st.cache_resource``), keyed by what
would make them stale (an index's folder and corpus fingerprint). Each browser session gets its own
workspace connection (SQLite transactions must not interleave across sessions). Session state is
initialised only in :func:`init_state`.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from app_pages.safe import md
from curation.access.signin import resolve_user, users_store
from curation.access.users import User
from curation.jobs.queue import Job, cancel_job, get_job, may_cancel
from curation.matching.matcher import EntityMatcher
from curation.ranking.versions import RankerVersion
from curation.search.choices import index_location, parse_retriever_choice
from curation.search.indexing import corpus_fingerprint, index_ready
from curation.search.ranked import RankedSearch, open_ranked
from curation.search.relation_table import curation_order
from curation.search.session import documents_stamp, evidence_levels
from curation.store.config import WORKSPACE_ENV
from curation.store.errors import DATABASE_ERRORS, WorkspaceBusyError, describe_database_error
from curation.store.index_models import check_index_models
from curation.store.labels import Label, LabelPending, Labels
from curation.store.relations import PartialRelation, Relations
from curation.store.workspace import DB_NAME, Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import Schema
from retrievers.base import Retriever
from retrievers.errors import RetrieverError
from retrievers.registry import load_retriever

logger = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def workspace_arg() -> str | None:
    """``--workspace DIR`` after ``--`` on the streamlit command line, else $KBCURATE_WORKSPACE."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--workspace")
    known, _ = parser.parse_known_args(sys.argv[1:])
    return known.workspace or os.environ.get(WORKSPACE_ENV)


def short_hash(text: str) -> str:
    """A short stable digest for widget keys derived from long or odd text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


#: Widget keys whose values survive switching pages.
PERSISTENT_WIDGETS = ("schema", "retriever", "rerank", "top_k", "query_mode", "rel_search",
                      "unlabelled_first", "view_mode", "wl_priority", "wl_limit", "wl_done",
                      "wl_candidates")


def init_state() -> None:
    """The one place session state is initialised (widget defaults and the app's own keys)."""
    defaults: dict[str, Any] = {
        "auth": None,  # curation.access.signin.Session once signed in
        "workspaces": {},  # path -> this session's Workspace connection
        "flash": [],  # (kind, text) messages shown once
        "search_cache": {},  # (schema, query_key, text, retriever, rerank, k) -> SearchResult
        "card_order": {},  # the result cards' order while one result is being labelled
        "retriever": "bm25", "rerank": False, "top_k": 10, "query_mode": "KB relation",
        "rel_search": "", "unlabelled_first": True, "view_mode": "List",
        "wl_limit": 200, "wl_cache": {},  # the Worklist page (app_pages/worklist.py)
        "eval_request": None, "eval_job": None,
        "rv_user": "(all)", "rv_grade": "(all)", "rv_model": "(all)", "rv_since": None,
        "rv_superseded": False,
    }
    for key, value in defaults.items():
        st.session_state.setdefault(key, value)
    # Streamlit drops a widget's state when a run does not draw it (another page is open);
    # writing it back once per run keeps the sidebar choices across page switches.
    for key in PERSISTENT_WIDGETS:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def session_workspace(path: str) -> Workspace:
    """This session's connection to the workspace at ``path`` (opened on first use)."""
    opened: dict[str, Workspace] = st.session_state["workspaces"]
    if path not in opened:
        opened[path] = Workspace.open(path)
    return opened[path]


@dataclass(frozen=True)
class AppContext:
    """What a page needs: the workspace and the signed-in user (role resolved this run)."""

    ws: Workspace
    user: User


def current_user(ws: Workspace) -> User | None:
    """The signed-in user, with the role the users file grants now (never from session state)."""
    return resolve_user(users_store(ws.root), st.session_state.get("auth"),
                        oidc_configured=oidc_configured())


def require_context() -> AppContext:
    """The page context; stops the page when there is no workspace or nobody signed in."""
    path = workspace_arg()
    if not path:
        st.info(f"No workspace: start with `kbcurate serve --workspace DIR` or set "
                f"{WORKSPACE_ENV}.")
        st.stop()
    ws = session_workspace(path)
    user = current_user(ws)
    if user is None:
        st.warning("Sign in first.")
        st.stop()
    return AppContext(ws, user)


def oidc_configured() -> bool:
    """True when secrets.toml has an ``[auth]`` section (Streamlit's OIDC login)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


# -- messages ------------------------------------------------------------------------------------
def flash(kind: str, text: str, where: str = "page") -> None:
    """Queue a message for the next render (callbacks run before the page draws).

    ``text`` is markdown: untrusted parts go through :func:`app_pages.safe.md`. ``where`` names
    the place that shows it (:func:`show_flash` with the same name), so a message appears next
    to the action that caused it."""
    st.session_state["flash"].append((kind, text, where))


def show_flash(where: str = "page") -> None:
    """Show the messages queued for ``where`` once (others wait for their place)."""
    queued = st.session_state["flash"]
    mine = [m for m in queued if (m[2] if len(m) > 2 else "page") == where]
    st.session_state["flash"] = [m for m in queued if m not in mine]
    for kind, text, *_ in mine:
        {"error": st.error, "success": st.success, "warning": st.warning}.get(kind, st.info)(text)


def load_css() -> None:
    """The app's own style sheet (assets/app.css)."""
    path = ASSETS / "app.css"
    if path.is_file():
        st.html(f"<style>{path.read_text(encoding='utf-8')}</style>")


# -- process-wide caches ------------------------------------------------------------------------
def settle_heap(collect: bool = True) -> None:
    """Move what is loaded so far (libraries, indexes, the matcher's caches) out of the cyclic
    garbage collector's way (``gc.freeze``): otherwise a full collection over them pauses the
    server for 100-300 ms every few label clicks. Called after loads and searches, never on
    the label path; ``collect`` first thaws what earlier calls froze and frees the garbage among
    it, so a long-running server does not keep dead search results frozen forever."""
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


@st.cache_resource(show_spinner=False)
def get_matcher() -> EntityMatcher:
    """One entity matcher per process (it caches per-document work)."""
    matcher = EntityMatcher()
    settle_heap()
    return matcher


@st.cache_resource(show_spinner="Loading the index ...", max_entries=8)
def _load_index(_ws: Workspace, folder: str, fingerprint: str) -> Retriever:
    logger.info("loading index %s (%s)", folder, fingerprint[:12])
    check_index_models(_ws, folder)  # a registry version (checksum) or the packaged model
    retriever = load_retriever(folder)
    settle_heap()
    return retriever


@st.cache_data(show_spinner=False, max_entries=16)
def _fingerprint(_ws: Workspace, root: str, stamp: str) -> str:
    return corpus_fingerprint(_ws)


def fingerprint(ws: Workspace) -> str:
    """The corpus fingerprint, recomputed only when documents change."""
    return _fingerprint(ws, str(ws.root), documents_stamp(ws))


def retriever_ready(ws: Workspace, choice: str) -> bool:
    """Whether the index of a retriever menu entry ("bm25", "dense · PO-edel@1") is built."""
    name, options = parse_retriever_choice(choice)
    return index_ready(ws, name, options, fingerprint=fingerprint(ws))


def get_retriever(ws: Workspace, choice: str) -> Retriever:
    """The loaded retriever of a menu entry (callers check :func:`retriever_ready` first)."""
    name, options = parse_retriever_choice(choice)
    return _load_index(ws, str(index_location(ws, name, options)), fingerprint(ws))


@st.cache_resource(show_spinner="Loading the learned ranker ...", max_entries=8)
def _ranked(_ws: Workspace, _schema: Schema, _version: RankerVersion, _bm25: Retriever,
            root: str, schema: str, version: str, fingerprint: str) -> RankedSearch:
    logger.info("loading ranker %s over %s", version, fingerprint[:12])
    ranked = open_ranked(_ws, _schema, _version, _bm25, matcher=get_matcher())
    settle_heap()
    return ranked


def get_ranked(ws: Workspace, schema: Schema, version: RankerVersion,
               bm25: Retriever) -> RankedSearch:
    """The loaded ranker version over the BM25 index, one per process, version and corpus
    state (its feature cache lives as long)."""
    return _ranked(ws, schema, version, bm25, str(ws.root), schema.name, version.id,
                   fingerprint(ws))


@st.cache_resource(show_spinner=False, max_entries=32)
def _relations(_ws: Workspace, root: str, schema: str, filters: str, source: str,
               stamp: str) -> list[PartialRelation]:
    rows = curation_order(Relations(_ws).partial(schema, json.loads(filters),
                                                 source=source or None, limit=2000))
    if not filters.strip("{}"):  # the big unfiltered lists stay for long
        settle_heap()
    return rows


def partial_relations(ws: Workspace, schema: str, filters: dict[str, str],
                      source: str | None = None) -> list[PartialRelation]:
    """Partial relations of a schema, optionally of one KB (cached until the relations change)."""
    return _relations(ws, str(ws.root), schema, json.dumps(filters, sort_keys=True),
                      source or "", Relations(ws).stamp())


@st.cache_data(show_spinner=False, max_entries=32)
def _levels(_ws: Workspace, root: str, schema: str, stamp: str) -> list[str]:
    return evidence_levels(_ws, schema)


def levels(ws: Workspace, schema: str) -> list[str]:
    """Evidence levels of a schema's relations (cached until the relations change)."""
    return _levels(ws, str(ws.root), schema, Relations(ws).stamp())


# -- background jobs ------------------------------------------------------------------------------
@st.fragment(run_every=2.0)
def poll_job(ctx: AppContext, job_id: int, key: str) -> None:
    """A running job's progress, refreshed every 2 s; reruns the page once it has finished."""
    job = job_status(ctx.ws, get_job(ctx.ws, job_id), ctx.user, key=key)
    if job.finished:
        st.rerun(scope="app")


def job_status(ws: Workspace, job: Job, user: User, key: str) -> Job:
    """Progress bar, message and a cancel button for one job; returns its fresh state."""
    job = get_job(ws, job.id)
    started = job.created_at.replace("T", " ")[:16]
    st.progress(min(max(job.progress, 0.0), 1.0),
                text=f"Job {job.id:d} ({md(job.kind)}): {md(job.status.value)}"
                     + ("" if job.finished else f" since {md(started)} UTC")
                     + (f" · {md(job.message)}" if job.message else ""))
    if job.error:
        st.error(md(job.error))
    if not job.finished and may_cancel(job, user) and \
            st.button("Cancel job", key=f"{key}_cancel_{job.id}"):
        try:  # this may run in a fragment, outside the page's own error handling
            cancel_job(ws, job.id, user=user)
        except CurationError as exc:
            st.error(md(exc))
        else:
            st.rerun()
    return job


# -- labels and errors ----------------------------------------------------------------------------
#: Seconds a page run waits for the write lock when it retries pending labels.
PENDING_RETRY_WAIT_S = 0.2


def store_label(ws: Workspace, *, user: User, **label: Any) -> Label | None:
    """:meth:`~curation.store.labels.Labels.record` for a widget callback; the outcome is flashed.

    Returns the stored label, or None when it is pending (kept in the workspace's outbox and
    saved later: a warning says so) or was refused (an error says why)."""
    stored = _stored(ws, user, lambda: [Labels(ws).record(user=user.name, **label)])
    return stored[0] if stored else None


def store_labels(ws: Workspace, *, user: User, **batch: Any) -> list[Label] | None:
    """A bulk grade (:meth:`~curation.store.labels.Labels.record_many`: one batch, which one
    undo takes back) for a widget callback, flashed like :func:`store_label`."""
    return _stored(ws, user, lambda: Labels(ws).record_many(user=user.name, **batch))


def _stored(ws: Workspace, user: User, write: Callable[[], list[Label]]) -> list[Label] | None:
    try:
        waiting = len(Labels(ws).pending())  # written first by Labels.record
        stored = write()
    except LabelPending as exc:
        flash("warning", md(exc))
        return None
    except CurationError as exc:
        flash("error", md(exc))
        return None
    if waiting:
        flash("success", f"{waiting:d} pending label(s) saved.")
    learn_from_labels(ws, stored[0].schema, user)
    return stored


def learn_from_labels(ws: Workspace, schema: str, user: User) -> None:
    """After a stored label: start a ranker round when enough new labels arrived (a job of a
    few seconds; the gate decides whether the next search uses its version). A failure to
    start it never costs the label: it is logged and said once."""
    from curation.training.ranker import maybe_learn

    try:
        job = maybe_learn(ws, schema, user=user)
    except CurationError as exc:
        logger.warning("no ranker round for %s: %s", schema, exc)
        flash("warning", f"The ranker could not start learning from the new labels: {md(exc)}")
        return
    if job is not None:
        flash("info", f"Learning from your labels: the ranker of {md(schema)} retrains in the "
                      f"background (job {job.id:d}); the next search uses it if it passes the "
                      "gate.")


def save_pending_labels(ctx: AppContext) -> None:
    """Retry the labels kept while the workspace was busy (one ``stat`` when there are none).

    Says how many were saved now; while the workspace is still busy they stay pending, quietly,
    and a sidebar caption counts the user's."""
    try:
        saved = Labels(ctx.ws).flush_pending(wait_s=PENDING_RETRY_WAIT_S)
    except WorkspaceBusyError:
        saved = 0  # still busy: they stay pending, counted below
    except CurationError as exc:  # disk full, read-only: they stay pending, and why matters
        saved = 0
        st.warning(f"Pending labels cannot be saved yet: {md(exc)}")
    if saved:
        st.success(f"{saved:d} pending label(s) saved.")
    try:
        waiting = len(Labels(ctx.ws).pending(ctx.user.name))
    except CurationError as exc:
        st.warning(md(exc))
        return
    if waiting:
        st.sidebar.caption(f":material/schedule: {waiting:d} label(s) pending: not saved yet; "
                           "they are kept and saved automatically.")


#: Errors a page shows as one readable message instead of a traceback.
READABLE_ERRORS = (CurationError, RetrieverError, *DATABASE_ERRORS)


def show_error(exc: BaseException, workspace: str | Path | None = None) -> None:
    """``exc`` as one readable error message. A database error that reached the app untranslated
    is described (what happened, what to do) and logged with its traceback for the server log.

    Args:
        exc: One of :data:`READABLE_ERRORS`.
        workspace: The workspace folder, named in database error messages.
    """
    if isinstance(exc, DATABASE_ERRORS):
        logger.error("database error in the app", exc_info=exc)
        text = describe_database_error(exc, Path(workspace) / DB_NAME if workspace else None)
    else:
        text = str(exc)
    st.error(md(text))


def run_page(render: Callable[[AppContext], None]) -> None:
    """Run a page's ``render(ctx)``, showing library and database errors once as a readable
    message."""
    ctx = require_context()
    try:
        render(ctx)
    except READABLE_ERRORS as exc:
        show_error(exc, ctx.ws.root)
