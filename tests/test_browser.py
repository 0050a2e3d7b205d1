"""Real-browser runs: ``kbcurate serve`` on 127.0.0.1, driven by Playwright and Debian's Chromium
(tests/browser_support.py; the ``browser``, ``served`` and ``served_team`` fixtures are in
tests/conftest.py). When Chromium is missing these tests fail, never skip, and say how to
install it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app_helpers import label_rows
from browser_support import free_port, open_app, screen_doc, sign_in, signed_out, wait_healthy

from curation.store.workspace import Workspace


def test_search_and_label_in_a_real_browser(served, browser):
    url, root = served
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
    (row,) = label_rows(root)
    assert (row["user"], row["doc_id"], row["grade"], row["model_version"]) == (
        "browser-test", "25265492", "complete", "bm25+rerank")  # a new workspace's default


def _wait_screen_doc(page, expected: str, timeout_s: float = 30) -> str:
    """The abstract on screen once it is ``expected`` (the counter can be drawn a moment
    before the card under load), or what is shown when the time is up."""
    deadline = time.monotonic() + timeout_s
    while (shown := screen_doc(page)) != expected and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    return shown


def _press(page, key: str, expect_position: int | None) -> None:
    """A key press with the focus on the page (not in a field); waits for the next abstract."""
    page.keyboard.press(key)
    if expect_position is not None:
        page.get_by_text(f"Abstract {expect_position} of").first.wait_for(timeout=30_000)


def test_reload_screening_by_keyboard_and_adjudication_in_a_real_browser(served_team, browser):
    """Issue 14's done-when: a reload keeps the signed-in user and the relation; screening mode
    by keyboard only (5 labels, an undo, a note) writes the right rows; the disagreements view."""
    url, root = served_team
    page = open_app(browser, url)
    page.get_by_text("Sign in").first.wait_for(timeout=30_000)
    sign_in(page, "alice")
    search = page.get_by_label("Search relations")
    search.fill("BRAF")
    search.press("Enter")
    page.locator(".st-key-doc_25265492").wait_for(timeout=30_000)
    page.wait_for_function("() => location.search.includes('relation=')")
    assert "relation=gene" in page.url and "v600e" in page.url.lower()
    # F5: still alice, still BRAF V600E (the search box itself is not kept)
    page.reload(wait_until="domcontentloaded")
    page.locator(".st-key-doc_25265492").wait_for(timeout=60_000)
    assert page.get_by_role("textbox", name="User name").count() == 0
    page.wait_for_function(  # the picker shows the relation of the URL
        "() => [...document.querySelectorAll('.st-key-relation_pick_PO')].some(el => "
        "(el.textContent + [...el.querySelectorAll('input')].map(i => i.value).join(' '))"
        ".includes('V600E'))", timeout=30_000)
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["kbcurate_session"]["httpOnly"] is True
    assert cookies["kbcurate_session"]["sameSite"] == "Strict"
    # screening mode, keyboard only
    page.locator(".st-key-view_mode").get_by_text("Screening").click()
    page.get_by_text("Abstract 1 of").first.wait_for(timeout=30_000)
    # a key pressed before the key buttons are mounted reaches no shortcut
    page.locator(".st-key-screen_note_btn button").wait_for(timeout=30_000)
    page.locator("h3").first.click()  # the focus on the page, not in a field
    shown = [screen_doc(page)]
    _press(page, "1", 2)
    shown.append(screen_doc(page))
    _press(page, "n", None)  # a note for the second abstract, then its grade
    note = page.locator(".st-key-screen_note input")
    note.wait_for(timeout=30_000)
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.closest("
        "'.st-key-screen_note')", timeout=10_000)
    page.keyboard.type("dose unclear")
    page.keyboard.press("Enter")
    page.get_by_text("Note waiting for a grade").first.wait_for(timeout=30_000)
    page.locator("h3").first.click()
    _press(page, "3", 3)
    shown.append(screen_doc(page))
    _press(page, "2", 4)
    _press(page, "u", 3)  # undo: the third abstract's label goes, and it comes back
    assert _wait_screen_doc(page, shown[2]) == shown[2]
    _press(page, "0", 4)
    fourth = screen_doc(page)
    _press(page, "1", None)
    page.get_by_text("End of the list").first.wait_for(timeout=30_000)
    deadline = time.time() + 30
    while len([r for r in label_rows(root) if r["user"] == "alice"]) < 4 and \
            time.time() < deadline:
        time.sleep(0.2)
    # the Review page's disagreements view: an admin records the final grade
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, "boss")
    page.get_by_role("link", name="Review").click()
    page.get_by_role("tab", name="Disagreements").click()
    page.locator(".st-key-dg_reason input").fill("the abstract names no therapy")
    page.locator(".st-key-dg_save button").click()
    page.get_by_text("Final grade", exact=False).first.wait_for(timeout=30_000)
    deadline = time.time() + 30
    while time.time() < deadline:
        with Workspace.open(root) as ws:
            adjudications = [dict(r) for r in ws.conn.execute(
                "SELECT * FROM adjudications")]
        if adjudications:
            break
        time.sleep(0.2)
    rows = [(r["doc_id"], r["grade"], r["note"]) for r in label_rows(root) if r["user"] == "alice"]
    assert rows == [(shown[0], "complete", ""), (shown[1], "irrelevant", "dose unclear"),
                    (shown[2], "skip", ""), (fourth, "complete", "")], rows
    (adjudication,) = adjudications
    assert (adjudication["user"], adjudication["doc_id"], adjudication["reason"]) == (
        "boss", "25265492", "the abstract names no therapy")


def _session_rows(root: Path, user: str) -> list[dict]:
    with Workspace.open(root) as ws:
        return [dict(r) for r in ws.conn.execute(
            "SELECT * FROM web_sessions WHERE user = ? ORDER BY created_at", (user,))]


def _session_cookie(context) -> dict | None:
    """The browser's session cookie, waiting a little for the hand-off fetch to set it."""
    deadline = time.time() + 15
    while time.time() < deadline:
        found = [c for c in context.cookies() if c["name"] == "kbcurate_session"]
        if found:
            return found[0]
        time.sleep(0.2)
    return None


def _sign_out_and_check(browser, page, root: Path, kept: dict) -> None:
    """Sign out; then a reload, a new tab and a browser that kept the old cookie all get the
    sign-in form, and the server marked the remembered sign-in revoked."""
    page.get_by_role("button", name="Sign out").click()
    signed_out(page)
    deadline = time.time() + 15
    while any(r["revoked_at"] is None for r in _session_rows(root, "alice")) and \
            time.time() < deadline:
        time.sleep(0.2)
    rows = _session_rows(root, "alice")
    assert rows and all(r["revoked_at"] is not None for r in rows), rows
    deadline = time.time() + 15
    while _session_cookie_now(page.context) and time.time() < deadline:
        time.sleep(0.2)
    assert not _session_cookie_now(page.context)  # the cookie is cleared too
    page.reload(wait_until="domcontentloaded")
    signed_out(page)
    tab = page.context.new_page()
    tab.goto(page.url, wait_until="domcontentloaded")
    signed_out(tab)
    stolen = browser.new_context()  # a copy of the old cookie signs nobody in
    stolen.add_cookies([{k: kept[k] for k in ("name", "value", "domain", "path")}])
    copy = stolen.new_page()
    copy.goto(page.url, wait_until="domcontentloaded")
    signed_out(copy)
    stolen.close()


def _session_cookie_now(context) -> bool:
    return any(c["name"] == "kbcurate_session" for c in context.cookies())


def test_sign_out_signs_out_with_or_without_a_reload_in_a_real_browser(served_team, browser):
    """Issue 28, item 1: sign in -> sign out -> reload, and sign in -> reload -> sign out ->
    reload, both end signed out: the web session row revoked and the cookie cleared."""
    url, root = served_team
    for reload_first in (False, True):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_role("textbox", name="User name").wait_for(timeout=60_000)
        sign_in(page, "alice")
        kept = _session_cookie(context)
        assert kept is not None, "the sign-in was not remembered by a cookie"
        if reload_first:
            page.reload(wait_until="domcontentloaded")
            page.get_by_role("button", name="Sign out").wait_for(timeout=60_000)
        _sign_out_and_check(browser, page, root, kept)
        context.close()
    assert len(_session_rows(root, "alice")) == 2


HOSTILE = ("journal http://evil.example/a and HTTPS://evil.example/b, www.evil.org, "
           "mail x.y+z@evil.example.org or mailto:a@evil.example, <https://evil.example/c>")
MD_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
import streamlit as st
from app_pages.safe import md
text = {text!r}
st.markdown("note: " + md(text))
st.caption(md(text))
st.info(md(text))
with st.expander(md(text)):
    st.write("inside")
st.radio("pick", [md(text)], key="r")
st.markdown("done-marker")
"""


def test_escaped_text_makes_no_links_in_a_real_browser(tmp_path, browser):
    """Issue 28, item 8: URLs and addresses in text escaped by ``md`` render as no ``<a href>``
    in markdown, captions, messages, expander labels and radio options; the text reads the same."""
    script = tmp_path / "md_page.py"
    script.write_text(MD_SCRIPT.format(repo=str(Path(__file__).resolve().parents[1]),
                                       text=HOSTILE), encoding="utf-8")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script),
                             "--server.address", "127.0.0.1", "--server.port", str(port),
                             "--server.headless", "true", "--browser.gatherUsageStats", "false",
                             "--server.fileWatcherType", "none"],
                            env={**os.environ, "HOME": str(tmp_path)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        page = browser.new_page()
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_text("done-marker").wait_for(timeout=60_000)
        main = page.locator("[data-testid='stMain']")
        deadline = time.time() + 30  # under load the last elements may still draw
        text = main.inner_text().replace("\u200b", "")
        while text.count(HOSTILE) < 5 and time.time() < deadline:
            page.wait_for_timeout(250)
            text = main.inner_text().replace("\u200b", "")
        links = main.locator("a[href]").evaluate_all("els => els.map(e => e.href)")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    assert links == []
    assert f"note: {HOSTILE}" in text
    assert text.count(HOSTILE) == 5, text  # markdown, caption, message, expander, radio option
