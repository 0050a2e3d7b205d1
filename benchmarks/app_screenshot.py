"""The README's screenshot of screening mode, taken in Chromium on a copy of a workspace.

Usage::

    kbcurate demo --no-serve -w /tmp/demo -q           # the sample workspace, once
    python benchmarks/app_screenshot.py -w /tmp/demo --out assets/screening_mode.png

Not a benchmark: it serves the app on the copy (local mode), opens BRAF V600E (PO, BM25) in
screening mode, labels the first abstract with the key ``1`` so the progress moves, and saves the
window. Needs Debian's Chromium and Playwright (as the browser test does).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from app_label_latency import copy_workspace  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-w", "--workspace", default="/tmp/demo")
    parser.add_argument("--out", default=str(REPO / "assets" / "screening_mode.png"))
    args = parser.parse_args()
    src = Path(args.workspace).expanduser().resolve()
    if not (src / "workspace.sqlite").is_file():
        print(f"{src} is not a workspace: kbcurate demo --no-serve -w {src} -q", file=sys.stderr)
        return 2
    from browser_support import CHROMIUM, FLAGS, serving
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = copy_workspace(src, Path(tmp) / "ws")
        with serving(root, {"USER": "maria", "HOME": tmp}) as url, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(url)
            page.get_by_label("Search relations").fill("BRAF V600E")
            page.get_by_label("Search relations").press("Enter")
            page.get_by_text("Labelled 0 of").first.wait_for(timeout=120_000)
            page.locator(".st-key-view_mode").get_by_text("Screening").click()
            page.get_by_text("Abstract 1 of").first.wait_for(timeout=60_000)
            page.locator("h3").first.click()
            page.keyboard.press("1")
            page.get_by_text("Abstract 2 of").first.wait_for(timeout=60_000)
            page.get_by_text("Abstract 2 of").first.evaluate(  # the screening panel on top
                "el => el.scrollIntoView({block: 'start'})")
            time.sleep(1.0)  # fonts and marks settle
            page.screenshot(path=args.out)
            browser.close()
    print(f"wrote {args.out} ({os.path.getsize(args.out):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
