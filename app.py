"""kbcurate: the curator app (Streamlit). Thin: page setup, sign-in, navigation.

Run with ``kbcurate serve --workspace DIR`` (or ``streamlit run app.py -- --workspace DIR``).
The pages (``app_pages/curate.py``, ``app_pages/review.py``, ``app_pages/evaluate.py``) draw
widgets and call into ``curation/``; ``app_pages/common.py`` holds the caches and the session's
context. The folder is not called ``pages/``: Streamlit treats a ``pages/`` folder next to the
entry script as old-style multipage navigation until ``st.navigation`` runs, which would list every
module there and open them past the sign-in gate.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.common import init_state, load_css, plain, session_workspace, workspace_arg
from app_pages.signin import gate, sign_out
from curation.access.users import User
from curation.search.session import corpus_counts
from curation.store.config import WORKSPACE_ENV
from kb_sources.errors import CurationError

PAGES = Path(__file__).resolve().parent / "app_pages"


def _workspace_arg() -> str | None:
    """``--workspace DIR`` (after ``--``) or $KBCURATE_WORKSPACE."""
    return workspace_arg()


def _sidebar(user: User, counts: tuple[int, int]) -> None:
    st.sidebar.markdown(f"**{plain(user.name)}** · {user.role.value}")
    st.sidebar.button("Sign out", key="signout", on_click=sign_out)
    st.sidebar.caption(f"{counts[0]:,} documents · {counts[1]:,} KB relations")


def main() -> None:
    st.set_page_config(page_title="kbcurate", layout="wide")
    init_state()
    load_css()
    st.title("kbcurate: KB curation assistant")
    path = _workspace_arg()
    if not path:
        st.info(f"No workspace: start with `kbcurate serve --workspace DIR` or set "
                f"{WORKSPACE_ENV}.")
        st.stop()
    try:
        ws = session_workspace(path)
        user = gate(ws)
        _sidebar(user, corpus_counts(ws))
    except CurationError as exc:
        st.error(str(exc))
        st.stop()
    nav = st.navigation([
        st.Page(PAGES / "curate.py", title="Curate", icon=":material/search:", default=True),
        st.Page(PAGES / "review.py", title="Review", icon=":material/fact_check:"),
        st.Page(PAGES / "evaluate.py", title="Evaluate", icon=":material/monitoring:"),
    ])
    nav.run()


if __name__ == "__main__":
    main()
