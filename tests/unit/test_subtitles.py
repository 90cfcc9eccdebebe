"""Subtitle files read as cues and written back (``translate/subtitles.py``): a WebVTT file
keeps every line but its cues' text byte for byte; the text between tags is unescaped to be
translated and escaped again."""

from __future__ import annotations

import re

import pytest

from transformer_mt.errors import MTError
from transformer_mt.translate.language_tags import relabel_vtt
from transformer_mt.translate.subtitles import (
    _cue_text,
    read_ass,
    read_vtt,
    running_on,
    split_tagged,
    wrap,
)

# every kind of block, hours left out and given, cue settings, an identifier, a cue with no
# text, CRLF line endings and no line ending at the end
VTT = ("WEBVTT - Ein Film\r\nKind: captions\r\n\r\n"
       "STYLE\r\n::cue(.gelb) { color: yellow }\r\n\r\n"
       "REGION\r\nid:unten width:40%\r\n\r\n"
       "NOTE Eine Notiz --> nicht übersetzt\r\nüber zwei Zeilen.\r\n\r\n"
       "intro\r\n00:01.000 --> 00:02.500 align:start position:10%\r\n"
       "<v Anna>Ein Mann in einem blauen Hemd\r\n\r\n\r\n"
       "00:00:02.600 --> 00:00:04.000 line:0\r\n<v Anna>fährt mit dem <c.gelb>Fahrrad</c>\r\n"
       "durch die Stadt.\r\n\r\n"
       "leer\r\n00:00:05.000 --> 00:00:06.000\r\n\r\n"
       "01:00:00.000 --> 01:00:01.000\r\nTom &amp; Jerry &lt;3\r\n\r\n"
       "01:00:01.000 --> 01:00:03.000\r\nZwei <01:00:01.500>Hunde spielen.")


def test_a_webvtt_files_cues_are_their_text_and_writing_replaces_only_that():
    cues = read_vtt("film.vtt", VTT)
    assert cues.texts == ["<v Anna>Ein Mann in einem blauen Hemd",
                          "<v Anna>fährt mit dem <c.gelb>Fahrrad</c> durch die Stadt.",
                          "Tom &amp; Jerry &lt;3", "Zwei <01:00:01.500>Hunde spielen."]
    # the cue without text is none: the pause spans it
    assert cues.pauses == pytest.approx([0.1, 3600 - 4.0, 0.0])
    assert cues.escaped
    # every byte as it was but the cues' text, wrapped on as many lines (CRLF between them)
    expected = VTT
    for old, new in (("<v Anna>Ein Mann in einem blauen Hemd", "A"),
                     ("<v Anna>fährt mit dem <c.gelb>Fahrrad</c>\r\ndurch die Stadt.", "B C\r\nD"),
                     ("Tom &amp; Jerry &lt;3", "E"), ("Zwei <01:00:01.500>Hunde spielen.", "F")):
        assert expected.count(old) == 1
        expected = expected.replace(old, new)
    assert cues.write(["A", "B C D", "E", "F"]) == expected


def test_a_webvtt_cue_runs_on_only_into_one_of_the_same_voice():
    text = ("WEBVTT\n\n00:01.000 --> 00:02.000\n<v Anna>Ich gehe\n\n"
            "00:02.100 --> 00:03.000\n<v.laut Ben>nach\n\n00:03.100 --> 00:04.000\nHause\n\n"
            "00:04.100 --> 00:05.000\n<v Ben>und\n\n00:05.100 --> 00:06.000\n<v Ben>schlafe.")
    assert read_vtt("film.vtt", text).pauses == pytest.approx([float("inf"), 0.1, 0.1, 0.1])


def test_webvtt_text_between_tags_is_unescaped_for_the_model_and_escaped_back():
    doc = split_tagged(["Tom &amp; Jerry &lt;3 <01:00:01.500><i>spielen</i>"], "de",
                       escaped=True)
    assert doc.sentences == ["Tom & Jerry <3 spielen"]  # (a timestamp is markup, not text)
    assert doc.rebuild(["Tom & Jerry <3 spielen"]) == [
        "Tom &amp; Jerry &lt;3 <01:00:01.500><i>spielen</i>"]
    out = doc.rebuild(["Tom & Jerry play <unk>"])[0]
    assert "<unk>" not in out and "&lt;unk&gt;" in out  # shown as the model wrote it
    assert re.findall(r"<[^>]*>", out) == ["<01:00:01.500>", "<i>", "</i>"]


def test_a_cue_begins_where_a_browser_begins_one_even_without_an_empty_line():
    """A line with "-->" in the header, or past a cue's timing, begins the next cue (as
    Chromium reads it: the WebVTT parser's blocks)."""
    text = ("WEBVTT\n00:01.000 --> 00:02.000\nEin Hund.\n00:03.000 --> 00:04.000\nZwei\n"
            "Hunde.\nx\n00:05.000 --> 00:06.000\nDrei Hunde.")
    cues = read_vtt("film.vtt", text)
    assert cues.texts == ["Ein Hund.", "Zwei Hunde. x", "Drei Hunde."]
    assert cues.write(["A", "B C", "D"]) == text.replace("Ein Hund.", "A").replace(
        "Zwei\nHunde.\nx", "B\nC").replace("Drei Hunde.", "D")
    # "NOTE" before a timing line is a cue's identifier; a comment with "-->" no cue
    text = ("WEBVTT\n\nNOTE\n00:01.000 --> 00:02.000\nHallo\n\nNOTE a --> b\nnichts\n\n"
            "00:03.000 --> 00:04.000\n&nbsp;\n")
    assert read_vtt("film.vtt", text).texts == ["Hallo", "&nbsp;"]


def test_a_cue_of_a_non_breaking_space_keeps_it():
    """(Not stripped away as the space between two cues' texts is: the cue would be empty.)"""
    doc = split_tagged(["Ein Hund", "&nbsp;"], "de", escaped=True)
    assert doc.rebuild(doc.sentences) == ["Ein Hund", "\u00a0"]


ASS = ("[Script Info]\r\nTitle: Ein Film\r\nScriptType: v4.00+\r\n\r\n"
       "[V4+ Styles]\r\nFormat: Name, Fontname, Fontsize, PrimaryColour\r\n"
       "Style: Default,Arial,20,&H00FFFFFF\r\n\r\n"
       "[Events]\r\n"
       "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\r\n"
       "Dialogue: 0,0:00:01.00,0:00:02.50,Default,Anna,0,0,0,,{\\i1}Ein Mann, der\\Nläuft\r\n"
       "Comment: 0,0:00:02.00,0:00:03.00,Default,,0,0,0,,Ein Kommentar.\r\n"
       "Dialogue: 0,0:00:02.60,0:00:04.00,Default,Anna,0,0,0,,fährt{Notiz} Rad.\r\n"
       " Dialogue: 0,0:00:04.00,0:00:05.00,Default,Ben,0,0,0,,Zwei\\hHunde\r\n"
       "Dialogue: 1,0:00:04.00,0:00:09.00,Default,,0,0,0,,{\\p1}m 0 0 l 10 0 10 10{\\p0}\r\n"
       "Dialogue: 0,1:00:05.00,1:00:06.00,Default,Ben,0,0,0,,spielen.\r\n\r\n"
       "[Aegisub Project Garbage]\r\nActive Line: 2")


def test_substation_alpha_events_are_their_text_and_writing_replaces_only_that():
    """Dialogue events (commas and line breaks in their text), not comments or drawings; an
    event runs on only into the next of the same speaker and style."""
    cues = read_ass("film.ass", ASS)
    assert cues.texts == ["{\\i1}Ein Mann, der läuft", "fährt{Notiz} Rad.",
                          "Zwei Hunde", "spielen."]
    assert cues.pauses == pytest.approx([0.1, float("inf"), 3600.0])
    assert not cues.escaped
    expected = ASS
    for old, new in (("{\\i1}Ein Mann, der\\Nläuft", "A,\\Nb"), ("fährt{Notiz} Rad.", "C"),
                     ("Zwei\\hHunde", "D"), ("spielen.", "E")):
        assert expected.count(old) == 1
        expected = expected.replace(old, new)
    assert cues.write(["A, b", "C", "D", "E"]) == expected
    assert read_ass("film.ssa", ASS.replace("v4.00+", "v4.00")).texts == cues.texts


@pytest.mark.parametrize(("name", "text", "says"), [
    ("film.vtt", "1\n00:00:01,000 --> 00:00:02,000\nEin Hund.\n", "it does not begin with WEBVTT"),
    ("film.vtt", "WEBVTTX\n\n00:01.000 --> 00:02.000\nEin Hund.\n",
     "it does not begin with WEBVTT"),
    ("film.vtt", "WEBVTT\n\n00:01,000 --> 00:02.000\nEin Hund.\n",
     "line 3 ('00:01,000 --> 00:02.000') is not a cue's timing"),
    ("film.ass", "[Events]\nFormat: Start, End, Text\nDialogue: 0:00:01.00,0:00:02.00,Hallo",
     "it does not begin with [Script Info]"),
    ("film.ass", "[Script Info]\n[Events]\nDialogue: 0,0:00:01.00,0:00:02.00,Default,,,Hallo",
     "line 3: no Format line with Start, End and Text last before its first event"),
    ("film.ass", "[Script Info]\n[Events]\nFormat: Start, End, Text\n"
     "Dialogue: 0:00:01,0:00:02.00,Hallo",
     "line 4 is not an event as its Format line says (start, end, text)"),
])
def test_what_is_not_such_subtitles_is_refused_in_a_line(name, text, says):
    with pytest.raises(MTError, match=re.escape(says)) as caught:
        (read_vtt if name.endswith(".vtt") else read_ass)(name, text)
    assert "\n" not in str(caught.value) and name in str(caught.value)
    assert ("WebVTT (.vtt)" if name.endswith(".vtt") else "Advanced SubStation Alpha (.ass)") \
        in str(caught.value)


def test_lines_are_wrapped_near_even_and_never_in_a_tag():
    assert wrap("a b c d", 2) == "a b\nc d"
    assert wrap('Ein <font color="red">Mann fährt</font> schnell', 2) == \
        'Ein <font color="red">Mann\nfährt</font> schnell'
    assert wrap("<v Anna Maria>Ein Mann fährt", 3) == "<v Anna Maria>Ein\nMann\nfährt"
    assert wrap("eins", 2) == "eins" and wrap("♪", 1) == "♪"


def test_chinese_and_japanese_run_on_without_spaces_and_wrap_between_characters():
    assert _cue_text(["一个男人", "<i>骑自行车。</i>"]) == "一个男人<i>骑自行车。</i>"
    assert _cue_text(["Ein Mann", "fährt."]) == "Ein Mann fährt."
    texts = ["一个男人骑", "自行车。", "两只狗。", "<i>在雪里</i>", "玩。"]
    assert running_on(texts, [0.5] * 4) == [(0, 2), (2, 3), (3, 5)]  # ended by "。"
    doc = split_tagged(texts[:2], "zh")  # read as one sentence, no space inside
    assert doc.sentences == ["一个男人骑自行车。"]
    assert doc.rebuild(["A man rides a bike."]) == ["A man rides", "a bike."]
    assert split_tagged(texts[3:], "zh").sentences == ["在雪里玩。"]
    assert wrap("一个男人骑自行车。两只狗在雪里玩。", 2) == "一个男人骑自行车。\n两只狗在雪里玩。"
    for lines in (2, 3, 6):  # never in a tag, never before a mark
        shown = wrap("<i>一个男人</i>骑车。", lines).split("\n")
        assert "".join(shown) == "<i>一个男人</i>骑车。" and 2 <= len(shown) <= lines
        assert all(re.match("<i>一|[^<。]", line) for line in shown)
    assert wrap("一个男人骑自行车。", 1) == "一个男人骑自行车。"


def test_a_dialogue_keeps_its_lines_and_its_dashes_out_of_the_model():
    """Two speakers: each line's sentences apart, the dashes (and tags before them) kept as
    markup; an empty line dropped; a dash that does not begin a line is a word."""
    text = _cue_text(["<i>- Wohin gehst du?</i>", "   ", "—Nach  Hause."])
    assert text == "<i>- Wohin gehst du?</i>\n—Nach Hause."
    doc = split_tagged([text], "de")
    assert doc.sentences == ["Wohin gehst du?", "Nach Hause."]
    out = doc.rebuild(["Where are you going?", "Home."])
    assert out == ["<i>- Where are you going?</i>\n—Home."]
    assert wrap(out[0], 2) == out[0]  # its lines as they are
    assert _cue_text(["- Ein Mann", "fährt - schnell."]) == "- Ein Mann fährt - schnell."
    assert split_tagged(["- Ein Mann fährt - schnell."], "de").sentences == [
        "Ein Mann fährt - schnell."]


def test_a_webvtt_header_says_the_target_language_where_it_said_the_source():
    """YouTube's "Language: de" in the header (CRLF line endings too); a cue's text that
    happens to say so, or another language, as it was."""
    text = ("WEBVTT\r\nKind: captions\r\nLanguage: de-DE\r\n\r\n"
            "00:01.000 --> 00:02.000\r\nLanguage: de\r\n")
    assert relabel_vtt(text, "de", "en") == text.replace("de-DE", "en", 1)
    assert relabel_vtt("WEBVTT\nLanguage: fr\n", "de", "en") == "WEBVTT\nLanguage: fr\n"
