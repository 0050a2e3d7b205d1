"""Issue 36 item 9, in a real browser: a deep link to a page survives the sign-in, and a removed
user's open tab returns to the sign-in form at its next step."""

from __future__ import annotations

from browser_support import sign_in, signed_out

from curation.access.users import USERS_FILE, UserStore


def test_deep_link_survives_sign_in_and_a_removed_user_is_signed_out(served_team, browser):
    url, root = served_team
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(f"{url}/models", wait_until="domcontentloaded")
    page.get_by_role("textbox", name="User name").wait_for(timeout=60_000)
    sign_in(page, "alice")
    page.get_by_role("heading", name="Models").wait_for(timeout=30_000)
    assert page.url.rstrip("/").endswith("/models"), page.url
    UserStore(root / USERS_FILE).remove("alice")
    page.locator("[data-testid='stSidebarNav']").get_by_text("Worklist").click()
    signed_out(page)
