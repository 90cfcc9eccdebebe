"""XLIFF files (translate/xliff.py through files.read_file): each unit's target made from its
source, inline codes where they were, a translator's target and translate="no" kept; read back
by the Translate Toolkit (what CAT tools' Python side reads XLIFF with) and by lxml."""

from __future__ import annotations

import pytest

etree = pytest.importorskip("lxml.etree")
xliff_store = pytest.importorskip("translate.storage.xliff")

from tests.helpers import billion_laughs  # noqa: E402
from transformer_mt.errors import MTError  # noqa: E402
from transformer_mt.translate.documents import translate_split  # noqa: E402
from transformer_mt.translate.files import read_file  # noqa: E402

V12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="hunde.txt" source-language="de" datatype="plaintext">
    <body>
      <!-- ein Kommentar -->
      <trans-unit id="1">
        <source>Ein Mann fährt <g id="1">Fahrrad</g>. Zwei Hunde spielen.</source>
      </trans-unit>
      <trans-unit id="2">
        <source>Drücke <ph id="1">&lt;b&gt;</ph>OK<ph id="2">&lt;/b&gt;</ph> jetzt.</source>
        <target/>
        <note>Ein Hinweis.</note>
      </trans-unit>
      <trans-unit id="3">
        <source>Eine Frau liest.</source>
        <target state="translated">A woman is reading.</target>
      </trans-unit>
      <trans-unit id="6">
        <source>Hallo %name%, du hast {count} Nachrichten.</source>
      </trans-unit>
      <trans-unit id="4" translate="no">
        <source>Markenname</source>
      </trans-unit>
      <trans-unit id="5">
        <source>Ein Hund läuft. Eine Katze schläft.</source>
        <seg-source><mrk mtype="seg" mid="1">Ein Hund läuft.</mrk> <mrk mtype="seg"
          mid="2">Eine Katze schläft.</mrk></seg-source>
      </trans-unit>
    </body>
  </file>
</xliff>
"""
V2 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="de">
  <file id="f1">
    <unit id="1">
      <segment>
        <source>Er fährt <pc id="1">Fahrrad</pc> mit <mrk id="m" translate="no">Anna</mrk>.</source>
      </segment>
      <segment state="final">
        <source>Zwei Hunde spielen.</source>
        <target>Two dogs are playing.</target>
      </segment>
    </unit>
    <unit id="2" translate="no">
      <segment><source>Markenname</source></segment>
    </unit>
  </file>
</xliff>
"""


def translated(text: str, name: str = "hunde.xlf") -> bytes:
    doc = read_file(name, text.encode(), "de", "en")
    return doc.rebuild(translate_split(doc.documents, lambda s: [x.upper() for x in s]))


def test_xliff_1_2_gets_its_targets_with_the_codes_and_a_translators_target_kept():
    out = translated(V12)
    store = xliff_store.xlifffile(out)
    units = {unit.getid().rpartition("\x04")[2]: unit for unit in store.units}  # (file, id)
    assert units["1"].target == "EIN MANN FÄHRT FAHRRAD. ZWEI HUNDE SPIELEN."
    assert units["3"].target == "A woman is reading." and not units["4"].target
    assert units["6"].target == "HALLO %name%, DU HAST {count} NACHRICHTEN."  # Symfony's
    assert store.gettargetlanguage() == "en"
    root = etree.fromstring(out)
    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    first, second = root.findall(".//x:trans-unit", ns)[:2]
    target = first.find("x:target", ns)
    assert [(g.get("id"), g.text.strip() != "") for g in target.findall("x:g", ns)] == [("1", True)]
    assert target.get("state") == "needs-review-translation"
    assert target.get("state-qualifier") == "leveraged-mt"
    codes = second.find("x:target", ns).findall("x:ph", ns)
    assert [c.text for c in codes] == ["<b>", "</b>"]  # native code, not text
    assert "".join(second.find("x:target", ns).itertext()).replace("<b>", "").replace(
        "</b>", "") == "DRÜCKE OK JETZT."
    assert [child.tag.rpartition("}")[2] for child in second] == ["source", "target", "note"]
    assert b"<!-- ein Kommentar -->" in out and b"<note>Ein Hinweis.</note>" in out
    segmented = root.find(".//x:trans-unit[@id='5']", ns)  # its target keeps the segments
    assert [child.tag.rpartition("}")[2] for child in segmented] == ["source", "seg-source",
                                                                     "target"]
    assert [(m.get("mid"), m.text) for m in segmented.find("x:target", ns)] == [
        ("1", "EIN HUND LÄUFT."), ("2", "EINE KATZE SCHLÄFT.")]


def test_xliff_2_gets_its_segments_targets_and_keeps_what_it_had():
    out = translated(V2, "hunde.xliff")
    root = etree.fromstring(out)
    ns = {"x": "urn:oasis:names:tc:xliff:document:2.0"}
    assert root.get("trgLang") == "en"
    first, second = root.findall(".//x:segment", ns)[:2]
    target = first.find("x:target", ns)
    assert "".join(target.itertext()).startswith("ER FÄHRT FAHRRAD MIT ")
    assert target.find("x:pc", ns) is not None and first.get("state") == "translated"
    assert target.find("x:mrk", ns).text == "Anna"  # translate="no": as it was
    assert second.get("state") == "final" and second.find("x:target", ns).text == \
        "Two dogs are playing."
    assert root.findall(".//x:unit", ns)[1].find(".//x:target", ns) is None  # translate="no"


@pytest.mark.parametrize("data, says", [
    (b"<html><body>Ein Hund.</body></html>", "it is not XLIFF 1.2 or 2.x"),
    (b"<xliff version='1.2'", "is not an XLIFF file (.xlf, .xliff)"),
    (V12.replace('source-language="de"', 'source-language="de-AT" target-language="fr"')
     .encode(), 'asks for target-language="fr"; this model translates de into en'),
    (V2.replace('srcLang="de"', 'srcLang="en-GB"').encode(),
     'asks for srcLang="en-GB"; this model translates de into en'),
])
def test_what_is_not_xliff_is_refused_in_a_line(data, says):
    with pytest.raises(MTError, match=None) as caught:
        read_file("hunde.xlf", data, "de", "en")
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_an_entity_bomb_in_xliff_is_not_expanded():
    laughs = billion_laughs('<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2">'
                            '<file><body><trans-unit id="1"><source>&lol9; Ein Hund.</source>'
                            '</trans-unit></body></file></xliff>')
    try:
        doc = read_file("laughs.xlf", laughs, "de")
        assert all(len(s) < 1000 for d in doc.documents for s in d.sentences)
    except MTError as exc:
        assert "is not an XLIFF file" in str(exc)


WRAPPED = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="hunde.txt" source-language="de" datatype="plaintext">
    <body>
      <trans-unit id="1">
        <source>Ein Mann in einem blauen Hemd fährt
          mit dem Fahrrad. Zwei Hunde spielen.</source>
      </trans-unit>
      <trans-unit id="2" xml:space="preserve">
        <source>Datei öffnen
Datei speichern</source>
      </trans-unit>
    </body>
  </file>
</xliff>
"""


def test_a_line_break_in_an_xliff_source_is_a_space_unless_it_keeps_its_whitespace():
    doc = read_file("hunde.xlf", WRAPPED.encode(), "de", "en")
    wrapped, kept = ([" ".join(s.split()) for s in d.sentences] for d in doc.documents)
    assert wrapped == ["Ein Mann in einem blauen Hemd fährt mit dem Fahrrad.",
                       "Zwei Hunde spielen."]  # one sentence across the tool's line break
    assert kept == ["Datei öffnen", "Datei speichern"]  # xml:space="preserve": two lines
    root = etree.fromstring(doc.rebuild(translate_split(doc.documents,
                                                        lambda s: [x.upper() for x in s])))
    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    targets = [unit.find("x:target", ns).text for unit in root.findall(".//x:trans-unit", ns)]
    assert targets[1] == "DATEI ÖFFNEN\nDATEI SPEICHERN"
    assert " ".join(targets[0].split()) == ("EIN MANN IN EINEM BLAUEN HEMD FÄHRT MIT DEM "
                                            "FAHRRAD. ZWEI HUNDE SPIELEN.")
