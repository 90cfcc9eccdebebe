"""mt serve as a user runs it: a real process on a free port. SIGTERM lets the requests in
flight finish and exits 0; the page works in a real browser (headless Chromium)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bench.common import post, start_server

pytestmark = pytest.mark.system  # tiers: tests/conftest.py
pytest.importorskip("fastapi")

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


def test_sigterm_finishes_what_is_in_flight_and_exits_0(trained_run):
    proc, url = start_server(trained_run[0] / "best.pt", "--grace", "60")
    sentences = [f"Ein Hund läuft {i} mal über die große grüne Wiese." for i in range(96)]
    answer: list = []
    sender = threading.Thread(target=lambda: answer.append(
        post(url + "/v1/translate", {"text": sentences, "beam": 5})))
    sender.start()
    time.sleep(0.5)  # the request is in flight (it takes seconds)
    proc.send_signal(signal.SIGTERM)
    sender.join(120)
    _, err = proc.communicate(timeout=120)
    assert answer and answer[0][0] == 200, (answer, err)
    assert len(answer[0][1]["translations"]) == 96
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    with pytest.raises(urllib.error.URLError):  # and it no longer listens
        urllib.request.urlopen(url + "/health", timeout=2)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_the_page_translates_and_draws_attention_in_chromium(trained_run, tmp_path):
    """Headless Chromium loads the page, translates a sentence, and shows the translation and
    a heatmap with something drawn on it; the screenshot is kept as an artifact
    ($MT_TEST_ARTIFACTS, else the test's temporary directory)."""
    chromium = _chromium()
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs the browser test: install Debian's chromium (.ci/run does)")
        pytest.skip("Debian's chromium is not installed (apt install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    artifacts = Path(os.environ.get("MT_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    proc, url = start_server(trained_run[0] / "best.pt")
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True,
                                        args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + "/")
            page.fill("#source", "Ein Hund läuft über die Wiese.")
            page.click("#translate")
            page.wait_for_selector(".translation", timeout=60_000)
            page.wait_for_selector("#steps tr", timeout=60_000)
            page.wait_for_selector("#beam-steps tr", timeout=60_000)  # beam 5 by default
            translation = page.inner_text(".translation")
            kept = page.eval_on_selector_all("#beam-steps tr", "rows => rows.length")
            drawn = page.evaluate("""() => {
                const c = document.getElementById('heatmap');
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                let blue = 0;
                for (let i = 0; i < d.length; i += 4) if (d[i + 2] > d[i] + 30) blue++;
                return {blue, width: c.width, height: c.height};
            }""")
            page.screenshot(path=str(artifacts / "serve_page.png"), full_page=True)
            browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert not errors, errors
    assert translation.strip() and kept > 0
    assert drawn["blue"] > 100 and drawn["width"] > 100, drawn
    assert (artifacts / "serve_page.png").stat().st_size > 10_000
