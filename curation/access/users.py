"""Users and roles from a local users file with hashed passwords.

The file (``WS/users.toml`` by default) holds one table per user, and optional OIDC settings::

    [users.alice]
    role = "admin"
    password = "scrypt$16384$8$1$<salt hex>$<hash hex>"
    email = "alice@lab.org"         # optional: her OIDC address, matched in full

    [oidc]
    allowed_domains = ["lab.org"]   # optional: see curation.access.signin.user_for_email

Passwords are hashed with scrypt (stdlib ``hashlib``) and a random salt; the plain text is never
stored. An entry with an ``email`` may leave the password out (it signs in by OIDC only). Roles:
curator (browse, label, suggest), annotator (label), admin (everything, including evaluation,
training, imports and user management). Permission checks live here so the app and the job runner
enforce them on the server side, not only by hiding widgets.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import tomli_w

from curation.store.errors import PermissionDenied  # noqa: F401 (re-exported: the access wing's)
from curation.store.safe_files import write_atomic
from curation.store.web_sessions import revoke_sessions_at
from kb_sources.errors import CurationError, parse_choice

USERS_FILE = "users.toml"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
_HASH_FORM = "scrypt$N$r$p$<salt hex>$<hash hex>"
#: Checked instead when the user is unknown, so that a failed sign-in costs the same scrypt work
#: whether or not the name exists (no user enumeration by timing). No password matches it.
_DUMMY_HASH = ("scrypt$16384$8$1$1ef37f468ee6f57be42e0e5a466332d7$61165648a5152f14bb0c874c0eaa299e"
               "436a582ff96d0eab5e92a538ccfafb7a5b1306b0e42d50c55bae4da3e4682aafa1604398f659be67"
               "436517cb010e541b")


class Role(StrEnum):
    ANNOTATOR = "annotator"
    CURATOR = "curator"
    ADMIN = "admin"

    @classmethod
    def parse(cls, value: str | Role) -> Role:
        return parse_choice(cls, value, "role")


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


def _parse_hash(stored: object) -> tuple[dict[str, int], bytes, str]:
    """scrypt parameters, salt and hex digest of a stored hash; ValueError says what is wrong."""
    parts = stored.split("$") if isinstance(stored, str) else []
    if len(parts) != 6 or parts[0] != "scrypt":
        raise ValueError(f"expected the form {_HASH_FORM}, got {type(stored).__name__} with "
                         f"{len(parts)} '$'-separated fields")
    try:
        n, r, p = (int(x) for x in parts[1:4])
        salt, digest = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
    except ValueError as exc:
        raise ValueError(f"expected the form {_HASH_FORM} with whole numbers N, r, p and hex "
                         "salt and hash") from exc
    if not salt or not digest:
        raise ValueError(f"expected the form {_HASH_FORM} with a non-empty salt and hash")
    return {"n": n, "r": r, "p": p}, salt, digest.hex()


def verify_password(password: str, stored: str) -> bool:
    """Constant-time check of ``password`` against a stored hash.

    Raises:
        ValueError: ``stored`` is not a hash of the form ``scrypt$N$r$p$salt$hash``, or scrypt
            rejects its parameters (the message says which).
    """
    params, salt, digest = _parse_hash(stored)
    try:
        got = hashlib.scrypt(password.encode("utf-8"), salt=salt, **params)
    except ValueError as exc:  # N not a power of 2, or more memory than scrypt allows
        raise ValueError(f"scrypt rejects N={params['n']}, r={params['r']}, p={params['p']} "
                         f"({exc})") from exc
    return hmac.compare_digest(got.hex(), digest)


class UserStore:
    """Read and write the users file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _read(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {}
        try:
            return tomllib.loads(self.path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise CurationError(f"{self.path}: not a valid users file ({exc}); fix or delete "
                                "it and add users again with kbcurate users add") from exc

    def _load(self) -> dict[str, dict[str, Any]]:
        users = self._read().get("users", {})
        if not isinstance(users, dict):
            raise CurationError(f"{self.path}: 'users' must be tables such as [users.alice]; "
                                "add users with kbcurate users add")
        for name, entry in users.items():
            if not isinstance(entry, dict) or "role" not in entry or not (
                    "password" in entry or "email" in entry):
                raise CurationError(f"{self.path}: user {name!r} needs 'role' and 'password' "
                                    "(or 'email' to sign in by OIDC only)")
            email = entry.get("email")
            if email is not None and (not isinstance(email, str) or email.count("@") != 1):
                raise CurationError(f"{self.path}: user {name!r} has email {email!r}; expected "
                                    "one full address such as email = \"alice@lab.org\"")
        return users

    def users(self) -> list[User]:
        return [User(name, Role.parse(e["role"])) for name, e in sorted(self._load().items())]

    def user_with_email(self, email: str) -> User | None:
        """The entry whose ``email`` (or name) is the full address ``email`` (any case)."""
        address = email.strip().lower()
        for name, entry in sorted(self._load().items()):
            if address in (str(entry.get("email", "")).strip().lower(), name.lower()):
                return User(name, Role.parse(entry["role"]))
        return None

    def user_named(self, name: str, *, without_email: bool = False) -> User | None:
        """The entry called ``name`` (with ``without_email``: only if it names no e-mail)."""
        entry = self._load().get(name)
        if entry is None or (without_email and "email" in entry):
            return None
        return User(name, Role.parse(entry["role"]))

    def allowed_domains(self) -> tuple[str, ...]:
        """The ``[oidc] allowed_domains`` setting, lower-case; empty when not set."""
        oidc = self._read().get("oidc", {})
        domains = oidc.get("allowed_domains", []) if isinstance(oidc, dict) else None
        if not isinstance(domains, list) or not all(
                isinstance(d, str) and d.strip() and "@" not in d for d in domains):
            raise CurationError(f"{self.path}: [oidc] allowed_domains is {domains!r}; expected a "
                                "list of domains such as allowed_domains = [\"lab.org\"]")
        return tuple(d.strip().lower() for d in domains)

    def add(self, name: str, password: str, role: str | Role, email: str | None = None) -> User:
        """Add or update a user (the password is stored hashed; other fields are kept).

        The user's remembered browser sign-ins in this workspace are revoked (as by
        :meth:`remove`): a session never outlives the password or role it began with.
        """
        name = name.strip()
        if not name or not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise CurationError(f"User name {name!r} must be letters, digits, '.', '_' or '-'")
        users = self._load()
        entry = dict(users.get(name, {}))
        entry.update(role=Role.parse(role).value, password=hash_password(password))
        if email is not None:
            entry["email"] = email.strip()
        users[name] = entry
        self._write(users)
        self._sign_out_everywhere(name, "password or role set")
        return User(name, Role.parse(role))

    def remove(self, name: str) -> None:
        users = self._load()
        if users.pop(name, None) is None:
            raise CurationError(f"No user {name!r} in {self.path}")
        self._write(users)
        self._sign_out_everywhere(name, "user removed")

    def _sign_out_everywhere(self, name: str, reason: str) -> None:
        """End the remembered browser sign-ins of ``name`` in the workspace holding this file:
        a session must not outlive the password or role it was signed in with (a user removed
        and added again as admin would otherwise find an old curator cookie an admin's)."""
        revoke_sessions_at(self.path.parent, name, reason=reason)

    def authenticate(self, name: str, password: str) -> User | None:
        """The user when name and password match, else None.

        An unknown name (or an entry without a password) is checked against a dummy hash, so a
        failed sign-in does the same scrypt work whether or not the name exists.

        Raises:
            CurationError: The user's stored password hash is malformed (names file and user).
        """
        name = name.strip()
        entry = self._load().get(name)
        if entry is None or "password" not in entry:
            verify_password(password, _DUMMY_HASH)
            return None
        try:
            ok = verify_password(password, entry["password"])
        except ValueError as exc:
            raise CurationError(
                f"{self.path}: the password of user {name!r} is not a valid hash ({exc}); set a "
                f"new one with `kbcurate users add {name} --role {entry['role']}`") from exc
        return User(name, Role.parse(entry["role"])) if ok else None

    def _write(self, users: dict[str, dict[str, Any]]) -> None:
        data = self._read()
        data["users"] = users
        write_atomic(self.path, tomli_w.dumps(data))  # 0600, never through a link
