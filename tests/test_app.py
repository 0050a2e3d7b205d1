"""The app shell (AppTest): workspace argument, readable errors, navigation between pages."""

from __future__ import annotations

from pathlib import Path

from app_helpers import APP, build_app_workspace
from streamlit.testing.v1 import AppTest

REPO = Path(APP).parent


def test_app_without_workspace_explains(monkeypatch):
    monkeypatch.delenv("KBCURATE_WORKSPACE", raising=False)
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert "No workspace" in at.info[0].value


def test_app_with_bad_workspace_shows_error_not_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(tmp_path / "missing"))
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    (error,) = at.error
    assert "kbcurate init" in error.value and "Traceback" not in error.value


def test_every_page_renders_with_the_shell(tmp_path, monkeypatch):
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(build_app_workspace(tmp_path / "ws")))
    monkeypatch.setenv("USER", "maria")
    at = AppTest.from_file(APP, default_timeout=60).run()
    for page, heading in (("app_pages/review.py", "Review"), ("app_pages/evaluate.py", "Evaluate"),
                          ("app_pages/worklist.py", "Worklist"),
                          ("app_pages/curate.py", "Curate")):
        at.switch_page(page).run()
        assert not at.exception and not at.error, page
        # the app's name once, in the sidebar; the page names itself (issue 29, item 3)
        assert [t.value for t in at.sidebar.title] == ["kbcurate: KB curation assistant"]
        assert not at.main.title
        assert at.subheader[0].value == heading
        # local mode: nobody to sign out, so no "Sign out" that would do nothing (issue 14)
        assert "signout" not in [b.key for b in at.button]


def test_no_pages_folder_next_to_the_entry_script():
    """A ``pages/`` folder would switch Streamlit to old-style navigation before sign-in."""
    assert not (REPO / "pages").exists()
    assert (REPO / "app_pages" / "curate.py").is_file()
