"""Settings resolved at call time (never at import): data folder and workspace locations."""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable naming the folder of real sample data.
DATA_ENV = "KBCURATE_DATA"
#: Environment variable naming the default workspace folder.
WORKSPACE_ENV = "KBCURATE_WORKSPACE"


def default_data_dir() -> Path:
    """``../shared/data`` relative to the project root (the checkout holding app.py)."""
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def resolve_data_dir(flag: str | os.PathLike[str] | None = None) -> Path:
    """The sample-data folder: the flag, else ``$KBCURATE_DATA``, else ``../shared/data``."""
    if flag:
        return Path(flag).expanduser().resolve()
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return default_data_dir()
