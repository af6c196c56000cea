"""Screenshots of every `orch ui` page for docs/ui/ (PNG), taken in headless Chromium.

    orch submit examples/quickstart_tiny.yaml --executor local --db sqlite:///q.db
    orch ui --db sqlite:///q.db --port 8300 &
    python bench/ui_screenshots.py --url http://127.0.0.1:8300 --sweep quickstart-tiny -o docs/ui

Needs the `ui` extra (playwright) and a Chromium (Debian's /usr/bin/chromium by default).
"""

from __future__ import annotations

import argparse
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def small(path: Path) -> None:
    """Shrink a screenshot: 256 colours (the pages are flat colours and text)."""
    from PIL import Image

    with Image.open(path) as im:
        im.convert("RGB").quantize(colors=256).save(path, optimize=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8300")
    ap.add_argument("--sweep", default="quickstart-tiny")
    ap.add_argument("--trial", type=int, default=3)
    ap.add_argument("--other", default=None, help="a second sweep for the compare page")
    ap.add_argument("-o", "--out", default="docs/ui")
    ap.add_argument("--chromium", default=CHROMIUM)
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    other = a.other or a.sweep
    shots = {
        "sweeps": ("/", "#sweeps-table"),
        "sweep": (f"/sweep/{a.sweep}", "#compare-table"),
        "sweep-figures": (f"/sweep/{a.sweep}", "#figures svg"),
        "trial": (f"/trial/{a.trial}", "#prompts-table"),
        "compare": (f"/compare?a={a.sweep}&b={other}", "#compare2-table"),
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=a.chromium, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for name, (path, ready) in shots.items():
            page.goto(a.url + path)
            page.wait_for_selector(ready)
            if name == "sweep-figures":
                page.locator("#figures").scroll_into_view_if_needed()
                page.locator("#figures").screenshot(path=str(out / f"{name}.png"))
            else:
                page.screenshot(path=str(out / f"{name}.png"))
            small(out / f"{name}.png")
            print(out / f"{name}.png")
        browser.close()


if __name__ == "__main__":
    main()
