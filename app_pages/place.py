"""The curator's place in the URL: a reload or a shared link opens the same query.

The Curate page writes its state into the query string (``st.query_params``) on every run:
``schema``, ``retriever``, ``rerank``, ``k``, and either ``relation`` (a KB partial relation's
key) or ``mode=typed`` with one ``t.<slot>`` per typed entity, plus ``q`` when the query text was
edited away from its template; in screening mode also ``view=screening`` and ``doc`` (the
abstract on screen, by document id: its position in the queue changes as labels reorder it, the
id does not). The page itself is the URL's path (``/review``, ...), which
``st.navigation`` keeps. On the first signed-in run of a browser session, :func:`restore_place`
copies those values into the widgets' session-state keys; the pages validate them as they would
any stale value (an unknown schema, retriever or relation falls back to the default), so a
hand-edited URL can only pick among what the page offers.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

#: Query-string keys the app owns.
KEYS = ("schema", "retriever", "rerank", "k", "relation", "mode", "q", "view", "doc")
TYPED_PREFIX = "t."
TYPED_MODE = "typed"
#: Longest value taken from the URL (typed entities, edited query text).
MAX_VALUE = 500
RESTORED = "place_restored"
PENDING_QUERY = "place_query"
MODES = ("KB relation", "Type entities")  # app_pages/curate.py MODES
DEFAULTS_FOR = "defaults_for"  # app_pages/curate.py DEFAULTS_FOR
SCREENING_VIEW = "screening"
VIEW_MODES = ("List", "Screening")  # app_pages/curate.py VIEWS
#: The abstract a link or reload opens in screening mode (taken by app_pages/curate_screening.py).
PENDING_DOC = "place_doc"


def place_state(params: Mapping[str, str]) -> dict[str, object]:
    """Session-state values for the query-string ``params`` (pure: tested without Streamlit).

    Returns the widget keys to set; unknown or malformed values are left out.
    """
    out: dict[str, object] = {}
    get = {k: str(v)[:MAX_VALUE] for k, v in params.items()}
    schema = get.get("schema", "").strip()
    if not schema:
        return out
    out["schema"] = schema
    if get.get("retriever"):
        out["retriever"] = get["retriever"]
    if get.get("rerank") in ("0", "1"):
        out["rerank"] = get["rerank"] == "1"
    k = get.get("k", "")
    if k.isdigit() and 5 <= int(k) <= 50 and int(k) % 5 == 0:
        out["top_k"] = int(k)
    if get.get("mode") == TYPED_MODE:
        out["query_mode"] = MODES[1]
        for key, value in get.items():
            if key.startswith(TYPED_PREFIX) and len(key) > len(TYPED_PREFIX):
                out[f"typed_{schema}_{key[len(TYPED_PREFIX):]}"] = value
    elif get.get("relation"):
        out["query_mode"] = MODES[0]
        out[f"relation_pick_{schema}"] = get["relation"]
    if get.get("q", "").strip():
        out[PENDING_QUERY] = get["q"]
    if get.get("view") == SCREENING_VIEW:
        out["view_mode"] = VIEW_MODES[1]
        if get.get("doc", "").strip():
            out[PENDING_DOC] = get["doc"].strip()
    return out


def place_params(*, schema: str, retriever: str, rerank: bool, k: int,
                 relation: str | None = None, typed: Mapping[str, str] | None = None,
                 query: str | None = None, screening: bool = False,
                 doc: str | None = None) -> dict[str, str]:
    """The query string for a place on the Curate page (inverse of :func:`place_state`);
    ``screening`` with the ``doc`` on screen for screening mode."""
    out = {"schema": schema, "retriever": retriever, "rerank": "1" if rerank else "0",
           "k": str(k)}
    if typed is not None:
        out["mode"] = TYPED_MODE
        out.update({f"{TYPED_PREFIX}{slot}": value[:MAX_VALUE]
                    for slot, value in typed.items() if value.strip()})
    elif relation is not None:
        out["relation"] = relation
    if query is not None:
        out["q"] = query[:MAX_VALUE]
    if screening:
        out["view"] = SCREENING_VIEW
        if doc:
            out["doc"] = doc[:MAX_VALUE]
    return out


def restore_place() -> None:
    """Once per browser session (after sign-in): the URL's place into the widgets' keys."""
    if st.session_state.get(RESTORED):
        return
    st.session_state[RESTORED] = True
    params = {k: st.query_params.get(k) for k in st.query_params.keys()}  # noqa: SIM118
    values = place_state({k: v for k, v in params.items() if v is not None})
    for key, value in values.items():
        st.session_state[key] = value
    if "retriever" in values:  # the link's retriever wins over the schema's default ranking
        st.session_state[DEFAULTS_FOR] = values["schema"]


def remember_place(params: Mapping[str, str]) -> None:
    """Write the Curate page's place into the URL when it changed (no rerun is triggered)."""
    current = {k: st.query_params.get(k) for k in st.query_params.keys()}  # noqa: SIM118
    if current != dict(params):
        st.query_params.from_dict(dict(params))


def take_pending_doc() -> str | None:
    """The document id a link or reload asked screening mode to open (once), or None."""
    return st.session_state.pop(PENDING_DOC, None)


def take_pending_query(widget_key: str) -> None:
    """An edited query text from the URL goes into the query field the first time it is drawn."""
    pending = st.session_state.pop(PENDING_QUERY, None)
    if pending is not None and widget_key not in st.session_state:
        st.session_state[widget_key] = pending
