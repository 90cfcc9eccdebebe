"""Translated subtitles as a viewer gets them: Chromium (headless, driven by Playwright) reads a
WebVTT file and what ``mt translate --input film.vtt`` wrote as a video's text track. The same
cues (identifiers, times, settings), the same markup in each (a voice, a class, italics,
timestamps), and what each shows is the translation: a sentence across two cues translated
whole and shared out between them."""

from __future__ import annotations

import re

import pytest

from tests.helpers import run_cli

pytest.importorskip("playwright")

VTT = """WEBVTT - Ein Film

STYLE
::cue(.gelb) { color: yellow }

NOTE nicht übersetzt

eins
00:00:01.000 --> 00:00:02.500 align:start position:10%
<v Anna>Ein Mann in einem blauen Hemd

zwei
00:00:02.600 --> 00:00:04.000 line:0 size:80%
<v Anna>fährt mit dem <c.gelb>Fahrrad</c>
durch die Stadt.

00:00:05.000 --> 00:00:06.000
♪

00:00:08.000 --> 00:00:10.000 vertical:rl
Zwei <i>Hunde</i> &amp; eine Katze spielen.

00:00:11.000 --> 00:00:13.000
Eine <00:00:11.500>Frau <00:00:12.000>liest.
"""
SENTENCES = ["Ein Mann in einem blauen Hemd fährt mit dem Fahrrad durch die Stadt.",
             "Zwei Hunde & eine Katze spielen.", "Eine Frau liest."]
BLOCKS = [(0, 2), (3, 4), (4, 5)]  # the cues each sentence is shown in (a "♪" is none)

# each cue as the browser reads it: its settings, the markup it shows (elements with their
# class and title, timestamps) and the text it shows
CUES = """name => new Promise((resolve, reject) => {
    const track = document.createElement('track');
    track.src = name;
    track.onload = () => resolve(Array.from(track.track.cues, cue => {
        const shown = cue.getCueAsHTML(), markup = [];
        const walk = document.createTreeWalker(shown, NodeFilter.SHOW_ELEMENT |
                                               NodeFilter.SHOW_PROCESSING_INSTRUCTION);
        while (walk.nextNode()) {
            const n = walk.currentNode;
            markup.push(n.nodeType === Node.ELEMENT_NODE
                ? [n.localName, n.className, n.title].join(' ') : n.target + ' ' + n.data);
        }
        return {id: cue.id, start: cue.startTime, end: cue.endTime, align: cue.align,
                position: cue.position, line: cue.line, size: cue.size,
                vertical: cue.vertical, markup, text: shown.textContent};
    }));
    track.onerror = () => reject(new Error('the track ' + name + ' did not load'));
    document.querySelector('video').appendChild(track);
    track.track.mode = 'hidden';
})"""


def test_chromium_shows_the_translated_cues_where_the_source_had_them(browser, trained_run,
                                                                      tmp_path):
    from transformer_mt.translate import Translator

    checkpoint = trained_run[0] / "best.pt"
    (tmp_path / "film.vtt").write_text(VTT, encoding="utf-8")
    result = run_cli(["translate", "--checkpoint", str(checkpoint), "--input",
                      str(tmp_path / "film.vtt"), "--output", str(tmp_path / "film.en.vtt")])
    assert result.returncode == 0, result.stderr
    files = {name: (tmp_path / name).read_bytes() for name in ("film.vtt", "film.en.vtt")}
    page = browser.new_page()
    page.route("http://subtitles.test/**", lambda route: route.fulfill(
        body=files.get(route.request.url.rsplit("/", 1)[1], b"<!doctype html><video></video>"),
        content_type="text/vtt" if route.request.url.endswith(".vtt") else "text/html"))
    page.goto("http://subtitles.test/")
    source, translated = (page.evaluate(CUES, name) for name in files)
    page.close()
    assert len(source) == 5 and source[0]["id"] == "eins" and source[0]["align"] == "start"
    assert [{k: v for k, v in cue.items() if k != "text"} for cue in translated] == [
        {k: v for k, v in cue.items() if k != "text"} for cue in source]
    shown = [" ".join(cue["text"].split()) for cue in translated]
    expected = Translator.load(checkpoint, "cpu").translate(SENTENCES)
    for (a, b), translation in zip(BLOCKS, expected, strict=True):
        assert " ".join(shown[a:b]) == translation  # "<unk>" shown as the model wrote it
    assert shown[2] == "♪"
    if len(re.findall(r"\w+", expected[0])) >= 2:  # both cues of the sentence show words
        assert all(re.search(r"\w", text) for text in shown[:2])
