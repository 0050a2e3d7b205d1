"""kbcurate: the curator app (Streamlit). Thin: page setup, sign-in, navigation.

Run with ``kbcurate serve --workspace DIR`` (``streamlit run app_pages/server.py -- --workspace
DIR``: the app plus the route of its sign-in cookie; ``streamlit run app.py`` works too, but a
reload then signs password users out). The pages (``app_pages/curate.py``, ``worklist.py``,
``review.py``, ``evaluate.py``, ``models.py``) draw widgets and call into ``curation/``;
``app_pages/common.py`` holds the caches and the session's context. The folder is not called
``pages/``: Streamlit treats a ``pages/`` folder next to the entry script as old-style multipage
navigation until ``st.navigation`` runs, which would list every module there and open them past
the sign-in gate.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.activation_panel import activation_sidebar
from app_pages.common import (
    READABLE_ERRORS,
    AppContext,
    init_state,
    load_css,
    session_workspace,
    show_error,
    workspace_arg,
)
from app_pages.place import restore_place
from app_pages.retrain_panel import retrain_sidebar
from app_pages.safe import md
from app_pages.signin import gate, sign_out
from curation.access.signin import AuthMode
from curation.access.users import User
from curation.search.session import corpus_counts
from curation.store.config import WORKSPACE_ENV

PAGES = Path(__file__).resolve().parent / "app_pages"


def _workspace_arg() -> str | None:
    """``--workspace DIR`` (after ``--``) or $KBCURATE_WORKSPACE."""
    return workspace_arg()


#: The app's name, said once: at the top of the sidebar's own content (the pages keep the
#: screen for their work; each page names itself in one compact header).
APP_TITLE = "kbcurate: KB curation assistant"
#: The browser tab's icon: an emoji, drawn by the browser. A ``:material/...:`` icon (the pages'
#: own icons included, when no page icon is set) makes the browser fetch the favicon from
#: fonts.gstatic.com, which fails offline.
PAGE_ICON = "🧬"


def _sidebar(user: User, counts: tuple[int, int]) -> None:
    st.sidebar.markdown(f"**{md(user.name)}** · {md(user.role.value)}")
    session = st.session_state.get("auth")
    if getattr(session, "mode", None) is not AuthMode.LOCAL:  # local mode: nobody to sign out
        st.sidebar.button("Sign out", key="signout", on_click=sign_out)
    st.sidebar.caption(f"{counts[0]:,} documents · {counts[1]:,} KB relations")


def main() -> None:
    st.set_page_config(page_title="kbcurate", page_icon=PAGE_ICON, layout="wide")
    init_state()
    load_css()
    st.sidebar.title(APP_TITLE)
    path = _workspace_arg()
    if not path:
        st.info(f"No workspace: start with `kbcurate serve --workspace DIR` or set "
                f"{WORKSPACE_ENV}.")
        st.stop()
    pages = [
        st.Page(PAGES / "curate.py", title="Curate", icon=":material/search:", default=True),
        st.Page(PAGES / "worklist.py", title="Worklist", icon=":material/checklist:"),
        st.Page(PAGES / "review.py", title="Review", icon=":material/fact_check:"),
        st.Page(PAGES / "evaluate.py", title="Evaluate", icon=":material/monitoring:"),
        st.Page(PAGES / "models.py", title="Models", icon=":material/timeline:"),
    ]
    try:
        ws = session_workspace(path)
        # signed out: the pages are registered, hidden, so a deep link keeps its page
        user = gate(ws, on_signed_out=lambda: st.navigation(pages, position="hidden"))
        restore_place()  # a reload or shared link: the URL's schema, relation, retriever
        _sidebar(user, corpus_counts(ws))
    except READABLE_ERRORS as exc:  # library errors, and SQLite errors no layer translated
        show_error(exc, path)
        st.stop()
    nav = st.navigation(pages)
    try:
        retrain_sidebar(AppContext(ws, user))
        activation_sidebar(AppContext(ws, user))
    except READABLE_ERRORS as exc:  # the pages still work when the panel cannot be drawn
        show_error(exc, path)
    nav.run()


if __name__ == "__main__":
    main()
