"""Subtitles translated whole (translate/subtitles.py), as SubRip, WebVTT and SubStation Alpha:
a subtitle's tags kept around its words, a sentence across subtitles translated whole and
shared out, a dialogue's lines translated apart, each after its speaker's dash. Read back by
the formats' own libraries (test_files.py: each format's structure; test_subtitles_browser.py:
a browser's text track)."""

from __future__ import annotations

import re

import pytest

srt = pytest.importorskip("srt")
pysubs2 = pytest.importorskip("pysubs2")

from tests.integration.test_files import ASS  # noqa: E402
from transformer_mt.translate.files import translate_file  # noqa: E402


def test_subtitles_keep_their_tags_around_their_words(translator):
    """A subtitle's tags (italics, bold, a position override) are kept as they are, not read
    as words (the model was given "<i>" and wrote what it made of it); the text between them
    is the sentence's translation; an ampersand stays one."""
    subtitles = ("1\n00:00:01,000 --> 00:00:03,000\n{\\an8}<i>Ein Hund läuft.</i>\n\n"
                 "2\n00:00:04,000 --> 00:00:06,000\nEin Mann fährt <b>Fahrrad</b>\n"
                 "und <font color=\"red\">Tom & Jerry</font> spielen.\n\n")
    out = list(srt.parse(translate_file(translator, "tags.srt", subtitles.encode()).decode()))
    dog, man = translator.translate(["Ein Hund läuft.",
                                     "Ein Mann fährt Fahrrad und Tom & Jerry spielen."])
    assert out[0].content == "{\\an8}<i>" + dog + "</i>"
    tags = re.findall(r"<[^>]+>", out[1].content)
    assert tags == ["<b>", "</b>", '<font color="red">', "</font>"]
    assert " ".join(re.sub(r"<[^>]+>", "", out[1].content).split()) == man
    assert "&amp;" not in out[1].content


def test_a_sentence_across_subtitles_is_translated_whole_and_shared_out(translator):
    """A sentence that runs on into the next subtitles (up to 3) is translated whole, each of
    them showing a part of its translation (one with words gets words), timings and tags as
    they were; a subtitle that ends a sentence is not joined to the next."""
    cues = ["Ein Mann fährt", "<i>mit dem Fahrrad.</i>", "Zwei Hunde spielen im Schnee.",
            "Eine Frau", "liest", "ein", "Buch."]
    subtitles = "".join(f"{i}\n00:00:0{i},000 --> 00:00:0{i},900\n{cue}\n\n"
                        for i, cue in enumerate(cues, 1))
    out = list(srt.parse(translate_file(translator, "film.srt", subtitles.encode()).decode()))
    assert [(s.index, s.start, s.end) for s in out] == [
        (s.index, s.start, s.end) for s in srt.parse(subtitles)]
    texts = [re.sub(r"<[^>]+>", "", s.content) for s in out]
    wholes = ["Ein Mann fährt mit dem Fahrrad.", "Zwei Hunde spielen im Schnee.",
              "Eine Frau liest ein", "Buch."]  # the third: 3 subtitles at most
    blocks = [(0, 2), (2, 3), (3, 6), (6, 7)]
    for (a, b), translation in zip(blocks, translator.translate(wholes), strict=True):
        assert " ".join(" ".join(texts[a:b]).split()) == translation
        if len(re.findall(r"\w+", translation)) >= b - a:  # enough words to go round
            assert all(re.search(r"\w", text) for text in texts[a:b])
    assert out[1].content.startswith("<i>") and out[1].content.endswith("</i>")


@pytest.mark.parametrize("name", ["film.srt", "film.vtt", "film.ass"])
def test_a_dialogues_lines_are_translated_apart_each_with_its_speakers_dash(translator, name):
    """A cue of two speakers (a dash begins a line after the first; with a space after it or
    none, after a tag or not) shows each line's translation on its line, after its dash,
    the dash not read as a word; a cue with one dashed line is one text."""
    cues = [["- Wohin gehst du?", "- Nach Hause."], ["<i>Wer ist das?</i>", "<i>-Ein Mann.</i>"],
            ["- Ein Mann fährt", "mit dem Fahrrad."]]
    if name.endswith(".srt"):
        text = "".join(f"{i}\n00:00:0{i},000 --> 00:00:0{i},900\n" + "\n".join(cue) + "\n\n"
                       for i, cue in enumerate(cues, 1))
        shown = [s.content.split("\n") for s in srt.parse(translate_file(
            translator, name, text.encode()).decode())]
    elif name.endswith(".vtt"):
        text = "WEBVTT\n\n" + "".join(f"00:0{i}.000 --> 00:0{i}.900\n" + "\n".join(cue) + "\n\n"
                                      for i, cue in enumerate(cues, 1))
        out = translate_file(translator, name, text.encode()).decode()
        shown = [block.split("\n")[1:] for block in out.strip().split("\n\n")[1:]]
    else:
        text = ASS.split("Dialogue:")[0] + "".join(
            f"Dialogue: 0,0:00:0{i}.00,0:00:0{i}.90,Default,,0,0,0,," + "\\N".join(cue) + "\n"
            for i, cue in enumerate(cues, 1))
        shown = [e.text.split("\\N") for e in pysubs2.SSAFile.from_string(
            translate_file(translator, name, text.encode()).decode())]
    where, home, who, man, rides = translator.translate(
        ["Wohin gehst du?", "Nach Hause.", "Wer ist das?", "Ein Mann.",
         "Ein Mann fährt mit dem Fahrrad."])
    assert shown[0] == [f"- {where}", f"- {home}"]
    assert shown[1] == [f"<i>{who}</i>", f"<i>-{man}</i>"]
    assert shown[2][0].startswith("- ") and " ".join(shown[2])[2:] == rides
