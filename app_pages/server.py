"""The app as an ASGI application: Streamlit (``app.py``) plus the session-cookie route.

``kbcurate serve`` runs ``streamlit run app_pages/server.py``; Streamlit finds ``app`` below and
serves it with uvicorn, with its usual command-line options. ``st.App`` is what lets the app add
``POST /_kb/session`` (:mod:`curation.access.web_routes`), which sets the HttpOnly sign-in cookie
that keeps a password user signed in across a reload.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from curation.access.web_routes import routes

app = st.App(Path(__file__).resolve().parents[1] / "app.py", routes=routes())
