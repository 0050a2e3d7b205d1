"""Who is signed in to the app, decided on the server side.

Three ways in, chosen by what the workspace and the deployment provide:

* ``users``: ``WS/users.toml`` has users: name + password (scrypt hashes,
  :mod:`curation.access.users`).
* ``oidc``: Streamlit's OIDC login is configured (an ``[auth]`` section in ``secrets.toml``); the
  e-mail maps to a users-file entry named by the full address or its local part, else the
  ``curator`` role.
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


def user_for_email(store: UserStore, email: str) -> User:
    """Map an OIDC e-mail to a users-file entry (full address or local part) or a curator."""
    email = email.strip()
    users = {u.name.lower(): u for u in store.users()}
    for candidate in (email.lower(), email.split("@")[0].lower()):
        if candidate in users:
            return User(email, users[candidate].role)
    return User(email, Role.CURATOR)


def password_sign_in(store: UserStore, name: str, password: str) -> Session | None:
    """A session when the name and password match the users file, else None."""
    user = store.authenticate(name, password)
    if user is None:
        logger.info("failed sign-in for %r", name)
        return None
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
