"""Issue 36 item 9, in a real browser: a deep link to a page survives the sign-in, and a removed
user's open tab returns to the sign-in form at its next step."""

from __future__ import annotations

import pytest
from test_browser import CHROMIUM, FLAGS, _sign_in, _signed_out, served_team  # noqa: F401

from curation.access.users import USERS_FILE, UserStore


def test_deep_link_survives_sign_in_and_a_removed_user_is_signed_out(served_team):  # noqa: F811
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's Chromium (apt-get install -y "
                    "chromium)")
    from playwright.sync_api import sync_playwright

    url, root = served_team
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(f"{url}/models", wait_until="domcontentloaded")
            page.get_by_role("textbox", name="User name").wait_for(timeout=60_000)
            _sign_in(page, "alice")
            page.get_by_role("heading", name="Models").wait_for(timeout=30_000)
            assert page.url.rstrip("/").endswith("/models"), page.url
            UserStore(root / USERS_FILE).remove("alice")
            page.locator("[data-testid='stSidebarNav']").get_by_text("Worklist").click()
            _signed_out(page)
        finally:
            browser.close()
