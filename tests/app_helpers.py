"""Shared helpers of the app tests: a small workspace built from the hand-made fixtures."""

from __future__ import annotations

import re
from pathlib import Path

from curation.search.indexing import get_index
from curation.store.importer import import_file
from curation.store.workspace import Workspace

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]
APP = str(REPO / "app.py")
INPUTS = (("kb", "civic", "civic_v1_sample.tsv", {}),
          ("kb", "uniprot", "uniprot_sample.dat", {}),
          ("kb", "pubtator", "pubtator_sample.txt", {"source": "biored"}),
          ("docs", "jsonl", "docs_sample.jsonl", {}),
          ("docs", "jsonl", "app_docs.jsonl", {}))


def build_app_workspace(root: Path, *, bm25: bool = True) -> Path:
    """CIViC, UniProt and PubTator samples plus hand-made abstracts (two with XSS payloads);
    with the BM25 index built unless ``bm25`` is False."""
    with Workspace.init(root) as ws:
        for kind, reader, name, options in INPUTS:
            import_file(ws, kind, reader, FIXTURES / name, progress=False, **options)
        if bm25:
            get_index(ws, "bm25", progress=False)
    return root


def add_users(root: Path, **users: str) -> None:
    """Users file entries ``name=role`` (password: ``<name>-password``)."""
    from curation.access.users import USERS_FILE, UserStore

    store = UserStore(root / USERS_FILE)
    for name, role in users.items():
        store.add(name, f"{name}-password", role)


def sign_in(at, name: str, password: str | None = None):
    """Fill and submit the sign-in form of an AppTest that has run once."""
    at.text_input(key="signin_name").input(name)
    at.text_input(key="signin_password").input(password or f"{name}-password")
    at.button(key="signin_submit").click()
    return at.run()


def label_rows(root: Path) -> list[dict]:
    """Every row of the labels table (superseded ones included)."""
    with Workspace.open(root) as ws:
        return [dict(r) for r in ws.conn.execute("SELECT * FROM labels ORDER BY id")]


def shown(markdown: str) -> str:
    """What the curator reads for a markdown string: backslash escapes resolved, zero-width
    spaces (``app_pages.safe.md`` breaks autolinks with them) dropped."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace("\u200b", "")


def live_markdown(markdown: str) -> list[str]:
    """Markdown constructs left unescaped in ``markdown`` (images, links, autolinks, raw HTML,
    directives and icons, LaTeX, code): empty for text that shows literally."""
    bare = re.sub(r"\\[\s\S]", "", markdown)  # drop every escaped character
    return [c for c in ("![", "[", "](", "<", "://", "www.", ":material", ":red[", "$", "`")
            if c in bare]
