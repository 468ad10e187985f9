"""Screenshots of results/explorer.html for the README (docs/explorer-*.png), taken in the system Chromium.

    python docs/explorer_screenshots.py results/explorer.html [--task rte] [--layer 2 --head 7] [--tokens-example 1]

Playwright's Python API drives Debian's Chromium (apt-get install chromium); nothing downloads a browser.
Each PNG is cut to its view, scaled to at most 1200 px wide and palette-quantised to stay small.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
from pathlib import Path

from PIL import Image


def _save(png: bytes, path: Path, width: int = 1200) -> None:
    im = Image.open(io.BytesIO(png)).convert("RGB")
    if im.width > width:
        im = im.resize((width, round(im.height * width / im.width)), Image.LANCZOS)
    im.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
    print(f"{path}: {im.width}x{im.height}, {path.stat().st_size / 1e3:.0f} kB")


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser()
    ap.add_argument("page", type=Path)
    ap.add_argument("--task", default="rte")
    ap.add_argument("--layer", type=int, default=1, help="0-based, as in the CSVs")
    ap.add_argument("--head", type=int, default=6)
    ap.add_argument("--example", type=int, default=3)
    ap.add_argument("--tokens-example", type=int, default=0,
                    help="the example of the token views (the page lists those with every view first)")
    ap.add_argument("--metric", default="sieve:delimiter")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    exe = os.environ.get("BERTOLOGY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    url = args.page.resolve().as_uri()
    views = {
        "overview": (f"task={args.task}&view=overview&ov=all&metric={args.metric}&layer={args.layer}&head={args.head}",
                     "#overview .card"),
        "head": (f"task={args.task}&view=head&layer={args.layer}&head={args.head}&example={args.example}", "#head"),
        "example": (f"task={args.task}&view=example&example={args.example}&gamma=0.5", "#example .card:last-child"),
        "tokens": (f"task={args.task}&view=example&example={args.tokens_example}", "#token-views"),
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        for name, (state, selector) in views.items():
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}#{state}")
            while page.evaluate("document.body.dataset.busy") != "0":
                page.wait_for_timeout(50)
            page.add_style_tag(content="header{position:static}")  # the sticky bar would cover the view's top
            _save(page.locator(selector).screenshot(), args.out / f"explorer-{name}.png",
                  width=1000 if name == "head" else 1200)
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
