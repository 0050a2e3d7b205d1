"""Who is signed in to the app, decided on the server side.

Three ways in, chosen by what the workspace and the deployment provide:

* ``users``: ``WS/users.toml`` has users: name + password (scrypt hashes,
  :mod:`curation.access.users`).
* ``oidc``: Streamlit's OIDC login is configured (an ``[auth]`` section in ``secrets.toml``); the
  e-mail maps to a users-file entry by its full address (:func:`user_for_email`), else the
  ``curator`` role, or no entry at all outside the ``[oidc] allowed_domains`` of the users file.
* ``local``: no users file and no OIDC: single-user mode as ``$USER`` with the admin role (the app
  says so and how to add users).

The session keeps only *who* signed in and *how* (:class:`Session`); the role is looked up again
on every run (:func:`resolve_user`), so a role cannot be raised by editing session state, and a
user removed from the file is signed out at the next click.
"""

from __future__ import annotations

import getpass
import logging
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from curation.access.throttle import SignInThrottle
from curation.access.users import USERS_FILE, Role, User, UserStore

logger = logging.getLogger(__name__)

LOCAL_NOTICE = ("local mode: add users with `kbcurate users add NAME --role admin`")


class AuthMode(StrEnum):
    USERS = "users"
    OIDC = "oidc"
    LOCAL = "local"


@dataclass(frozen=True)
class Session:
    """Who signed in and how (what the app keeps in its session state)."""

    name: str
    mode: AuthMode


def users_store(workspace_root: str | Path) -> UserStore:
    """The workspace's users file."""
    return UserStore(Path(workspace_root) / USERS_FILE)


def auth_modes(store: UserStore, oidc_configured: bool) -> list[AuthMode]:
    """Ways to sign in, in the order the sign-in form offers them."""
    modes = []
    if store.users():
        modes.append(AuthMode.USERS)
    if oidc_configured:
        modes.append(AuthMode.OIDC)
    return modes or [AuthMode.LOCAL]


def local_user() -> User:
    """The single user of local mode: the operating-system user, as admin."""
    try:
        name = os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):
        name = ""
    return User(name or "local", Role.ADMIN)


def user_for_email(store: UserStore, email: str) -> User | None:
    """The user an OIDC e-mail signs in as, or None when the address may not sign in.

    Only full addresses match: an entry's ``email`` (or an entry named by the whole address)
    gives its role. With ``[oidc] allowed_domains`` set, an address of a listed domain also maps
    to the entry named by its part before ``@`` (alice@lab.org -> ``[users.alice]``) unless that
    entry names its own ``email``; any other address of a listed domain is a curator, and
    addresses of other domains are refused. Without the setting, an address that matches no
    entry is a curator (the identity provider decides who gets in) and the part before ``@``
    gives no role.
    """
    email = email.strip()
    if email.count("@") != 1:
        return None
    known = store.user_with_email(email)
    if known is not None:
        return User(email, known.role)
    domains = store.allowed_domains()
    if not domains:
        return User(email, Role.CURATOR)
    local, domain = email.lower().split("@")
    if domain not in domains:
        return None
    named = store.user_named(local, without_email=True)
    return User(email, named.role if named else Role.CURATOR)


def password_sign_in(store: UserStore, name: str, password: str, *,
                     throttle: SignInThrottle | None = None,
                     client: str = "") -> Session | None:
    """A session when the name and password match the users file, else None.

    Args:
        store: The users file.
        name: The user name typed.
        password: The password typed.
        throttle: Failed sign-ins so far (None: no lockout, e.g. in scripts).
        client: Who is signing in (the browser's address), for the throttle's per-client count.

    Raises:
        SignInLocked: Too many failures for this name or client; no password was checked.
        CurationError: The user's stored hash is malformed.
    """
    if throttle is not None:
        throttle.check(name, client)
    user = store.authenticate(name, password)
    if user is None:
        logger.info("failed sign-in for %r from %r", name, client)
        if throttle is not None:
            throttle.record_failure(name, client)
        return None
    if throttle is not None:
        throttle.record_success(name, client)
    return Session(user.name, AuthMode.USERS)


def resolve_user(store: UserStore, session: Session | None, *,
                 oidc_configured: bool = False) -> User | None:
    """The signed-in user with the role the server grants now, or None when signed out.

    A ``users`` session needs its entry to still exist; an ``oidc`` session needs OIDC to be
    configured; a ``local`` session is only valid while the workspace has no users file.
    """
    if not isinstance(session, Session):
        return None
    modes = auth_modes(store, oidc_configured)
    if session.mode is AuthMode.USERS and AuthMode.USERS in modes:
        return next((u for u in store.users() if u.name == session.name), None)
    if session.mode is AuthMode.OIDC and AuthMode.OIDC in modes:
        return user_for_email(store, session.name)
    if session.mode is AuthMode.LOCAL and modes == [AuthMode.LOCAL]:
        user = local_user()
        return user if user.name == session.name else None
    return None
