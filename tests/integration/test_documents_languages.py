"""Languages other than German and English in texts and pages: Chinese and Japanese, which
write their sentences without a space between them, and right-to-left scripts."""

from __future__ import annotations

import pytest

from transformer_mt.translate.documents import split_document, split_html, split_text


@pytest.mark.parametrize(("text", "lang", "sentences"), [
    # Japanese without SudachiPy: spaCy reads the line as one token
    ("すごい！本当に？これは犬です。", "ja", ["すごい！", "本当に？", "これは犬です。"]),
    ("「すごい！」と彼は言った。本当に？！", "ja", ["「すごい！」と彼は言った。", "本当に？！"]),
    ("狗跑。猫睡！", "zh", ["狗跑。", "猫睡！"]),
])
def test_chinese_and_japanese_sentences_end_at_their_marks(text, lang, sentences):
    doc = split_text(text, lang)
    assert doc.sentences == sentences
    assert doc.rebuild(sentences) == text


@pytest.mark.parametrize(("text", "lang", "translations", "expected"), [
    ("狗跑。猫睡！\n鸟飞？", "zh", ["A dog runs.", "A cat sleeps!", "A bird flies?"],
     "A dog runs. A cat sleeps!\nA bird flies?"),  # Chinese has no space between sentences
    ("A dog runs.  A cat sleeps!\nA bird?", "en", ["狗跑。", "猫睡！", "鸟？"],
     "狗跑。猫睡！\n鸟？"),  # nor do its translations; a line break stays
    ("A dog runs. A cat sleeps!", "en", ["Ein Hund läuft.", "猫睡！"],
     "Ein Hund läuft. 猫睡！"),  # a space beside a spaced script
    ("すごい！ 本当に？", "ja", ["凄！", "真？"], "凄！ 真？"),  # a space the source had kept
    ("すごい！\u3000本当に？", "ja", ["Wow!", "Really?"], "Wow! Really?"),  # an ideographic
    # space between sentences: a space in English
])
def test_sentences_are_spaced_as_the_target_language_spaces_them(text, lang, translations,
                                                                 expected):
    assert split_text(text, lang).rebuild(translations) == expected


def test_a_space_between_sentences_goes_outside_markup():
    doc = split_document("<p>狗跑。<b>猫睡！</b>鸟飞？<i>鱼游。</i></p>", "zh", "html", "en")
    assert doc.rebuild(["A dog runs.", "A cat sleeps!", "A bird flies?", "A fish swims."]) == (
        "<p>A dog runs. <b>A cat sleeps!</b> A bird flies? <i>A fish swims.</i></p>")
    doc = split_document("<p>A dog. <b>A cat!</b> A bird?</p>", "en", "html", "zh")
    assert doc.rebuild(["狗。", "猫！", "鸟？"]) == "<p>狗。<b>猫！</b>鸟？</p>"
    doc = split_document("<p>A dog.\n  A cat.</p><pre>A dog.\nA cat.</pre>", "en", "html", "zh")
    assert doc.rebuild(["狗。", "猫。"]) == "<p>狗。猫。</p><pre>A dog.\nA cat.</pre>"  # (shown
    # as a space in HTML, a line break goes as one does)


def test_html_translated_is_written_in_the_target_languages_direction():
    """Arabic into English: what said right to left (or Arabic) says left to right; a
    ``dir="auto"`` and text kept as it is stay; English into Arabic the other way."""
    html = ('<html lang="ar" dir="rtl"><body dir="rtl"><p>مرحبا.</p><p dir="auto">نص.</p>'
            '<p dir="rtl" translate="no">اسم.</p></body></html>')
    assert split_html(html, "ar", target="en").rebuild(["Hello.", "Text."]) == (
        '<html lang="en" dir="ltr"><body dir="ltr"><p>Hello.</p><p dir="auto">Text.</p>'
        '<p dir="rtl" translate="no">اسم.</p></body></html>')
    html = '<html lang="en"><p dir="ltr">Hello.</p><p>World.</p></html>'
    assert split_html(html, "en", target="ar").rebuild(["مرحبا.", "عالم."]) == (
        '<html lang="ar" dir="rtl"><p dir="rtl">مرحبا.</p><p>عالم.</p></html>')
    html = '<html lang="de" dir="ltr"><p>Ein Hund.</p></html>'  # the same direction: as it was
    assert split_html(html, "de", target="en").rebuild(["A dog."]) == (
        '<html lang="en" dir="ltr"><p>A dog.</p></html>')
