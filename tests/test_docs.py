"""The docs site (docs/, mkdocs.yml) builds with ``mkdocs build --strict``, and the README points
at pages that exist.

Under --strict every warning fails the build; mkdocs.yml's ``validation`` makes a link to a
missing page or anchor, and a page left out of the nav, a warning. The broken-site tests below
copy the site's sources into a temporary folder, break one thing, and check that the strict
build refuses it, so the settings cannot quietly stop working.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# the README's two commands (CI runs them: .ci/run); the README must keep them
INSTALL = ("python3 -m venv .venv && . .venv/bin/activate && "
           "pip install -c constraints.txt -e '.[test]' && kbcurate demo")
TESTS = ("[ -x /usr/bin/chromium ] || (apt-get update && apt-get install -y chromium); "
         "ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1 || command -v initdb > /dev/null "
         "|| (apt-get update && apt-get install -y postgresql); python -m pytest -q")


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``python -m mkdocs build --strict`` of the site whose mkdocs.yml is in ``root``."""
    # NO_MKDOCS_2_WARNING: mkdocs-material's end-of-life banner, printed on every build
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = build(REPO, out)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}"
    return out


def nav_pages() -> list[str]:
    """The ``.md`` files named in mkdocs.yml's nav, in order."""
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r":\s*(\S+\.md)\s*$", nav, flags=re.M)


def page_html(site: Path, page: str) -> str:
    stem = page.removesuffix(".md")
    path = site / "index.html" if stem == "index" else site / stem / "index.html"
    return path.read_text(encoding="utf-8")


def test_strict_build_makes_every_nav_page(site):
    pages = nav_pages()
    assert {"index.md", "curating.md", "training.md", "ranker.md", "evaluation.md",
            "operations.md", "security.md", "schemas.md", "development.md", "SCALING.md",
            "benchmarks.md"} <= set(pages)
    for page in pages:
        assert "<h1" in page_html(site, page), page


def test_files_from_outside_docs_are_on_the_site(site):
    # the README's screenshots and benchmarks/README.md, added by docs/repo_files.py
    for name in ("curate_page.png", "screening_mode.png"):
        assert (site / "assets" / name).read_bytes() == (REPO / "assets" / name).read_bytes()
    curating = page_html(site, "curating.md")
    assert 'src="../assets/curate_page.png"' in curating
    assert 'src="../assets/screening_mode.png"' in curating
    assert "FAISS scaling" in page_html(site, "benchmarks.md")
    assert not (site / "repo_files.py").exists()


def test_every_measured_table_is_on_the_evaluation_page(site):
    html = page_html(site, "evaluation.md")
    for heading in ("Retrieval measured on the sample data", "Encoding backends measured",
                    "The learned ranker measured", "Learn as you label, simulated",
                    "Training measured on the sample data", "BiCA and BioHiCL measured",
                    "Feedback loop measured"):
        assert heading in html, heading
    # the retrievers table and the 11 measured tables that left the README
    assert html.count("<table>") >= 12


def test_readme_links_to_docs_pages_and_anchors_that_exist(site):
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", text)
    linked = {path.removeprefix("docs/") for path, _ in links}
    assert set(nav_pages()) - {"index.md", "benchmarks.md"} <= linked
    for path, anchor in links:
        assert (REPO / path).is_file(), f"README links to {path}, which does not exist"
        if anchor:
            assert f'id="{anchor}"' in page_html(site, path.removeprefix("docs/")), \
                f"README links to {path}#{anchor}: no such heading"
    for image in re.findall(r"\]\((assets/[^)]+\.png)\)", text):
        assert (REPO / image).is_file(), image


def test_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert INSTALL in text
    assert TESTS in text


def copy_site_sources(dest: Path) -> Path:
    """mkdocs.yml, docs/ and the repository files the hook adds, into ``dest``."""
    dest.mkdir()
    shutil.copy(REPO / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copytree(REPO / "docs", dest / "docs",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "assets").mkdir()
    for name in ("curate_page.png", "screening_mode.png"):
        shutil.copy(REPO / "assets" / name, dest / "assets" / name)
    (dest / "benchmarks").mkdir()
    shutil.copy(REPO / "benchmarks" / "README.md", dest / "benchmarks" / "README.md")
    return dest


@pytest.mark.parametrize(("page", "addition", "expected"), [
    ("curating.md", "[gone](no-such-page.md)", r"no-such-page\.md"),
    ("curating.md", "[gone](ranker.md#no-such-heading)", r"no-such-heading"),
    ("orphan.md", "# Not in the nav", r"orphan\.md"),
    ("curating.md", "![gone](../assets/no_such.png)", r"no_such\.png"),
])
def test_strict_build_fails_on_a_broken_link(tmp_path, page, addition, expected):
    root = copy_site_sources(tmp_path / "src")
    target = root / "docs" / page
    before = target.read_text(encoding="utf-8") if target.exists() else ""
    target.write_text(before + "\n" + addition + "\n", encoding="utf-8")
    result = build(root, tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"the strict build accepted {addition!r} in {page}:\n{output}"
    assert re.search(r"WARNING.*" + expected, output, flags=re.S), output


def test_copied_sources_build(tmp_path):
    # the broken-link tests above fail for the broken link, not because the copy is incomplete
    result = build(copy_site_sources(tmp_path / "src"), tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
