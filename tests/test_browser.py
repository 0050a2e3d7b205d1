"""One real-browser run: ``kbcurate serve`` on 127.0.0.1, driven by Playwright and Chromium.

Chromium comes from Debian (``apt-get install chromium``), not from a Playwright download; when
``/usr/bin/chromium`` (or ``$KBCURATE_CHROMIUM``) is missing this test fails, never skips, and
says how to install it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from app_helpers import build_app_workspace, label_rows

CHROMIUM = Path(os.environ.get("KBCURATE_CHROMIUM", "/usr/bin/chromium"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
TITLE = "kbcurate: KB curation assistant"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"kbcurate serve exited with {proc.returncode}: "
                                 f"{proc.stdout.read().decode(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                if resp.read().decode() == "ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"kbcurate serve did not answer on {url} within {timeout} s")


@pytest.fixture
def served(tmp_path):
    """The app served on a free loopback port over a small fixture workspace (local mode)."""
    root = build_app_workspace(tmp_path / "ws")
    port = free_port()
    kbcurate = Path(sys.executable).with_name("kbcurate")
    cmd = ([str(kbcurate)] if kbcurate.is_file() else [sys.executable, "-m", "curation.cli"])
    env = {**os.environ, "HOME": str(tmp_path), "USER": "browser-test",
           "KBCURATE_WORKSPACE": str(root)}
    proc = subprocess.Popen([*cmd, "serve", "--workspace", str(root), "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url, root
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def open_app(browser, url: str, attempts: int = 3):
    """A page showing the app's title (reloaded when the first load stalls)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    for attempt in range(attempts):
        try:
            page.goto(url, wait_until="domcontentloaded", timeout=30_000)
            page.get_by_text(TITLE).first.wait_for(timeout=30_000)
            return page
        except Exception:  # noqa: BLE001 - retried, then re-raised
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def test_search_and_label_in_a_real_browser(served):
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's Chromium (apt-get install -y "
                    "chromium); this test drives it with Playwright and never downloads one")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is not installed: pip install playwright (the pip "
                    "package only; no browser download)")
    url, root = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = open_app(browser, url)
            search = page.get_by_label("Search relations")
            search.fill("BRAF")
            search.press("Enter")
            card = page.locator(".st-key-doc_25265492")
            card.get_by_text("PMID 25265492").wait_for(timeout=30_000)
            assert "cited by KB" in card.inner_text()
            card.get_by_role("radio", name="Complete").click()
            deadline = time.time() + 30
            while not label_rows(root) and time.time() < deadline:
                time.sleep(0.2)
            page.get_by_text("Labelled 1 of").first.wait_for(timeout=30_000)
        finally:
            browser.close()
    (row,) = label_rows(root)
    assert (row["user"], row["doc_id"], row["grade"], row["model_version"]) == (
        "browser-test", "25265492", "complete", "bm25")
