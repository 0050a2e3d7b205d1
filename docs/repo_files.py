"""MkDocs hook: repository files outside ``docs/`` that the site shows, kept in one place.

The README's screenshots (``assets/*.png``) and ``benchmarks/README.md`` live where the README
and the scripts need them. This hook adds them to the site at build time (``on_files``), and
rewrites the pages' links to them (``../assets/x.png``, ``../benchmarks/README.md``, which work
when the Markdown is read on GitHub) to the site's copies (``on_page_markdown``), before MkDocs
validates the links. Named in ``mkdocs.yml`` under ``hooks``; not part of the site itself
(``exclude_docs``).
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

#: path on the site -> path in the repository (relative to the folder of mkdocs.yml)
REPO_FILES: dict[str, str] = {
    "assets/curate_page.png": "assets/curate_page.png",
    "assets/screening_mode.png": "assets/screening_mode.png",
    "benchmarks.md": "benchmarks/README.md",
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add each file of ``REPO_FILES`` to the site under its site path."""
    root = Path(config.config_file_path).parent
    for site_path, repo_path in REPO_FILES.items():
        source = root / repo_path
        if not source.is_file():
            raise PluginError(f"docs/repo_files.py: {repo_path} not found in {root}; the site "
                              f"shows it as {site_path}. Restore the file or remove it from "
                              "REPO_FILES.")
        files.append(File.generated(config, site_path, abs_src_path=str(source)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Point ``](../<repo path>`` links of a top-level page at the site's copy."""
    if "/" in page.file.src_uri:
        return markdown
    for site_path, repo_path in REPO_FILES.items():
        markdown = markdown.replace(f"](../{repo_path}", f"]({site_path}")
    return markdown
