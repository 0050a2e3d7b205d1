"""Sign-in hardening (issue 12): full-address OIDC mapping, lockout, no user enumeration, clear
errors for a malformed users file. Library tests use a fake clock; nothing sleeps."""

from __future__ import annotations

import hashlib
import re

import pytest
from app_helpers import APP, add_users, build_app_workspace, shown, sign_in
from streamlit.testing.v1 import AppTest

from curation.access.signin import password_sign_in, user_for_email, users_store
from curation.access.throttle import LockoutPolicy, SignInLocked, SignInThrottle
from curation.access.users import USERS_FILE, Role, User, UserStore
from kb_sources.errors import CurationError


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path) -> UserStore:
    store = UserStore(tmp_path / USERS_FILE)
    store.add("alice", "alice-password", "admin")
    store.add("bob", "bob-password", "annotator", email="Bob.Smith@Lab.org")
    return store


def set_domains(store: UserStore, *domains: str) -> None:
    text = store.path.read_text(encoding="utf-8")
    store.path.write_text(text + f"\n[oidc]\nallowed_domains = {list(domains)!r}\n".replace(
        "'", '"'), encoding="utf-8")


# -- OIDC: e-mail -> users-file entry ------------------------------------------------------------
def test_the_part_before_the_at_sign_gives_no_role(store):
    assert user_for_email(store, "alice@evil.example") == User("alice@evil.example",
                                                               Role.CURATOR)
    assert user_for_email(store, "bob@evil.example").role is Role.CURATOR


def test_an_entry_matches_its_full_address_in_any_case(store):
    assert user_for_email(store, "bob.smith@lab.org") == User("bob.smith@lab.org",
                                                              Role.ANNOTATOR)
    assert user_for_email(store, " BOB.SMITH@LAB.ORG ").role is Role.ANNOTATOR
    assert user_for_email(store, "bob.smith@lab.org.evil.example").role is Role.CURATOR
    assert user_for_email(store, "not-an-address") is None


def test_allowed_domains_map_names_and_refuse_other_domains(store):
    set_domains(store, "Lab.org")
    assert store.allowed_domains() == ("lab.org",)
    assert user_for_email(store, "alice@lab.org") == User("alice@lab.org", Role.ADMIN)
    assert user_for_email(store, "newcomer@lab.org").role is Role.CURATOR
    assert user_for_email(store, "alice@sub.lab.org") is None  # exact domains only
    assert user_for_email(store, "alice@evil.example") is None
    # bob names his own address: his name under the allowed domain is not him
    assert user_for_email(store, "bob@lab.org").role is Role.CURATOR
    assert user_for_email(store, "bob.smith@lab.org").role is Role.ANNOTATOR


def test_settings_survive_updates_and_bad_settings_are_explained(store):
    set_domains(store, "lab.org")
    store.add("bob", "new-bob-password", "curator")  # a new password keeps his e-mail
    store.add("carol", "carol-password", "annotator")
    assert store.allowed_domains() == ("lab.org",)
    assert user_for_email(store, "bob.smith@lab.org").role is Role.CURATOR
    store.path.write_text('[oidc]\nallowed_domains = "lab.org"\n', encoding="utf-8")
    with pytest.raises(CurationError, match=r"users.toml: \[oidc\] allowed_domains is 'lab.org';"
                                            r" expected a list of domains"):
        store.allowed_domains()
    store.path.write_text('[users.dan]\nrole = "curator"\nemail = "dan"\n', encoding="utf-8")
    with pytest.raises(CurationError, match="user 'dan' has email 'dan'; expected one full "
                                            "address"):
        store.users()


# -- no user enumeration, clear errors -----------------------------------------------------------
@pytest.fixture
def scrypt_calls(monkeypatch):
    calls: list[tuple[int, int, int]] = []
    real = hashlib.scrypt

    def counting(password, *, salt, n, r, p, **kwargs):
        calls.append((n, r, p))
        return real(password, salt=salt, n=n, r=r, p=p, **kwargs)

    monkeypatch.setattr(hashlib, "scrypt", counting)
    return calls


def test_unknown_users_cost_the_same_scrypt_work(store, scrypt_calls):
    assert store.authenticate("alice", "wrong-password") is None
    known = list(scrypt_calls)
    scrypt_calls.clear()
    assert store.authenticate("mallory", "wrong-password") is None
    assert scrypt_calls == known == [(2**14, 8, 1)]
    store.path.write_text(store.path.read_text() + '\n[users.oidc_only]\nrole = "curator"\n'
                          'email = "o@lab.org"\n', encoding="utf-8")
    scrypt_calls.clear()
    assert store.authenticate("oidc_only", "") is None  # no password: never signs in by one
    assert scrypt_calls == known


@pytest.mark.parametrize(("stored", "why"), [
    ("plain-text", r"expected the form scrypt\$N\$r\$p\$<salt hex>\$<hash hex>, got str with 1"),
    ("scrypt$x$8$1$00ff$00ff", "whole numbers N, r, p and hex salt"),
    ("scrypt$1000$8$1$00ff$00ff", "scrypt rejects N=1000, r=8, p=1"),
    ("scrypt$16384$8$1$$00ff", "non-empty salt and hash"),
])
def test_a_malformed_hash_names_the_file_and_the_user(tmp_path, stored, why):
    path = tmp_path / USERS_FILE
    path.write_text(f'[users.alice]\nrole = "admin"\npassword = "{stored}"\n', encoding="utf-8")
    with pytest.raises(CurationError, match=rf"users.toml: the password of user 'alice' is not a "
                                            rf"valid hash \(.*{why}"):
        UserStore(path).authenticate("alice", "whatever-password")
    with pytest.raises(CurationError, match="set a new one with `kbcurate users add alice "
                                            "--role admin`"):
        UserStore(path).authenticate("alice", "whatever-password")


# -- lockout -------------------------------------------------------------------------------------
def test_failures_lock_a_user_name_for_a_growing_time():
    clock = FakeClock()
    throttle = SignInThrottle(clock=clock)
    for _ in range(4):
        throttle.record_failure("alice", "10.0.0.1")
    throttle.check("alice", "10.0.0.1")  # four failures: still free
    throttle.record_failure("Alice ", "10.0.0.2")  # the fifth, any case, another address
    with pytest.raises(SignInLocked, match="for this user name: try again in 30 s") as locked:
        throttle.check("alice", "10.0.0.3")
    assert locked.value.wait_s == 30
    throttle.check("bob", "10.0.0.1")  # others are not locked
    clock.now += 29.5
    with pytest.raises(SignInLocked, match="try again in 1 s"):
        throttle.check("alice", "10.0.0.1")
    clock.now += 1
    throttle.check("alice", "10.0.0.1")
    throttle.record_failure("alice", "10.0.0.1")
    with pytest.raises(SignInLocked, match="try again in 60 s"):
        throttle.check("alice", "10.0.0.1")
    throttle.record_success("alice", "10.0.0.1")
    throttle.check("alice", "10.0.0.1")


def test_the_lock_is_capped_and_old_failures_are_forgotten():
    policy = LockoutPolicy()
    assert [policy.delay(n) for n in (4, 5, 6, 7, 9, 50, 10**6)] == [0, 30, 60, 120, 480, 900,
                                                                     900]
    clock = FakeClock()
    throttle = SignInThrottle(clock=clock)
    for _ in range(5):
        throttle.record_failure("alice", "c")
    clock.now += 3601
    throttle.check("alice", "c")
    throttle.record_failure("alice", "c")  # a new streak: one failure
    throttle.check("alice", "c")


def test_failures_lock_a_client_that_tries_many_names():
    throttle = SignInThrottle(clock=FakeClock())
    for i in range(20):
        throttle.record_failure(f"user{i}", "10.0.0.9")
    with pytest.raises(SignInLocked, match="from this address: try again in 30 s"):
        throttle.check("someone-new", "10.0.0.9")
    throttle.check("someone-new", "10.0.0.10")
    throttle.record_success("user1", "10.0.0.9")  # a success elsewhere does not free the client
    with pytest.raises(SignInLocked):
        throttle.check("someone-new", "10.0.0.9")


def test_the_throttle_remembers_a_bounded_number_of_keys():
    clock = FakeClock()
    throttle = SignInThrottle(clock=clock, max_keys=10)
    for i in range(50):
        clock.now += 1
        throttle.record_failure(f"user{i}", "c")
    assert len(throttle._streaks) == 10


def test_a_locked_name_checks_no_password_and_unknown_names_lock_alike(store, scrypt_calls):
    throttle = SignInThrottle(clock=FakeClock())
    for name in ("alice", "mallory"):
        for _ in range(5):
            assert password_sign_in(store, name, "wrong-password", throttle=throttle,
                                    client=name) is None
    scrypt_calls.clear()
    messages = []
    for name, password in (("alice", "alice-password"), ("mallory", "any-password")):
        with pytest.raises(SignInLocked) as locked:
            password_sign_in(store, name, password, throttle=throttle, client=name)
        messages.append(str(locked.value))
    assert scrypt_calls == [] and messages[0] == messages[1]


# -- in the app ----------------------------------------------------------------------------------
@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws", bm25=False)
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def errors(at: AppTest) -> list[str]:
    return [shown(e.value) for e in at.error]


def test_repeated_failures_lock_the_sign_in_form(ws_root):
    add_users(ws_root, alice="curator")
    at = AppTest.from_file(APP, default_timeout=60).run()
    for _ in range(5):
        sign_in(at, "alice", "not-her-password")
        assert errors(at) == ["Unknown user name or wrong password."]
    sign_in(at, "alice")  # the right password, too late
    (error,) = errors(at)
    assert re.fullmatch(r"Too many failed sign-ins for this user name: try again in \d+ s "
                        r"\(each further failure doubles the wait\)\.", error), error
    assert at.subheader[0].value == "Sign in" and not at.exception


def test_a_malformed_hash_is_shown_as_a_clear_error(ws_root):
    (ws_root / USERS_FILE).write_text('[users.alice]\nrole = "admin"\npassword = "oops"\n',
                                      encoding="utf-8")
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert not at.exception and at.subheader[0].value == "Sign in"
    (error,) = errors(at)
    assert f"{ws_root / USERS_FILE}: the password of user 'alice' is not a valid hash" in error
    assert "kbcurate users add alice --role admin" in error


def oidc_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback",
                          "cookie_secret": "x" * 32, "client_id": "id", "client_secret": "s",
                          "server_metadata_url": "https://idp.example/.well-known/openid"}
    return at


def test_oidc_address_of_another_domain_gets_no_role_from_the_name(ws_root):
    add_users(ws_root, boss="admin")
    at = oidc_app()
    at.user = {"is_logged_in": True, "email": "boss@evil.example"}
    at.run()
    sidebar = [shown(m.value) for m in at.sidebar.markdown]
    assert "**boss@evil.example** · curator" in sidebar


def test_oidc_address_outside_the_allowed_domains_is_refused(ws_root):
    add_users(ws_root, boss="admin")
    set_domains(users_store(ws_root), "lab.example")
    at = oidc_app()
    at.user = {"is_logged_in": True, "email": "boss@lab.example"}
    at.run()
    assert "**boss@lab.example** · admin" in [shown(m.value) for m in at.sidebar.markdown]
    at.user = {"is_logged_in": True, "email": "boss@evil.example"}
    at.run()
    assert at.subheader[0].value == "Sign in"
    assert shown(at.warning[0].value).startswith("boss@evil.example may not sign in to this "
                                                 "workspace")
    assert at.button(key="signin_oidc_logout")
    at.user = {"is_logged_in": True, "email": "boss@lab.example", "email_verified": False}
    at.run()
    assert at.subheader[0].value == "Sign in"  # an unverified address is not trusted
