"""Who the workspace is to NCBI: the contact email and optional API key of E-utilities requests.

Each value comes from, first to last: what the caller passes (the CLI's ``--email`` /
``--api-key``), the environment (``$NCBI_EMAIL``, ``$NCBI_API_KEY``), the workspace setting
(``meta`` keys ``ncbi.email`` and ``ncbi.api_key``, set by an admin with ``kbcurate pubmed
settings``). Background jobs read them when they run, so no key is ever stored in a job's
parameters. The E-utilities base URL is ``$KBCURATE_EUTILS_URL`` (:mod:`kb_sources.eutils`).
Records are cached under ``WS/cache/entrez``.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from curation.access.users import User, require_admin
from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.eutils import EntrezSettings, FetchError

#: Environment variables of the contact email and the API key.
EMAIL_ENV, API_KEY_ENV = "NCBI_EMAIL", "NCBI_API_KEY"
#: Workspace settings (``meta`` keys) of the contact email and the API key.
EMAIL_KEY, API_KEY_KEY = "ncbi.email", "ncbi.api_key"
#: Longest API key accepted (NCBI's have 36 characters).
MAX_API_KEY_CHARS = 128
_EMAIL = re.compile(r"[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+")

logger = logging.getLogger(__name__)


def entrez_cache(ws: Workspace) -> Path:
    """Where fetched PubMed records and links are cached (``WS/cache/entrez``)."""
    return ws.root / "cache" / "entrez"


@dataclass(frozen=True)
class NcbiContact:
    """The contact in use and where each value came from ("option", "environment",
    "workspace" or "unset"); the key itself is never shown."""

    email: str
    email_from: str
    has_api_key: bool
    api_key_from: str

    def describe(self) -> str:
        """One line: "curator@lab.org (workspace), API key from the environment"."""
        email = f"{self.email} ({self.email_from})" if self.email else "no contact email"
        key = (f"API key from the {self.api_key_from}" if self.api_key_from != "option"
               else "API key given") if self.has_api_key else "no API key (3 requests/s)"
        return f"{email}, {key}"


def _pick(given: str | None, env: str, ws: Workspace, key: str) -> tuple[str, str]:
    for value, origin in ((given, "option"), (os.environ.get(env), "environment"),
                          (Settings(ws).value(key), "workspace")):
        if value and value.strip():
            return value.strip(), origin
    return "", "unset"


def ncbi_contact(ws: Workspace, *, email: str | None = None,
                 api_key: str | None = None) -> tuple[NcbiContact, str]:
    """The contact in use and the API key ("" for none)."""
    mail, mail_from = _pick(email, EMAIL_ENV, ws, EMAIL_KEY)
    key, key_from = _pick(api_key, API_KEY_ENV, ws, API_KEY_KEY)
    return NcbiContact(mail, mail_from, bool(key), key_from), key


def ncbi_settings(ws: Workspace, *, email: str | None = None,
                  api_key: str | None = None) -> EntrezSettings:
    """E-utilities settings for this workspace (cache ``WS/cache/entrez``).

    Raises:
        CurationError: No contact email anywhere, or one that is not an address.
    """
    contact, key = ncbi_contact(ws, email=email, api_key=api_key)
    if not contact.email:
        raise CurationError(f"NCBI needs a contact email: pass --email, set {EMAIL_ENV}, or "
                            "ask an admin to run `kbcurate pubmed settings --email ADDRESS`")
    try:
        return EntrezSettings(email=contact.email, api_key=key or None,
                              cache_dir=entrez_cache(ws))
    except FetchError as exc:
        raise CurationError(f"The NCBI contact email {contact.email!r} ({contact.email_from}) "
                            "is not an email address; fix it with `kbcurate pubmed settings "
                            "--email ADDRESS` or the environment") from exc


def set_ncbi_contact(ws: Workspace, *, user: User, email: str | None = None,
                     api_key: str | None = None) -> None:
    """Store the workspace's contact email and/or API key (admins only; audited, the key as
    "set" or "cleared", never its value). ``api_key=""`` clears the key.

    Raises:
        PermissionDenied: ``user`` is not an admin.
        CurationError: An email that is not an address, or a key with characters other than
            letters and digits (the message never quotes the key).
    """
    require_admin(user, "Changing the NCBI contact settings")
    email = check_email(email) if email is not None else None
    api_key = check_api_key(api_key) if api_key is not None else None
    settings = Settings(ws)
    with ws.transaction():
        if email is not None:
            before = settings.value(EMAIL_KEY)
            settings.put(EMAIL_KEY, email)
            ws.audit(user.name, "set", "setting", EMAIL_KEY, before={EMAIL_KEY: before},
                     after={EMAIL_KEY: email})
        if api_key is not None:
            settings.put(API_KEY_KEY, api_key)
            ws.audit(user.name, "set", "setting", API_KEY_KEY,
                     after={API_KEY_KEY: "set" if api_key else "cleared"})
    logger.info("NCBI contact of %s set by %s (email %s, API key %s)", ws.root, user.name,
                "changed" if email is not None else "kept",
                "kept" if api_key is None else "set" if api_key else "cleared")


def check_email(email: str) -> str:
    """``email`` stripped, when it reads as one address (``name@host``).

    Raises:
        CurationError: Anything else (empty, no ``@``, spaces or control characters inside).
    """
    text = email.strip()
    if not _EMAIL.fullmatch(text):
        raise CurationError(f"{text!r} is not an email address (expected name@host, e.g. "
                            "curator@lab.org); NCBI needs one to contact you about your "
                            "requests")
    return text


def check_api_key(api_key: str) -> str:
    """``api_key`` stripped ("" clears the key), when it holds letters and digits only.

    Raises:
        CurationError: Other characters or more than :data:`MAX_API_KEY_CHARS`; the message
            never quotes the key.
    """
    text = api_key.strip()
    if text and not (len(text) <= MAX_API_KEY_CHARS and text.isascii() and text.isalnum()):
        raise CurationError(f"The NCBI API key has {len(text)} characters, not all letters and "
                            "digits (NCBI's keys have 36); copy it again from your NCBI account "
                            "settings (API Key Management)")
    return text
