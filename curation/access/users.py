"""Users and roles from a local users file with hashed passwords.

The file (``WS/users.toml`` by default) holds one table per user::

    [users.alice]
    role = "admin"
    password = "scrypt$16384$8$1$<salt hex>$<hash hex>"

Passwords are hashed with scrypt (stdlib ``hashlib``) and a random salt; the plain text is never
stored. Roles: curator (browse, label, suggest), annotator (label), admin (everything, including
evaluation, training, imports and user management). Permission checks live here so the app and the
job runner enforce them on the server side, not only by hiding widgets.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import tomli_w

from kb_sources.errors import CurationError, parse_choice

USERS_FILE = "users.toml"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


class Role(StrEnum):
    ANNOTATOR = "annotator"
    CURATOR = "curator"
    ADMIN = "admin"

    @classmethod
    def parse(cls, value: str | Role) -> Role:
        return parse_choice(cls, value, "role")


class PermissionDenied(CurationError):
    """The signed-in user's role does not allow the action."""


@dataclass(frozen=True)
class User:
    name: str
    role: Role

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


def require_admin(user: User | None, action: str) -> None:
    """Raise :class:`PermissionDenied` unless ``user`` is an admin."""
    if user is None or not user.is_admin:
        who = f"{user.name} ({user.role.value})" if user else "an anonymous user"
        raise PermissionDenied(f"{action} needs the admin role; {who} may not do it")


def hash_password(password: str) -> str:
    """A salted scrypt hash in ``scrypt$n$r$p$salt$hash`` form."""
    if len(password) < 8:
        raise CurationError("Passwords need at least 8 characters")
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, **_SCRYPT)
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    """Constant-time check of ``password`` against a stored hash."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    got = hashlib.scrypt(password.encode("utf-8"), salt=bytes.fromhex(salt), n=int(n), r=int(r),
                         p=int(p))
    return hmac.compare_digest(got.hex(), digest)


class UserStore:
    """Read and write the users file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _load(self) -> dict[str, dict[str, str]]:
        if not self.path.is_file():
            return {}
        try:
            data = tomllib.loads(self.path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise CurationError(f"{self.path}: not a valid users file ({exc}); fix or delete "
                                "it and add users again with kbcurate users add") from exc
        users = data.get("users", {})
        for name, entry in users.items():
            if not isinstance(entry, dict) or "role" not in entry or "password" not in entry:
                raise CurationError(f"{self.path}: user {name!r} needs 'role' and 'password'")
        return users

    def users(self) -> list[User]:
        return [User(name, Role.parse(e["role"])) for name, e in sorted(self._load().items())]

    def add(self, name: str, password: str, role: str | Role) -> User:
        """Add or update a user (the password is stored hashed)."""
        name = name.strip()
        if not name or not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise CurationError(f"User name {name!r} must be letters, digits, '.', '_' or '-'")
        users = self._load()
        users[name] = {"role": Role.parse(role).value, "password": hash_password(password)}
        self._write(users)
        return User(name, Role.parse(role))

    def remove(self, name: str) -> None:
        users = self._load()
        if users.pop(name, None) is None:
            raise CurationError(f"No user {name!r} in {self.path}")
        self._write(users)

    def authenticate(self, name: str, password: str) -> User | None:
        """The user when name and password match, else None."""
        entry = self._load().get(name.strip())
        if entry is None or not verify_password(password, entry["password"]):
            return None
        return User(name.strip(), Role.parse(entry["role"]))

    def _write(self, users: dict[str, dict[str, str]]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(tomli_w.dumps({"users": users}), encoding="utf-8")
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)
