"""The sign-in gate: users file (name + password), Streamlit OIDC, or local single-user mode.

``gate(ws)`` returns the signed-in user or draws the sign-in form and stops the run. The role is
never taken from session state: :func:`curation.access.signin.resolve_user` looks it up every run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import streamlit as st

from app_pages.common import (
    current_user,
    flash,
    oidc_configured,
    session_workspace,
    show_flash,
    workspace_arg,
)
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
from curation.access.web_routes import SESSION_PATH
from curation.access.web_sessions import (
    COOKIE_NAME,
    HANDOFFS,
    create_web_session,
    restore_web_session,
    revoke_web_session,
    session_ttl,
)
from curation.store.errors import DATABASE_ERRORS
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)
HANDOFF_KEY = "cookie_handoff"
#: The remembered sign-in of this session (server-side state, never sent to the page). Streamlit
#: reads the browser's cookies once, when the page connects, so a cookie set by a sign-in in this
#: session is not in ``st.context.cookies`` until a reload: sign-out revokes this one too.
COOKIE_KEY = "web_session_cookie"


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
        return
    st.session_state["auth"] = session
    try:  # remembered across reloads by a cookie (curation/access/web_sessions.py)
        ws = session_workspace(root)
        cookie = create_web_session(ws, session, ttl_s=session_ttl())
        st.session_state[COOKIE_KEY] = cookie
        st.session_state[HANDOFF_KEY] = HANDOFFS.issue(cookie, session_ttl())
    except (CurationError, *DATABASE_ERRORS) as exc:  # signed in for this tab only
        logger.warning("sign-in not remembered: %s", exc)
        flash("warning", "Signed in for this tab only: a reload will ask for the password "
                         f"again ({md(exc)}).")


def _cookie() -> str | None:
    """The browser's session cookie, if it sent one."""
    try:
        value = st.context.cookies.get(COOKIE_NAME)
    except Exception:  # noqa: BLE001 - no client context (a bare script run)
        return None
    return value if isinstance(value, str) and value else None  # AppTest gives a mock


def send_cookie_handoff() -> None:
    """Let the browser fetch (or clear) its HttpOnly session cookie from the server route.

    The page only ever holds a one-time nonce; the cookie value is in the route's response
    header. The script is ours, the nonce is URL-safe base64, and it is JSON-encoded.
    """
    nonce = st.session_state.pop(HANDOFF_KEY, None)
    if not nonce:
        return
    body = json.dumps({"nonce": nonce})
    st.html(f"<script>fetch({json.dumps(SESSION_PATH)}, {{method: 'POST', credentials: "
            f"'same-origin', headers: {{'Content-Type': 'application/json'}}, body: "
            f"{json.dumps(body)}}});</script>", unsafe_allow_javascript=True)


def sign_out() -> None:
    """Forget the session's identity: the remembered sign-in is revoked on the server and its
    cookie cleared (and Streamlit's OIDC cookie when there is one).

    Both the cookie the page connected with and the one a sign-in in this session created are
    revoked: the latter is not in ``st.context.cookies`` until the page reloads.
    """
    session = st.session_state.get("auth")
    st.session_state["auth"] = None
    st.session_state["search_cache"] = {}
    cookies = {c for c in (_cookie(), st.session_state.pop(COOKIE_KEY, None)) if c}
    path = workspace_arg()
    if cookies and path:
        try:
            ws = session_workspace(path)
            for cookie in cookies:
                revoke_web_session(ws, cookie)
        except (CurationError, *DATABASE_ERRORS) as exc:
            logger.warning("could not revoke the remembered sign-in: %s", exc)
    if cookies:
        st.session_state[HANDOFF_KEY] = HANDOFFS.issue("", 0)  # and clear the cookie
    if isinstance(session, Session) and session.mode is AuthMode.OIDC:
        st.logout()


def gate(ws: Workspace, *, on_signed_out: Callable[[], object] | None = None) -> User:
    """The signed-in user; otherwise the sign-in form is drawn and the run stops.

    Args:
        ws: The workspace.
        on_signed_out: Called before the form is drawn (app.py registers its pages there,
            hidden, so a deep link such as ``/review`` keeps its page through the sign-in).
    """
    oidc = oidc_configured()
    modes = auth_modes(users_store(ws.root), oidc)
    if modes == [AuthMode.LOCAL]:
        st.session_state["auth"] = Session(local_user().name, AuthMode.LOCAL)
        st.sidebar.info(LOCAL_NOTICE)
    elif oidc and (email := _oidc_email()):
        st.session_state["auth"] = Session(email, AuthMode.OIDC)
    elif st.session_state.get("auth") is None and AuthMode.USERS in modes:
        cookie = _cookie()
        st.session_state["auth"] = restore_web_session(ws, cookie)  # a reload
        if st.session_state["auth"] is not None:
            st.session_state[COOKIE_KEY] = cookie
    else:
        _end_if_revoked(ws)
    user = current_user(ws)
    if user is not None:
        send_cookie_handoff()
        return user
    send_cookie_handoff()  # a sign-out's "clear the cookie"
    refused = _refused_oidc_email()
    st.session_state["auth"] = None
    if on_signed_out is not None:
        on_signed_out()
    _form(ws, modes)
    if refused:
        st.warning(f"{md(refused)} may not sign in to this workspace: its domain is not in "
                   "`allowed_domains` of the users file. Ask an admin to add the address as the "
                   "`email` of a user entry.")
        st.button("Sign out of your organisation", key="signin_oidc_logout", on_click=st.logout)
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises


def _end_if_revoked(ws: Workspace) -> None:
    """Sign this tab out when its remembered sign-in was revoked since: a sign-out in another
    tab, or a new password, role or removal of the user (``UserStore`` revokes them), so an
    open tab does not outlive the credentials it was signed in with."""
    session = st.session_state.get("auth")
    cookie = st.session_state.get(COOKIE_KEY)
    if not (isinstance(session, Session) and session.mode is AuthMode.USERS and cookie):
        return
    try:
        still = restore_web_session(ws, cookie)
    except (CurationError, *DATABASE_ERRORS) as exc:  # keep the tab; the check runs again
        logger.warning("could not check the remembered sign-in: %s", exc)
        return
    if still != session:
        logger.info("%s signed out: the remembered sign-in was revoked", session.name)
        st.session_state["auth"] = None
        st.session_state.pop(COOKIE_KEY, None)
        st.session_state[HANDOFF_KEY] = HANDOFFS.issue("", 0)  # clear the stale cookie
        flash("info", "You were signed out: you signed out in another tab, or your password or "
                      "role was changed. Sign in again.")


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
