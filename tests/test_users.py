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
