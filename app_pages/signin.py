"""The sign-in gate: users file (name + password), Streamlit OIDC, or local single-user mode.

``gate(ws)`` returns the signed-in user or draws the sign-in form and stops the run. The role is
never taken from session state: :func:`curation.access.signin.resolve_user` looks it up every run.
"""

from __future__ import annotations

import streamlit as st

from app_pages.common import current_user, flash, oidc_configured, show_flash
from app_pages.safe import md
from curation.access.signin import (
    LOCAL_NOTICE,
    AuthMode,
    Session,
    auth_modes,
    local_user,
    password_sign_in,
    users_store,
)
from curation.access.throttle import SignInThrottle
from curation.access.users import User
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError


def _oidc_email() -> str | None:
    """The e-mail of the OIDC identity Streamlit holds for this browser, if logged in (and not
    marked unverified by the identity provider)."""
    try:
        if st.user.is_logged_in and st.user.get("email_verified") is not False:
            return str(st.user.get("email") or "") or None
    except Exception:  # noqa: BLE001 - OIDC not configured in this Streamlit
        return None
    return None


@st.cache_resource(show_spinner=False)
def sign_in_throttle(root: str) -> SignInThrottle:
    """The failed sign-ins of one workspace, kept for the life of the server process."""
    return SignInThrottle()


def _client() -> str:
    """The browser's address (the throttle's per-client key); "local" on this machine."""
    try:
        return st.context.ip_address or "local"
    except Exception:  # noqa: BLE001 - no client context (a bare script run)
        return "local"


def _on_password_submit(root: str) -> None:
    name = st.session_state.get("signin_name", "")
    password = st.session_state.get("signin_password", "")
    st.session_state["signin_password"] = ""
    try:
        session = password_sign_in(users_store(root), name, password,
                                   throttle=sign_in_throttle(root), client=_client())
    except CurationError as exc:  # locked out, or a malformed users file
        flash("error", md(exc))
        return
    if session is None:
        flash("error", "Unknown user name or wrong password.")
    else:
        st.session_state["auth"] = session


def sign_out() -> None:
    """Forget the session's identity (and the OIDC cookie when there is one)."""
    session = st.session_state.get("auth")
    st.session_state["auth"] = None
    st.session_state["search_cache"] = {}
    if isinstance(session, Session) and session.mode is AuthMode.OIDC:
        st.logout()


def gate(ws: Workspace) -> User:
    """The signed-in user; otherwise the sign-in form is drawn and the run stops."""
    oidc = oidc_configured()
    modes = auth_modes(users_store(ws.root), oidc)
    if modes == [AuthMode.LOCAL]:
        st.session_state["auth"] = Session(local_user().name, AuthMode.LOCAL)
        st.sidebar.info(LOCAL_NOTICE)
    elif oidc and (email := _oidc_email()):
        st.session_state["auth"] = Session(email, AuthMode.OIDC)
    user = current_user(ws)
    if user is not None:
        return user
    refused = _refused_oidc_email()
    st.session_state["auth"] = None
    _form(ws, modes)
    if refused:
        st.warning(f"{md(refused)} may not sign in to this workspace: its domain is not in "
                   "`allowed_domains` of the users file. Ask an admin to add the address as the "
                   "`email` of a user entry.")
        st.button("Sign out of your organisation", key="signin_oidc_logout", on_click=st.logout)
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises


def _refused_oidc_email() -> str | None:
    """The OIDC e-mail of this session when it maps to no user (see ``user_for_email``)."""
    session = st.session_state.get("auth")
    if isinstance(session, Session) and session.mode is AuthMode.OIDC:
        return session.name
    return None


def _form(ws: Workspace, modes: list[AuthMode]) -> None:
    st.subheader("Sign in")
    show_flash()
    if AuthMode.USERS in modes:
        with st.form("signin_form", clear_on_submit=False):
            st.text_input("User name", key="signin_name")
            st.text_input("Password", type="password", key="signin_password")
            st.form_submit_button("Sign in", key="signin_submit", type="primary",
                                  on_click=_on_password_submit, args=(str(ws.root),))
    if AuthMode.OIDC in modes:
        st.button("Sign in with your organisation (OIDC)", key="signin_oidc", on_click=st.login)
    st.caption("Users and roles live in the workspace's users.toml "
               "(`kbcurate users add NAME --role curator|annotator|admin`).")
