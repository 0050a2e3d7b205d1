"""Helpers shared by the ``kbcurate`` entry point and its commands (no command imports here)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from curation.access.users import Role, User
from curation.store.config import WORKSPACE_ENV
from kb_sources.errors import CurationError


def workspace_path(args: argparse.Namespace) -> Path:
    """The workspace folder from ``--workspace`` or ``$KBCURATE_WORKSPACE``."""
    value = getattr(args, "workspace", None) or os.environ.get(WORKSPACE_ENV)
    if not value:
        raise CurationError(f"No workspace given: pass --workspace DIR or set {WORKSPACE_ENV}")
    return Path(value)


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def given_or(value: object, default: object) -> object:
    """An option's value when it was given (not None), else ``default``."""
    return default if value is None else value


#: The command line acts as the local admin "cli" (audited under that name).
CLI_ADMIN = User("cli", Role.ADMIN)
