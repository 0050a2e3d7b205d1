"""Start the Streamlit app on a workspace."""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from curation.store.config import WORKSPACE_ENV
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: Signals passed on to the Streamlit child, so that ``kill PID`` of ``kbcurate serve`` (or of
#: ``kbcurate demo``) stops the server too instead of leaving it serving.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: How long the child may take to stop after a forwarded signal before it is killed.
STOP_WAIT_S = 20.0


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
    """Run the app in the foreground until it stops or a signal stops it (see :func:`run_child`);
    returns the exit code for the shell."""
    root = Path(workspace).expanduser().resolve()
    Workspace.open(root).close()  # a clear error now rather than inside the page
    env = {**os.environ, WORKSPACE_ENV: str(root)}
    cmd = streamlit_command(root, host, port)
    logger.info("serving %s on http://%s:%d", root, host, port)
    return run_child(cmd, env)


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``cmd`` in the foreground, passing SIGTERM, SIGINT and SIGHUP on to it.

    The parent waits for the child after a forwarded signal (up to :data:`STOP_WAIT_S`, then
    kills it), so neither a signal nor an error in the parent leaves the child running.

    Returns:
        An exit code for the shell: 128 + the signal's number after a forwarded signal (or when
        a signal ended the child), else the child's own code.
    """
    proc = subprocess.Popen(cmd, env=env)
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():  # signal handlers live there only
        previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        code = _wait(proc, received)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.poll() is None:  # an error in the parent: never leave the app serving
            proc.kill()
            proc.wait()
    if received:
        logger.info("the app stopped after %s", signal.Signals(received[0]).name)
        return 128 + received[0]
    return 128 - code if code < 0 else code


def _wait(proc: subprocess.Popen, received: list[int]) -> int:
    """The child's return code; killed :data:`STOP_WAIT_S` after the first forwarded signal.

    Waits in short steps: a blocking wait is resumed after a signal handler runs (PEP 475), so it
    would never notice a child that ignores the signal.
    """
    deadline = None
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        if received and deadline is None:
            deadline = time.monotonic() + STOP_WAIT_S
        if deadline is not None and time.monotonic() > deadline:
            logger.warning("the app did not stop within %.0f s of %s; killing it",
                           STOP_WAIT_S, signal.Signals(received[0]).name)
            proc.kill()
            return proc.wait()
