"""Users file: hashed passwords, roles, authentication, admin checks."""

from __future__ import annotations

import pytest

from curation.access.users import PermissionDenied, Role, User, UserStore, require_admin
from kb_sources.errors import CurationError


def test_add_and_authenticate(tmp_path):
    store = UserStore(tmp_path / "users.toml")
    store.add("alice", "correct horse", "admin")
    store.add("bob", "battery staple", Role.ANNOTATOR)
    text = (tmp_path / "users.toml").read_text()
    assert "correct horse" not in text and "scrypt$" in text
    assert store.authenticate("alice", "correct horse") == User("alice", Role.ADMIN)
    assert store.authenticate("alice", "wrong password") is None
    assert store.authenticate("carol", "correct horse") is None
    assert [u.name for u in store.users()] == ["alice", "bob"]
    store.remove("bob")
    assert [u.name for u in store.users()] == ["alice"]


def test_bad_input(tmp_path):
    store = UserStore(tmp_path / "users.toml")
    with pytest.raises(CurationError, match="at least 8 characters"):
        store.add("alice", "short", "admin")
    with pytest.raises(CurationError, match="Unknown role 'boss'. Available options"):
        store.add("alice", "long enough", "boss")
    with pytest.raises(CurationError, match="must be letters"):
        store.add("a b", "long enough", "admin")
    (tmp_path / "broken.toml").write_text("[users.x]\nrole = ")
    with pytest.raises(CurationError, match="not a valid users file"):
        UserStore(tmp_path / "broken.toml").users()


def test_require_admin():
    require_admin(User("a", Role.ADMIN), "Start an evaluation")
    with pytest.raises(PermissionDenied, match="needs the admin role; b \\(curator\\)"):
        require_admin(User("b", Role.CURATOR), "Start an evaluation")
    with pytest.raises(PermissionDenied, match="anonymous"):
        require_admin(None, "Start an evaluation")


# -- issue 28, item 2: a changed or removed user's remembered sign-ins end -----------------------
@pytest.fixture
def ws(tmp_path, monkeypatch):
    from curation.access import web_sessions
    from curation.store.workspace import Workspace

    monkeypatch.delenv(web_sessions.SECRET_ENV, raising=False)
    monkeypatch.delenv(web_sessions.TTL_ENV, raising=False)
    with Workspace.init(tmp_path / "ws") as opened:
        yield opened


def _remember(ws, name: str) -> str:
    from curation.access.signin import AuthMode, Session
    from curation.access.web_sessions import create_web_session

    return create_web_session(ws, Session(name, AuthMode.USERS), ttl_s=3600)


def _restored(ws, cookie: str):
    from curation.access.web_sessions import restore_web_session

    return restore_web_session(ws, cookie, ttl_s=3600)


def test_a_new_password_role_or_removal_revokes_the_users_sessions(ws):
    from curation.access.users import USERS_FILE

    store = UserStore(ws.root / USERS_FILE)
    store.add("cur2", "first password", "curator")
    store.add("bob", "bob's password", "curator")
    bob = _remember(ws, "bob")
    cases = (("new password", lambda: store.add("cur2", "second password", "curator")),
             ("new role", lambda: store.add("cur2", "second password", "annotator")),
             ("removed", lambda: store.remove("cur2")),
             ("removed, then re-added as admin", lambda: (store.remove("cur2"),
                                                          store.add("cur2", "x" * 8, "admin"))))
    for why, change in cases:
        if store.user_named("cur2") is None:
            store.add("cur2", "first password", "curator")
        cookie = _remember(ws, "cur2")
        assert _restored(ws, cookie).name == "cur2", why
        change()
        assert _restored(ws, cookie) is None, why
    rows = ws.conn.execute("SELECT user, revoked_at FROM web_sessions ORDER BY created_at")
    assert [(r["user"], r["revoked_at"] is not None) for r in rows] == [
        ("bob", False), ("cur2", True), ("cur2", True), ("cur2", True), ("cur2", True)]
    assert _restored(ws, bob).name == "bob"  # other users keep theirs
    (entry, *_) = [a for a in ws.audit_log("web_session") if a.action == "sign_out_everywhere"]
    assert entry.object_id == "cur2"


def test_the_users_command_revokes_sessions(ws, monkeypatch, capsys):
    import io

    from curation.cli.main import main

    monkeypatch.setattr("sys.stdin", io.StringIO("first password\n"))
    assert main(["users", "add", "cur2", "--role", "curator", "--password-stdin",
                 "--workspace", str(ws.root)]) == 0
    cookie = _remember(ws, "cur2")
    monkeypatch.setattr("sys.stdin", io.StringIO("second password\n"))
    assert main(["users", "add", "cur2", "--role", "curator", "--password-stdin",
                 "--workspace", str(ws.root)]) == 0
    assert _restored(ws, cookie) is None
    assert "user cur2 (curator) saved" in capsys.readouterr().out


def test_a_users_file_outside_a_workspace_needs_no_database(tmp_path):
    store = UserStore(tmp_path / "users.toml")
    store.add("alice", "correct horse", "admin")
    store.remove("alice")
    assert store.users() == [] and not (tmp_path / "workspace.sqlite").exists()
