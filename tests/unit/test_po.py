"""Gettext catalogues (translate/po.py through files.read_file): each message without a
translation gets one, marked fuzzy, its placeholders and tags kept; read back by polib and
by Python's gettext from the compiled catalogue, as a program would."""

from __future__ import annotations

import gettext
import io
import re

import pytest

polib = pytest.importorskip("polib")

from transformer_mt.errors import MTError  # noqa: E402
from transformer_mt.translate.documents import translate_split  # noqa: E402
from transformer_mt.translate.files import read_file  # noqa: E402

CATALOGUE = r'''# Die Übersetzung des Programms.
msgid ""
msgstr ""
"Project-Id-Version: hunde 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#: app.py:10
msgid "Ein Hund läuft über die Wiese."
msgstr ""

#: app.py:11
#, python-format
msgid "Hallo %(name)s, du hast %(count)d Nachrichten."
msgstr ""

msgid "Klicke <b>hier</b>, um {ziel} zu öffnen."
msgstr ""

msgid "Willkommen, %name%!"
msgstr ""

msgid "Eine Frau liest."
msgstr "A woman is reading."

#, fuzzy
msgid "Zwei Katzen schlafen."
msgstr "Two cats sleep."

msgid "Ein Hund"
msgid_plural "%d Hunde"
msgstr[0] ""
msgstr[1] ""

#~ msgid "Alt"
#~ msgstr ""
'''


def translated(text: str, name: str = "hunde.po") -> bytes:
    doc = read_file(name, text.encode(), "de", "en")
    return doc.rebuild(translate_split(doc.documents, lambda s: [x.upper() for x in s]))


def test_each_message_without_a_translation_gets_one_to_review():
    out = polib.pofile(translated(CATALOGUE).decode())
    found = {e.msgid: e for e in out}
    assert found["Ein Hund läuft über die Wiese."].msgstr == "EIN HUND LÄUFT ÜBER DIE WIESE."
    assert "fuzzy" in found["Ein Hund läuft über die Wiese."].flags
    message = found["Hallo %(name)s, du hast %(count)d Nachrichten."]
    assert "%(name)s" in message.msgstr and "%(count)d" in message.msgstr
    assert message.flags == ["fuzzy", "python-format"] and message.occurrences == [
        ("app.py", "11")]
    link = found["Klicke <b>hier</b>, um {ziel} zu öffnen."].msgstr
    assert "{ziel}" in link and "<b>" in link and "</b>" in link
    assert link.index("<b>") < link.index("</b>")
    assert found["Willkommen, %name%!"].msgstr == "WILLKOMMEN, %name%!"  # Symfony's
    assert found["Eine Frau liest."].msgstr == "A woman is reading."  # a translator's: kept
    assert found["Zwei Katzen schlafen."].msgstr == "Two cats sleep."  # a suggestion: kept
    assert found["Ein Hund"].msgstr_plural == {0: "EIN HUND", 1: "%d HUNDE"}
    assert out.metadata["Language"] == "en" and out.metadata["Project-Id-Version"] == \
        "hunde 1.0"
    assert [e.msgid for e in out.obsolete_entries()] == ["Alt"]
    assert out.header == "Die Übersetzung des Programms."
    latin = translated(CATALOGUE.replace("charset=UTF-8", "charset=ISO-8859-1"))
    assert b"charset=UTF-8" in latin and "ÜBER".encode() in latin  # written as it says


def test_a_program_reads_the_catalogue_once_it_is_reviewed():
    out = polib.pofile(translated(CATALOGUE).decode())
    for entry in out:
        if entry.msgid != "Zwei Katzen schlafen.":
            entry.flags = [f for f in entry.flags if f != "fuzzy"]  # (a translator's review)
    program = gettext.GNUTranslations(io.BytesIO(out.to_binary()))
    assert program.gettext("Ein Hund läuft über die Wiese.") == "EIN HUND LÄUFT ÜBER DIE WIESE."
    assert program.ngettext("Ein Hund", "%d Hunde", 3) % 3 == "3 HUNDE"
    assert program.gettext("Hallo %(name)s, du hast %(count)d Nachrichten.") % {
        "name": "Anna", "count": 2}  # the placeholders still format


def test_a_catalogue_of_another_language_or_none_is_refused_in_a_line():
    with pytest.raises(MTError, match=re.escape("'hunde.po' is a catalogue of fr; this model "
                                                "translates de into en")):
        translated(CATALOGUE.replace('"Content-Type', '"Language: fr\\n"\n"Content-Type'))
    with pytest.raises(MTError, match=r"is not a gettext catalogue \(\.po, \.pot\)"):
        read_file("hunde.po", b'msgid "a"\nmsgstr "b"\nmsgid', "de", "en")
