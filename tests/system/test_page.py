"""mt serve's page in a real browser (headless Chromium driven by Playwright), as a learner uses
it: translate, type the start of a translation and watch it finished, click a word for the
alternatives there and pick one, move the sampling sliders, browse every layer's and head's
attention, open the beam's pruned branches; axe-core finds no accessibility violation, and it
fits a phone's width. Screenshots are kept ($MT_TEST_ARTIFACTS, else the test's directory)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.helpers import (
    open_page,
    page_tokens,
    post,
    slide,
    start_server,
    translate_on_page,
    writing_unk,
)

pytest.importorskip("fastapi")

SOURCE = "Zwei Hunde schwimmen im Park."
UNKNOWN = "Zwei Hunde schwimmen in Tübingen."  # a word the tiny run's vocabulary lacks


@pytest.fixture(scope="module")
def server(trained_run, subword_run):
    """The tiny run's best checkpoint (its run directory is what the page shows across
    training) compared with the SentencePiece one; ``make screenshots`` serves the demo model
    instead ($MT_PAGE_CHECKPOINT, $MT_PAGE_COMPARE)."""
    checkpoint = os.environ.get("MT_PAGE_CHECKPOINT", trained_run[0] / "best.pt")
    compare = os.environ.get("MT_PAGE_COMPARE", subword_run / "best.pt")
    proc, url = start_server(Path(checkpoint), "--compare", str(compare))
    yield url
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)


@pytest.fixture(scope="module")
def unk_server(trained_run, tmp_path_factory):
    """The tiny run made to write ``<unk>`` (``helpers.writing_unk``), served."""
    proc, url = start_server(writing_unk(trained_run[0] / "best.pt", UNKNOWN,
                                         tmp_path_factory.mktemp("unk") / "unk.pt"))
    yield url
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)


@pytest.fixture(scope="module")
def export_server(trained_run, tmp_path_factory):
    """The tiny run's best checkpoint exported for CTranslate2, served."""
    pytest.importorskip("ctranslate2")
    from transformer_mt.formats.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(trained_run[0] / "best.pt", tmp_path_factory.mktemp("ct2") / "m")
    proc, url = start_server(out)
    yield url
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)


def _browse_attention(page) -> None:
    """Every layer's and head's attention, of each kind, and one of them large."""
    model = page.evaluate("fetch('/v1/info').then(r => r.json()).then(i => i.model)")
    for kind, layers in (("attention", model["decoder_layers"]),
                         ("encoder_attention", model["encoder_layers"]),
                         ("decoder_attention", model["decoder_layers"])):
        page.select_option("#kind", kind)
        cells = page.eval_on_selector_all("#grid button", "xs => xs.length")
        assert cells == layers * (model["heads"] + 1)
        page.click("#grid button >> nth=0")
        assert page.get_attribute("#grid button >> nth=0", "aria-pressed") == "true"
        assert "layer 1, head 1" in page.inner_text("#heatmap-caption")
    drawn = page.evaluate("""() => {
        const c = document.getElementById('heatmap');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let blue = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 2] > d[i] + 30) blue++;
        return blue; }""")
    assert drawn > 100


def _one_log_prob_a_hypothesis(page) -> None:
    """One hypothesis, one log-probability: the row's is the beam tree's for its ending."""
    ended = page.inner_text("#beam-tree li.on-path > .ended")
    assert f"log-prob {ended.split('log-prob ')[1].split(',')[0]} " in \
        page.inner_text("#row-0 .score")


def _two_sentences_on_a_line(page) -> None:
    """What was shown of the sentence before goes, and the page says what to type (not the
    API's words)."""
    assert page.is_visible("#inside")
    page.fill("#source", "Zwei Hunde spielen. Ein Mann liest.")
    page.click("#translate")
    page.wait_for_function("document.getElementById('status').textContent"
                           ".includes('type one sentence per line')", timeout=60_000)
    assert page.is_hidden("#inside")


def _pick_an_alternative(page, server: str) -> None:
    """A word's alternatives, and one picked: decoding goes on from it (the prefix typed
    before, "Two dogs ", and the word picked are the API's prefix)."""
    page.click("#row-0 .tok >> nth=2")
    page.wait_for_selector("#alternatives-list li", timeout=60_000)
    offered = page.eval_on_selector_all("#alternatives-list button", "xs => xs.map(x => ({"
                                        "text: x.textContent, disabled: x.disabled}))")
    assert len(offered) == 5
    pick = next(i for i, o in enumerate(offered) if not o["disabled"] and i > 0)
    page.click(f"#alternatives-list li >> nth={pick} >> button")
    word = offered[pick]["text"].split(" ")[0]
    page.wait_for_function(f"document.getElementById('prefix').value === {f'Two dogs {word} '!r}")
    page.wait_for_function("document.querySelectorAll('#row-0 .tok.forced').length === 3",
                           timeout=60_000)  # the answer to the new prefix is shown
    assert page_tokens(page)[2] == word
    _, picked = post(server + "/v1/translate", {"text": SOURCE, "beam_size": 5,
                                                "prefix": f"Two dogs {word} "})
    assert page_tokens(page) == picked["translations"][0]["tokens"]


def _open_pruned_branches(page) -> None:
    """The beam's pruned branches open."""
    hidden = page.eval_on_selector_all("#beam-tree details", "ds => ds.length")
    assert hidden > 0
    page.click("#beam-tree details summary >> nth=0")
    assert page.eval_on_selector("#beam-tree details", "d => d.open")
    assert "ended" in page.inner_text("#beam-tree")


def test_a_learner_steers_the_decoder_on_the_page(server, browser, tmp_path):
    artifacts = Path(os.environ.get("MT_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    page, problems = open_page(browser, server)
    page.eval_on_selector("#beam", "s => { s.value = 5; s.dispatchEvent(new Event('input')); }")
    translate_on_page(page, SOURCE)
    _, api = post(server + "/v1/translate", {"text": SOURCE, "beam_size": 5})
    assert page_tokens(page) == api["translations"][0]["tokens"]  # (the server's beam: 1)
    assert page.eval_on_selector_all("#beam-tree li", "xs => xs.length") > 3
    _one_log_prob_a_hypothesis(page)

    # type the start of a translation: the model finishes it, the typed words marked forced
    page.fill("#prefix", "Two dogs ")
    page.wait_for_function("document.querySelectorAll('#row-0 .tok.forced').length === 2",
                           timeout=60_000)
    assert page_tokens(page)[:2] == ["Two", "dogs"]
    _, forced = post(server + "/v1/translate", {"text": SOURCE, "beam_size": 5,
                                                "prefix": "Two dogs "})
    assert page_tokens(page) == forced["translations"][0]["tokens"]

    _pick_an_alternative(page, server)
    _browse_attention(page)

    _open_pruned_branches(page)

    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page)
    assert found.violations_count == 0, found.generate_snapshot()
    page.screenshot(path=str(artifacts / "serve.png"), full_page=True)

    # sampling: the sliders draw seeded translations, the chosen one the API's (its n-best's
    # first: the first draw)
    page.fill("#prefix", "")
    slide(page, "topk", 5)
    page.fill("#seed", "3")
    page.dispatch_event("#seed", "change")
    page.wait_for_function("document.getElementById('beam-part').hidden", timeout=60_000)
    assert page.is_disabled("#beam")
    page.wait_for_timeout(500)
    page.wait_for_selector("#row-0 .tok", timeout=60_000)
    _, sampled = post(server + "/v1/translate", {"text": SOURCE, "sample_topk": 5,
                                                 "sample_seed": 3, "temperature": 1.0,
                                                 "top_p": 1.0})
    page.wait_for_function(f"""() => document.querySelector('#row-0 .translation')
        .textContent === {sampled['translations'][0]['text']!r}""", timeout=60_000)
    assert not problems, problems
    _two_sentences_on_a_line(page)


def _look_deeper(page, server: str) -> None:
    """The four panels of "look deeper", each showing what its API answers."""
    tokens = page_tokens(page)
    page.click("#lens-go")
    page.wait_for_selector("#lens th[scope=row]", timeout=60_000)
    _, lens = post(server + "/v1/lens", {"text": SOURCE, "tokens": tokens, "k": 3})
    rows = page.eval_on_selector_all("#lens tr", "rs => rs.map(r => [...r.children].map("
                                     "c => c.textContent))")
    assert rows[0] == ["written", *lens["layers"]] and len(rows) == len(tokens) + 2
    assert [r[0] for r in rows[1:]] == lens["output"] == [*tokens, "<eos>"]
    last = [f"{layer[-1][0][0]} · {100 * p:.0f} %" for layer, p in
            zip([lens["top"][-1]], [lens["written"][-1][-1]], strict=True)]
    assert rows[-1][-1] == last[0]  # <eos> in the last layer

    page.select_option("#kind", "attention")
    page.click("#grid button >> nth=0")  # layer 1, head 1 of the cross-attention
    page.click("#switch-head")
    assert page.input_value("#switches") == "cross:1:1"
    page.click("#switch-go")
    page.wait_for_selector("#switch-summary", timeout=60_000)
    _, switched = post(server + "/v1/switch", {"text": SOURCE, "switches": ["cross:1:1"]})
    assert switched["switched"]["text"] in page.inner_text("#switched")
    was, now = switched["trained"]["tokens"], switched["switched"]["tokens"]
    changed = sum(i >= len(was) or was[i] != t for i, t in enumerate(now))  # (longer: new)
    assert page.eval_on_selector_all("#switched .changed", "xs => xs.length") == changed

    page.click("#run-go")
    page.wait_for_selector("#run-part:not([hidden])", timeout=120_000)
    _, run = post(server + "/v1/run", {"text": SOURCE})
    shown = page.eval_on_selector_all("#run-table tr", "rs => rs.slice(1).map(r => "
                                      "r.children[3].textContent)")
    assert shown == [c["text"] for c in run["checkpoints"]]
    slide(page, "run-slider", 0)
    first = run["checkpoints"][0]
    assert page.inner_text("#run-out").startswith(f"step {first['step']} ({first['name']})")
    assert page.eval_on_selector_all("#run-links td.on", "xs => xs.length") == \
        len(first["links"])

    page.click("#compare-go")
    page.wait_for_selector("#compare-table", timeout=60_000)
    _, compared = post(server + "/v1/compare", {"text": SOURCE})
    texts = page.eval_on_selector_all("#compare-table tr", "rs => rs.slice(1).map(r => "
                                      "r.children[1].textContent)")
    assert texts == [m["text"] for m in compared["models"]]


def test_a_learner_looks_deeper(server, browser, tmp_path):
    """The logit lens, a head switched off, the sentence across the run, and a second model,
    on the page; axe finds nothing, and a screenshot shows them (docs/walkthrough.md)."""
    artifacts = Path(os.environ.get("MT_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    page, problems = open_page(browser, server)
    translate_on_page(page, SOURCE)
    _look_deeper(page, server)
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page)
    assert found.violations_count == 0, found.generate_snapshot()
    page.locator("#deeper").screenshot(path=str(artifacts / "look_inside.png"))
    assert not problems, problems
    # a new sentence: what was shown of the one before goes
    translate_on_page(page, "Ein Mann liest.")
    page.wait_for_function("document.querySelectorAll('#lens tr').length === 0")
    assert page.is_hidden("#run-part") and not page.inner_text("#switched")


def test_a_word_the_model_cannot_write_is_copied_and_goes_on_from(unk_server, browser):
    """A word model's ``<unk>`` shows as the source word it is copied from, marked (the logit
    lens shows the ``<unk>`` written there; a switch the word); clicking the word after it
    offers alternatives (the prefix that holds the copied word is forced as ``<unk>`` and
    written as it is), and picking one decodes on from there."""
    page, problems = open_page(browser, unk_server)
    translate_on_page(page, UNKNOWN)
    assert page_tokens(page)[0] == "Tübingen" and "<unk>" not in page.inner_text("#row-0")
    assert "copied" in (page.get_attribute("#row-0 .tok >> nth=0", "class") or "")
    assert "<unk>" in (page.get_attribute("#row-0 .tok >> nth=0", "title") or "")
    page.click("#lens-go")  # looking deeper: the logit lens reads the copy as its <unk>
    page.wait_for_selector("#lens th[scope=row]", timeout=60_000)
    assert page.inner_text("#lens th[scope=row] >> nth=0") == "<unk>"
    page.fill("#switches", "cross:1:1")  # switched or not, it shows the word, as it translates
    page.click("#switch-go")
    page.wait_for_selector("#switch-summary", timeout=60_000)
    assert "Tübingen" in page.inner_text("#switched") and "<unk>" not in page.inner_text(
        "#switched")
    page.click("#row-0 .tok >> nth=1")
    page.wait_for_selector("#alternatives-list li", timeout=60_000)
    offered = page.eval_on_selector_all("#alternatives-list button",
                                        "xs => xs.map(x => x.textContent)")
    assert offered and all(o.split(" → ", 1)[1].startswith("Tübingen ") for o in offered), offered
    page.click("#alternatives-list li >> nth=0 >> button")
    page.wait_for_function("document.getElementById('prefix').value.startsWith('Tübingen ')")
    page.wait_for_function("document.querySelectorAll('#row-0 .tok.forced').length === 2",
                           timeout=60_000)
    assert page_tokens(page)[0] == "Tübingen" and not problems, problems


def test_an_exported_model_translates_on_the_page_and_says_why_nothing_shows_inside(
        export_server, browser):
    """A CTranslate2 export's translations, each line's, with no error: the page does not
    ask to look inside (the API's 422 for attention), and says what would."""
    page, problems = open_page(browser, export_server)
    page.wait_for_function("document.getElementById('about').textContent.includes('engine')")
    page.fill("#source", SOURCE + "\nEin Mann liest.")
    page.click("#translate")
    page.wait_for_selector("#row-1 .translation", timeout=60_000)
    _, found = post(export_server + "/v1/translate", {"text": [SOURCE, "Ein Mann liest."],
                                                      "beam_size": int(page.input_value("#beam"))})
    assert page.eval_on_selector_all("#results .translation", "xs => xs.map(x => x.textContent)"
                                     ) == [t["text"] for t in found["translations"]]
    page.wait_for_selector("#status .muted", timeout=60_000)
    assert "PyTorch checkpoint" in page.inner_text("#status") and not page.query_selector(
        "#status .error")
    assert page.is_hidden("#inside") and page.is_hidden("#deeper")
    assert page.is_disabled("#prefix") and not problems, problems


def test_a_file_is_translated_on_the_page_as_translate_file_does(server, browser, translator,
                                                                 tmp_path):
    """A file chosen on the page comes back as a link whose download is what
    ``translate_file`` writes (markup kept, a sentence across a line break read whole); a
    file not read here says why, in one line, and the page goes on; axe finds nothing."""
    from axe_playwright_python.sync_playwright import Axe

    from transformer_mt.translate.files import translate_file

    page, problems = open_page(browser, server)
    page.wait_for_function("document.getElementById('file-note').textContent.includes('.docx')")
    assert ".html" in page.get_attribute("#file", "accept").split(",")
    source = "<p>Zwei Hunde <b>schwimmen</b><br>im Park.</p>\n<p>Ein Mann liest.</p>\n"
    (tmp_path / "seite.html").write_text(source, encoding="utf-8")
    page.set_input_files("#file", str(tmp_path / "seite.html"))
    page.click("#file-go")
    page.wait_for_selector("#file-link", timeout=60_000)
    with page.expect_download() as download:
        page.click("#file-link")
    assert download.value.suggested_filename == "seite.html"
    assert Path(download.value.path()).read_bytes() == translate_file(
        translator, "seite.html", source.encode())
    assert Axe().run(page).violations_count == 0 and not problems, problems
    (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.7\n")
    page.set_input_files("#file", str(tmp_path / "scan.pdf"))
    page.click("#file-go")
    page.wait_for_selector("#file-status .error", timeout=60_000)
    assert "'scan.pdf' is not a PDF that can be read" in page.inner_text("#file-status")
    assert problems == ["Failed to load resource: the server responded with a status of 400 "
                        "(Bad Request)"]  # (the browser's own line, on its console)


def test_the_pages_example_is_german_only_for_a_german_model(server, browser):
    """A model of another source language (its /v1/info said so here) opens on an empty box
    that names the language, not on the German example; the German model on the example."""
    page, problems = open_page(browser, server)
    assert page.input_value("#source").startswith("Ein Hund") and not problems, problems
    page = browser.new_page()
    page.route("**/v1/info", lambda route: route.fulfill(
        json={**route.fetch().json(), "source_language": "fr"}))
    page.goto(server + "/")
    page.wait_for_function("document.getElementById('about').textContent.startsWith('fr')")
    assert page.input_value("#source") == "" and "in fr" in page.get_attribute(
        "#source", "placeholder")


def test_a_learner_bars_a_models_loops_on_the_page(server, browser):
    """The "no repeat" box and the beam start at the server's settings (/v1/info says 1 and 3
    here) and go with every request: the API's translation with them (without: another)."""
    def barring(route) -> None:  # (what mt serve --no-repeat-ngram-size 1 --beam-size 3 says)
        route.fulfill(json={**(i := route.fetch().json()), "decode": {
            **i["decode"], "no_repeat_ngram_size": 1, "beam_size": 3}})

    page = browser.new_page(viewport={"width": 1000, "height": 900})
    page.route("**/v1/info", barring)
    page.goto(server + "/")
    page.wait_for_function("document.getElementById('about').textContent.includes('heads')")
    assert page.input_value("#norepeat") == "1" and page.input_value("#beam") == "3"
    translate_on_page(page, SOURCE)
    api = [post(server + "/v1/translate", {"text": SOURCE, "beam_size": 3, "no_repeat_ngram_size":
                                           n})[1]["translations"][0] for n in (0, 1)]
    assert api[0]["text"] != api[1]["text"] and page_tokens(page) == api[1]["tokens"]
    page.fill("#norepeat", "0")
    page.dispatch_event("#norepeat", "change")
    page.wait_for_function(f"""() => document.querySelector('#row-0 .translation')
        .textContent === {api[0]["text"]!r}""", timeout=60_000)


def test_the_page_fits_a_phone(server, browser, tmp_path):
    artifacts = Path(os.environ.get("MT_TEST_ARTIFACTS", tmp_path))
    page, problems = open_page(browser, server, width=390, height=844)
    translate_on_page(page, SOURCE)
    page.click("#lens-go")
    page.wait_for_selector("#lens th[scope=row]", timeout=60_000)
    page.click("#run-go")
    page.wait_for_selector("#run-part:not([hidden])", timeout=120_000)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(artifacts / "serve_phone.png"), full_page=True)
    assert not problems, problems


def test_swagger_ui_renders_every_operation(server, browser, tmp_path):
    """/docs as a user sees it: Swagger UI reads the OpenAPI document FastAPI writes (3.1)
    and lists every operation, with no error and nothing fetched from elsewhere."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.goto(server + "/docs")
    page.wait_for_selector(".opblock-summary-path", timeout=30_000)
    shown = set(page.eval_on_selector_all(
        ".opblock-summary-path", "xs => xs.map(x => x.getAttribute('data-path'))"))
    spec = page.evaluate("fetch('/openapi.json').then(r => r.json())")
    assert spec["openapi"].startswith("3.1")
    assert shown == set(spec["paths"]) and "/v1/translate" in shown
    assert "Unable to render" not in page.inner_text("body") and not failed
    artifacts = Path(os.environ.get("MT_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(artifacts / "docs.png"))

