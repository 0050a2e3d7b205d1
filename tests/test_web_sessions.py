"""Issue 14, bug 1: a reload keeps the signed-in user and the place.

The cookie library (signed, expiring, revocable; only a hash stored), the route that sets the
HttpOnly cookie from a one-time hand-off, the app's reload path (AppTest: the browser's cookie
comes from a monkeypatched ``_cookie``, which AppTest cannot seed) and the URL's place.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat

import pytest
from app_helpers import APP, add_users, build_app_workspace, sign_in
from starlette.applications import Starlette
from starlette.testclient import TestClient
from streamlit.testing.v1 import AppTest

from app_pages import signin as signin_page
from app_pages.place import place_params, place_state
from curation.access import web_sessions
from curation.access.signin import AuthMode, Session
from curation.access.web_routes import SESSION_PATH, routes
from curation.access.web_sessions import (
    COOKIE_NAME,
    HANDOFFS,
    SECRET_FILE,
    Handoffs,
    create_web_session,
    restore_web_session,
    revoke_web_session,
    workspace_secret,
)
from curation.store.web_sessions import WebSessions
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

ALICE = Session("alice", AuthMode.USERS)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.delenv(web_sessions.SECRET_ENV, raising=False)
    monkeypatch.delenv(web_sessions.TTL_ENV, raising=False)
    with Workspace.init(tmp_path / "ws") as opened:
        yield opened


def test_cookie_restores_the_session_and_stores_only_a_hash(ws):
    cookie = create_web_session(ws, ALICE, ttl_s=3600)
    assert restore_web_session(ws, cookie, ttl_s=3600) == ALICE
    session_id = cookie.split(".")[0]
    (row,) = ws.conn.execute("SELECT * FROM web_sessions").fetchall()
    assert row["id_hash"] == hashlib.sha256(session_id.encode()).hexdigest()
    assert session_id not in json.dumps([dict(r) for r in ws.conn.execute(
        "SELECT * FROM web_sessions")]) and row["user"] == "alice" and row["mode"] == "users"
    secret = ws.root / SECRET_FILE
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600 and len(secret.read_text()) == 64
    assert [a.action for a in ws.audit_log("web_session")] == ["sign_in"]


def test_forged_tampered_expired_and_revoked_cookies_sign_nobody_in(ws, monkeypatch):
    cookie = create_web_session(ws, ALICE, ttl_s=3600)
    session_id, *signature = cookie.split(".")
    assert restore_web_session(ws, None) is None and restore_web_session(ws, "") is None
    assert restore_web_session(ws, "x" + cookie) is None  # another id, same signature
    assert restore_web_session(ws, session_id) is None  # unsigned
    assert restore_web_session(ws, cookie[:-2] + ("AA" if cookie[-2:] != "AA" else "BB")) is None
    # signed with another workspace's secret
    monkeypatch.setenv(web_sessions.SECRET_ENV, "z" * 40)
    assert restore_web_session(ws, cookie, ttl_s=3600) is None
    monkeypatch.delenv(web_sessions.SECRET_ENV)
    # the row's expiry is enforced even when the signature is younger than the limit
    ws.conn.execute("UPDATE web_sessions SET expires_at = '2000-01-01T00:00:00+00:00'")
    assert restore_web_session(ws, cookie, ttl_s=3600) is None
    # and the signature's age is enforced even when the row says otherwise
    fresh = create_web_session(ws, ALICE, ttl_s=3600)
    monkeypatch.setattr("time.time", lambda: 4_000_000_000.0)
    assert restore_web_session(ws, fresh, ttl_s=3600) is None
    monkeypatch.undo()
    monkeypatch.delenv(web_sessions.SECRET_ENV, raising=False)
    assert restore_web_session(ws, fresh, ttl_s=3600) == ALICE
    assert revoke_web_session(ws, fresh) is True
    assert restore_web_session(ws, fresh, ttl_s=3600) is None
    assert revoke_web_session(ws, fresh) is False  # already revoked


def test_sign_out_everywhere_and_modes_not_remembered(ws):
    cookies = [create_web_session(ws, ALICE, ttl_s=60) for _ in range(3)]
    assert WebSessions(ws).revoke_user("alice") == 3
    assert all(restore_web_session(ws, c, ttl_s=60) is None for c in cookies)
    with pytest.raises(CurationError, match="local sign-ins are not remembered"):
        create_web_session(ws, Session("maria", AuthMode.LOCAL))


def test_bad_secret_and_ttl_settings_are_clear_errors(ws, monkeypatch):
    (ws.root / SECRET_FILE).write_text("short")
    with pytest.raises(CurationError, match="too short; delete it"):
        workspace_secret(ws.root)
    monkeypatch.setenv(web_sessions.SECRET_ENV, "abc")
    with pytest.raises(CurationError, match="KBCURATE_SESSION_SECRET is too short"):
        workspace_secret(ws.root)
    monkeypatch.setenv(web_sessions.TTL_ENV, "eight")
    with pytest.raises(CurationError, match="is not a number of hours"):
        web_sessions.session_ttl()
    monkeypatch.setenv(web_sessions.TTL_ENV, "8")
    assert web_sessions.session_ttl() == 8 * 3600


def test_handoffs_are_single_use_and_expire():
    handoffs = Handoffs(ttl_s=60)
    nonce = handoffs.issue("cookie-value", 3600)
    assert handoffs.redeem(nonce) == ("cookie-value", 3600)
    assert handoffs.redeem(nonce) is None
    stale = Handoffs(ttl_s=0)
    assert stale.redeem(stale.issue("v", 1)) is None


def test_route_sets_an_httponly_strict_cookie_only_for_a_valid_handoff():
    handoffs = Handoffs()
    client = TestClient(Starlette(routes=routes(handoffs)))
    assert client.post(SESSION_PATH, json={"nonce": "forged"}).status_code == 403
    assert client.post(SESSION_PATH, content=b"not json").status_code == 400
    assert client.get(SESSION_PATH).status_code == 405
    nonce = handoffs.issue("signed.value", 7200)
    response = client.post(SESSION_PATH, json={"nonce": nonce})
    assert response.status_code == 204
    header = response.headers["set-cookie"]
    assert header.startswith(f"{COOKIE_NAME}=signed.value;")
    for part in ("HttpOnly", "SameSite=strict", "Path=/", "Max-Age=7200"):
        assert part.lower() in header.lower(), part
    assert "secure" not in header.lower()  # plain http on loopback
    assert client.post(SESSION_PATH, json={"nonce": nonce}).status_code == 403  # used up
    clear = handoffs.issue("", 0)
    response = client.post(SESSION_PATH, json={"nonce": clear},
                           headers={"x-forwarded-proto": "https"})
    header = response.headers["set-cookie"]
    assert 'kbcurate_session=""' in header and "max-age=0" in header.lower()
    assert "secure" in header.lower()


@pytest.fixture
def app_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    monkeypatch.delenv(web_sessions.SECRET_ENV, raising=False)
    return root


def _handoff_nonce(at: AppTest) -> str:
    """The nonce the page posts to the cookie route (from the script it drew)."""
    (script,) = [h.proto.body for h in at.get("html") if SESSION_PATH in h.proto.body]
    return re.search(r'nonce\\": \\"([A-Za-z0-9_-]+)\\"', script).group(1)


def test_a_reload_keeps_the_signed_in_user_until_sign_out(app_root, monkeypatch):
    browser: dict[str, str] = {}  # the browser's cookie jar
    monkeypatch.setattr(signin_page, "_cookie", lambda: browser.get(COOKIE_NAME))
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert at.subheader[0].value == "Curate"
    cookie, max_age = HANDOFFS.redeem(_handoff_nonce(at))  # what the route sets
    assert max_age == web_sessions.DEFAULT_TTL_S
    browser[COOKIE_NAME] = cookie
    reloaded = AppTest.from_file(APP, default_timeout=60).run()  # F5: a new session
    assert not reloaded.exception and reloaded.subheader[0].value == "Curate"
    assert any("alice" in m.value for m in reloaded.sidebar.markdown)
    reloaded.button(key="signout").click().run()
    assert reloaded.subheader[0].value == "Sign in"
    assert HANDOFFS.redeem(_handoff_nonce(reloaded)) == ("", 0)  # the cookie is cleared
    again = AppTest.from_file(APP, default_timeout=60).run()  # even if the browser kept it
    assert again.subheader[0].value == "Sign in"


def test_sign_out_without_a_reload_revokes_the_new_sign_in(app_root, monkeypatch):
    """Issue 28, item 1: Streamlit reads the browser's cookies when the page connects, so the
    cookie a sign-in just set is not in ``st.context.cookies``; sign-out still revokes it."""
    connected_with: dict[str, str] = {}  # the cookies the page connected with: none
    monkeypatch.setattr(signin_page, "_cookie", lambda: connected_with.get(COOKIE_NAME))
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert at.subheader[0].value == "Curate"
    cookie, _ = HANDOFFS.redeem(_handoff_nonce(at))  # the browser now holds it
    at.button(key="signout").click().run()
    assert at.subheader[0].value == "Sign in"
    assert HANDOFFS.redeem(_handoff_nonce(at)) == ("", 0)  # the cookie is cleared
    with Workspace.open(app_root) as ws:
        (row,) = ws.conn.execute("SELECT user, revoked_at FROM web_sessions").fetchall()
        assert row["user"] == "alice" and row["revoked_at"] is not None
        assert restore_web_session(ws, cookie) is None
    monkeypatch.setattr(signin_page, "_cookie", lambda: cookie)  # a browser that kept it
    assert AppTest.from_file(APP, default_timeout=60).run().subheader[0].value == "Sign in"


def test_a_removed_user_is_not_restored(app_root, monkeypatch):
    with Workspace.open(app_root) as ws:
        cookie = create_web_session(ws, ALICE)
    monkeypatch.setattr(signin_page, "_cookie", lambda: cookie)
    assert AppTest.from_file(APP, default_timeout=60).run().subheader[0].value == "Curate"
    add_users(app_root, bob="admin")
    from curation.access.users import USERS_FILE, UserStore

    UserStore(app_root / USERS_FILE).remove("alice")
    assert AppTest.from_file(APP, default_timeout=60).run().subheader[0].value == "Sign in"


def test_an_open_tab_is_signed_out_when_its_user_changes(app_root, monkeypatch):
    """Issue 28, item 2: removing a curator and adding the name again as admin (or a new
    password) ends the sign-ins of open tabs too, not only of cookies brought by a reload."""
    from curation.access.users import USERS_FILE, UserStore

    monkeypatch.setattr(signin_page, "_cookie", lambda: None)
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert at.subheader[0].value == "Curate"
    store = UserStore(app_root / USERS_FILE)
    store.remove("alice")
    store.add("alice", "another-password", "admin")
    at.run()
    assert at.subheader[0].value == "Sign in"
    assert not any("admin" in m.value for m in at.sidebar.markdown)
    assert [i.value for i in at.info] == ["You were signed out: you signed out in another tab, "
                                          "or your password or role was changed. Sign in again."]
    sign_in(at, "alice", "another-password")  # the new password signs in, as admin
    assert at.subheader[0].value == "Curate"
    assert any("alice" in m.value and "admin" in m.value for m in at.sidebar.markdown)


def test_place_state_and_params_round_trip_and_refuse_junk():
    params = place_params(schema="PO", retriever="bm25", rerank=True, k=20,
                          relation="gene:BRAF|variant:V600E", query="BRAF V600E drugs")
    assert params == {"schema": "PO", "retriever": "bm25", "rerank": "1", "k": "20",
                      "relation": "gene:BRAF|variant:V600E", "q": "BRAF V600E drugs"}
    assert place_state(params) == {
        "schema": "PO", "retriever": "bm25", "rerank": True, "top_k": 20,
        "query_mode": "KB relation", "relation_pick_PO": "gene:BRAF|variant:V600E",
        "place_query": "BRAF V600E drugs"}
    typed = place_params(schema="PO", retriever="bm25", rerank=False, k=10,
                         typed={"gene": "PIK3CA", "variant": "p.His1047Arg"})
    assert place_state(typed)["typed_PO_variant"] == "p.His1047Arg"
    assert place_state(typed)["query_mode"] == "Type entities"
    assert place_state({"schema": "PO", "k": "7", "rerank": "yes"}) == {"schema": "PO"}
    assert place_state({"relation": "x"}) == {}  # no schema: nothing to restore
    assert len(place_state({"schema": "PO", "q": "x" * 5000})["place_query"]) == 500


def test_the_url_keeps_the_relation_retriever_and_edited_query(app_root, monkeypatch):
    monkeypatch.setattr(signin_page, "_cookie", lambda: None)
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    picker = next(s for s in at.selectbox if s.key and s.key.startswith("relation_pick_"))
    assert len(picker.options) > 1
    picker.set_value(picker.options[1]).run()
    chosen = next(s for s in at.selectbox if s.key == picker.key).value
    at.checkbox(key="rerank").check().run()
    next(t for t in at.text_input if t.label == "Query (edit freely)").set_value(
        "my own words").run()
    url = {k: at.query_params[k] for k in at.query_params}
    assert url["relation"] == chosen and url["rerank"] == "1" and url["q"] == "my own words"
    assert url["schema"] == at.selectbox(key="schema").value
    # a reload (a new session) of that URL, signed in again, opens the same place
    fresh = AppTest.from_file(APP, default_timeout=60)
    fresh.query_params.update(url)
    fresh = sign_in(fresh.run(), "alice")
    assert not fresh.exception
    assert fresh.selectbox(key=picker.key).value == chosen
    assert fresh.checkbox(key="rerank").value is True
    query = next(t for t in fresh.text_input if t.label == "Query (edit freely)")
    assert query.value == "my own words"
    # a hand-edited URL can only pick what the page offers
    junk = AppTest.from_file(APP, default_timeout=60)
    junk.query_params.update({"schema": "nope", "retriever": "<script>", "relation": "zzz"})
    junk = sign_in(junk.run(), "alice")
    assert not junk.exception and junk.selectbox(key="retriever").value == "bm25"
