"""What the real-browser tests (and the browser benchmarks) share: Debian's Chromium driven by
Playwright, ``kbcurate serve`` on a free loopback port, and the sign-in steps.

Chromium comes from Debian (``apt-get install chromium``), not from a Playwright download; when
``/usr/bin/chromium`` (or ``$KBCURATE_CHROMIUM``) is missing a browser test fails, never skips,
and says how to install it. The fixtures built on these (``browser``, ``served``,
``served_team``) are in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@contextlib.contextmanager
def serving(root: Path, env: dict[str, str]) -> Iterator[str]:
    """``kbcurate serve`` on a free loopback port over ``root``; yields the URL, then stops it."""
    port = free_port()
    kbcurate = Path(sys.executable).with_name("kbcurate")
    cmd = ([str(kbcurate)] if kbcurate.is_file() else [sys.executable, "-m", "curation.cli"])
    proc = subprocess.Popen([*cmd, "serve", "--workspace", str(root), "--host", "127.0.0.1",
                             "--port", str(port)], env={**os.environ, **env,
                                                        "KBCURATE_WORKSPACE": str(root)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """Debian's Chromium, headless, launched by Playwright; closed afterwards. Fails (never
    skips) with how to install what is missing."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's Chromium (apt-get install -y "
                    "chromium); the browser tests drive it with Playwright and never download "
                    "one")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is not installed: pip install playwright (the pip "
                    "package only; no browser download)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


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


def sign_in(page, name: str) -> None:
    """Sign in on the form with the fixture password (``add_users``: NAME-password)."""
    page.get_by_role("textbox", name="User name").fill(name)
    page.get_by_role("textbox", name="Password").fill(f"{name}-password")
    page.get_by_role("button", name="Sign in").click()
    page.locator("[data-testid='stSidebar']").get_by_text(name).first.wait_for(timeout=30_000)


def screen_doc(page) -> str:
    """The document id of the abstract on screen in screening mode."""
    classes = page.locator("[class*='st-key-screen_doc_']").first.get_attribute("class")
    return next(c for c in classes.split() if c.startswith("st-key-screen_doc_"))[18:]


def signed_out(page) -> None:
    """The sign-in form is on screen and no one is named in the sidebar."""
    page.get_by_role("textbox", name="User name").wait_for(timeout=30_000)
    sign_out = page.get_by_role("button", name="Sign out")
    # the form can show before the rerun has removed the stale sidebar of the signed-in page
    sign_out.wait_for(state="detached", timeout=15_000)
    assert sign_out.count() == 0
