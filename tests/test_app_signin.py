"""Sign-in (AppTest): users file with hashed passwords, OIDC mapping, local single-user mode."""

from __future__ import annotations

import pytest
from app_helpers import APP, add_users, build_app_workspace, shown, sign_in
from streamlit.testing.v1 import AppTest

from curation.access.signin import AuthMode, Session
from curation.access.users import USERS_FILE, UserStore


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    monkeypatch.setenv("USER", "maria")
    return root


def sidebar_user(at: AppTest) -> str:
    """The sidebar's "**name** · role" line as the user reads it (markdown escapes and the
    zero-width space that breaks an address's autolink removed)."""
    return shown(next(m.value for m in at.sidebar.markdown if " · " in m.value))


def test_local_mode_without_users_file(ws_root):
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert sidebar_user(at) == "**maria** · admin"
    assert any("local mode: add users with `kbcurate users add NAME --role admin`" in i.value
               for i in at.sidebar.info)
    assert at.subheader[0].value == "Curate"


def test_users_file_requires_a_password_and_hides_the_app(ws_root):
    add_users(ws_root, alice="annotator")
    assert "alice-password" not in (ws_root / USERS_FILE).read_text()  # stored hashed
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert at.subheader[0].value == "Sign in" and not at.get("progress")
    assert not [s for s in at.selectbox if s.key == "schema"]
    sign_in(at, "alice", "not-her-password")
    assert at.error[0].value == "Unknown user name or wrong password."
    assert at.subheader[0].value == "Sign in"
    sign_in(at, "alice")
    assert sidebar_user(at) == "**alice** · annotator" and at.subheader[0].value == "Curate"
    at.button(key="signout").click().run()
    assert at.subheader[0].value == "Sign in"


def test_forged_session_state_gains_no_role(ws_root):
    add_users(ws_root, alice="curator")
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.session_state["auth"] = Session("mallory", AuthMode.USERS)  # not in the users file
    at.run()
    assert at.subheader[0].value == "Sign in"
    at.session_state["auth"] = Session("maria", AuthMode.LOCAL)  # local mode is over
    at.run()
    assert at.subheader[0].value == "Sign in"


def test_oidc_login_maps_email_to_the_users_file(ws_root):
    UserStore(ws_root / USERS_FILE).add("boss", "boss-password", "admin",
                                        email="boss@lab.example")
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback",
                          "cookie_secret": "x" * 32, "client_id": "id", "client_secret": "s",
                          "server_metadata_url": "https://idp.example/.well-known/openid"}
    at.run()
    assert [b.key for b in at.button] == ["signin_submit", "signin_oidc"]
    at.user = {"is_logged_in": True, "email": "boss@lab.example"}
    at.run()
    assert sidebar_user(at) == "**boss@lab.example** · admin"
    at.user = {"is_logged_in": True, "email": "newcomer@lab.example"}
    at.run()
    assert sidebar_user(at) == "**newcomer@lab.example** · curator"
    at.user = {"is_logged_in": True, "email": "boss@elsewhere.example"}  # not boss's address
    at.run()
    assert sidebar_user(at) == "**boss@elsewhere.example** · curator"
