"""Start the Streamlit app on a workspace."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path

from curation.store.config import WORKSPACE_ENV
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)


def app_path() -> Path:
    """Location of app.py (installed as a top-level module, or next to this package)."""
    local = Path(__file__).resolve().parents[2] / "app.py"
    if local.is_file():
        return local
    spec = importlib.util.find_spec("app")
    if spec is None or spec.origin is None:
        raise CurationError("app.py not found; reinstall kbcurate (pip install -e .)")
    return Path(spec.origin)


def server_path() -> Path:
    """Location of ``app_pages/server.py``: the app plus its session-cookie route (``st.App``)."""
    return app_path().parent / "app_pages" / "server.py"


def streamlit_command(workspace: Path, host: str = "127.0.0.1", port: int = 8501) -> list[str]:
    """The ``streamlit run`` command line for the app on ``workspace`` (``app_pages/server.py``,
    which Streamlit serves as an ASGI app with uvicorn)."""
    return [sys.executable, "-m", "streamlit", "run", str(server_path()),
            "--server.address", host, "--server.port", str(port),
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none",
            "--client.toolbarMode", "viewer",  # no Deploy button or developer menu for curators
            "--", "--workspace", str(workspace)]


def serve(workspace: str | Path, host: str = "127.0.0.1", port: int = 8501) -> int:
    """Run the app in the foreground until interrupted; returns Streamlit's exit code."""
    root = Path(workspace).expanduser().resolve()
    Workspace.open(root).close()  # a clear error now rather than inside the page
    env = {**os.environ, WORKSPACE_ENV: str(root)}
    cmd = streamlit_command(root, host, port)
    logger.info("serving %s on http://%s:%d", root, host, port)
    return subprocess.call(cmd, env=env)
