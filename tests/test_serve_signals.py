"""Issue 28, item 15: ``kbcurate serve`` (and ``demo``, which ends in it) killed with SIGTERM or
SIGINT stops its Streamlit child instead of leaving it serving.

The real path: ``kbcurate serve`` starts Streamlit on a free loopback port; the test signals the
parent process only (not its process group, as ``kill PID`` or a service manager does) and checks
that the child is gone and the port no longer answers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from browser_support import free_port, wait_healthy

from curation.store.workspace import Workspace


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(c) for c in text]
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has stopped serving


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_serve_stops_the_streamlit_child(tmp_path, signum):
    Workspace.init(tmp_path / "ws").close()
    port = free_port()
    kbcurate = Path(sys.executable).with_name("kbcurate")
    cmd = [str(kbcurate)] if kbcurate.is_file() else [sys.executable, "-m", "curation.cli"]
    parent = subprocess.Popen([*cmd, "serve", "--workspace", str(tmp_path / "ws"),
                               "--host", "127.0.0.1", "--port", str(port)],
                              env={**os.environ, "HOME": str(tmp_path)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    child = None
    try:
        wait_healthy(url, parent)
        (child,) = children(parent.pid)
        parent.send_signal(signum)  # the parent only, as `kill PID` does
        code = parent.wait(timeout=30)
        deadline = time.time() + 10
        while alive(child) and time.time() < deadline:
            time.sleep(0.1)
        assert not alive(child), f"Streamlit child {child} still runs after the parent exited"
        assert not answers(url)
        assert code == 128 + signum  # the shell convention for "ended by a signal"
        output = parent.stdout.read().decode(errors="replace")
        assert "Traceback" not in output, output[-2000:]
    finally:
        for pid in (parent.pid, child):  # clean up whatever this test started
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
        parent.wait(timeout=10)


def test_a_child_that_ignores_the_signal_is_killed_and_handlers_are_restored(monkeypatch):
    from curation.cli import serve

    monkeypatch.setattr(serve, "STOP_WAIT_S", 0.5)
    stubborn = [sys.executable, "-c", "import signal, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"]
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    start = time.monotonic()
    try:
        code = serve.run_child(stubborn)
    finally:
        timer.cancel()
    assert code == 128 + signal.SIGTERM
    assert 1.0 <= time.monotonic() - start < 10  # killed half a second after the signal
    assert signal.getsignal(signal.SIGTERM) is before
