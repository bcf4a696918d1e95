"""Record how the built site looks: the paper PDF's first pages, the blog's first screen on a desktop and a phone,
and the paper on a phone, as PNGs under docs/ (for review; the browser tests in nbs/91_site check the pages).

Needs a built site (python -m gradient_quarantine.site --out SITE), headless Chromium and, for the PDF pages,
pdftoppm from Debian's poppler-utils.

Usage: python scripts/site_screenshots.py SITE [docs]
"""
import shutil, subprocess, sys
from pathlib import Path
from gradient_quarantine.site import CHROMIUM_ARGS, require_browser, serve

site, docs = Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) > 2 else "docs")
docs.mkdir(exist_ok=True)
if not shutil.which("pdftoppm"): sys.exit("pdftoppm not found: apt-get install -y poppler-utils")
subprocess.run(["pdftoppm", "-r", "60", "-png", "-f", "1", "-l", "2", str(site/"paper"/"paper.pdf"),
                str(docs/"paper_pdf_page")], check=True)

from playwright.sync_api import sync_playwright
SHOTS = {"blog_desktop_first_screen.png": ("paper/blog.html", 1280, 900),
         "blog_phone_first_screen.png": ("paper/blog.html", 390, 844),
         "paper_phone_first_screen.png": ("paper/paper.html", 390, 844)}
with serve(site) as base, sync_playwright() as pw:
    browser = pw.chromium.launch(executable_path=require_browser(), headless=True, args=CHROMIUM_ARGS)
    for name, (page, width, height) in SHOTS.items():
        tab = browser.new_page(viewport={"width": width, "height": height})
        tab.goto(base + page, wait_until="load")
        if tab.locator("script[src*='MathJax.js']").count():
            tab.wait_for_selector("html[data-math=done]", state="attached")
        if tab.locator("div.plotly-graph-div").count(): tab.wait_for_selector("svg.main-svg")
        tab.screenshot(path=str(docs/name))
        tab.close()
    browser.close()
print("wrote", sorted(p.name for p in docs.glob("*.png")))
