"""A termbase (TBX) as a glossary (translate/tbx.py): its concepts read as the TSV glossary of
their terms (a preferred target term, the deprecated ones to avoid), in the model's direction,
by ``mt translate --glossary`` and ``mt serve --glossary`` as a TSV file is; bad ones one line."""

from __future__ import annotations

import pytest

from tests.helpers import run_cli
from transformer_mt.errors import MTError
from transformer_mt.translate.glossary import Glossary

STATUS = '<termNote type="administrativeStatus">{}Term-admn-sts</termNote>'
# TBX-Basic (2008): a concept's terms in tig (a term and its notes) or ntig (a termGrp)
MARTIF = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE martif SYSTEM "TBXBasiccoreStructV02.dtd">
<martif type="TBX-Basic" xml:lang="en-US"><martifHeader><fileDesc><sourceDesc><p>test</p>
</sourceDesc></fileDesc></martifHeader><text><body>
<termEntry id="c1"><descrip type="subjectField">animals</descrip>
 <langSet xml:lang="de-DE"><tig><term>Hunde</term></tig></langSet>
 <langSet xml:lang="en-US"><tig><term>dogs</term>{deprecated}</tig>
  <tig><term>hounds</term>{preferred}</tig><tig><term>Hounds</term>{deprecated}</tig>
 </langSet></termEntry>
<termEntry id="c2"><langSet xml:lang="de"><ntig><termGrp><term>Park</term></termGrp></ntig>
 </langSet><langSet xml:lang="en"><ntig><termGrp><term>Tiergarten</term>{admitted}</termGrp>
 </ntig></langSet></termEntry>
<termEntry id="c3"><langSet xml:lang="de"><tig><term>Katze</term></tig></langSet></termEntry>
<termEntry id="c4"><langSet xml:lang="de"><tig><term>Haus</term></tig></langSet>
 <langSet xml:lang="en"><tig><term>house</term>{superseded}</tig></langSet></termEntry>
</body></text></martif>
""".format(**{s: STATUS.format(s) for s in ("deprecated", "preferred", "admitted",
                                            "superseded")})
# TBX (2019, ISO 30042:2019): conceptEntry, langSec, termSec
TBX = """<?xml version="1.0" encoding="UTF-8"?>
<tbx type="TBX-Basic" style="dca" xml:lang="en" xmlns="urn:iso:std:iso:30042:ed-2">
<tbxHeader><fileDesc><sourceDesc><p>test</p></sourceDesc></fileDesc></tbxHeader><text><body>
<conceptEntry id="c1"><langSec xml:lang="de"><termSec><term>Hunde</term></termSec></langSec>
 <langSec xml:lang="en"><termSec><term>dogs</term>{deprecated}</termSec>
 <termSec><term>hounds</term></termSec></langSec></conceptEntry>
<conceptEntry id="c2"><langSec xml:lang="de"><termSec><term>Park</term></termSec></langSec>
 <langSec xml:lang="en"><termSec><term>Tiergarten</term></termSec></langSec></conceptEntry>
</body></text></tbx>
""".format(deprecated=STATUS.format("deprecated"))
TSV = "Hunde\thounds\tdogs\nPark\tTiergarten\n"  # what both say, as a TSV glossary
SOURCES = ["Zwei Hunde schwimmen im Park.", "Ein Kind sieht 7 Hunde."]


def test_a_termbase_is_the_tsv_glossary_of_its_concepts(trained_run, tmp_path):
    """Either TBX, read from German into English: each concept's source terms to its
    preferred target term (else its first not deprecated), its deprecated ones avoided (but
    a deprecated spelling of the term itself, "Hounds"); a
    concept in one language, or with its target terms all deprecated, none; English into
    German, a deprecated source term still a source term. ``mt translate --glossary
    terms.tbx`` translates as with the TSV glossary of the same terms."""
    tsv = tmp_path / "terms.tsv"
    tsv.write_text(TSV, encoding="utf-8")
    expected = Glossary.read(tsv)
    for name, text in (("basic.tbx", MARTIF), ("2019.tbx", TBX)):
        (tmp_path / name).write_text(text, encoding="utf-8")
        read = Glossary.read(tmp_path / name, languages=("de", "en"))
        assert (read.terms, read.avoid) == (expected.terms, expected.avoid)
        back = Glossary.read(tmp_path / name, languages=("en", "de"))
        assert (back.terms, back.avoid) == ({"dogs": "Hunde", "hounds": "Hunde",
                                             "Tiergarten": "Park"} | (
            {"Hounds": "Hunde", "house": "Haus"} if name == "basic.tbx" else {}), {})
    outs = [run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                     "--glossary", str(path), "--beam", "3", *SOURCES])
            for path in (tsv, tmp_path / "basic.tbx")]
    assert outs[0].returncode == outs[1].returncode == 0, outs[1].stderr
    assert outs[1].stdout == outs[0].stdout and "hounds" in outs[1].stdout


def test_the_servers_termbase_is_read_in_the_models_languages_and_read_again(trained_run,
                                                                            tmp_path):
    """``mt serve --glossary terms.tbx``: the checkpoint's languages (read before the model
    loads), and again in them when the file changes."""
    from transformer_mt.serve.watched_file import WatchedFile
    from transformer_mt.translate import Translator
    from transformer_mt.translate.user_files import file_languages

    path = tmp_path / "terms.tbx"
    path.write_text(MARTIF, encoding="utf-8")
    glossary, watched = WatchedFile.read("glossary", str(path), file_languages(
        path, trained_run[0] / "best.pt"))
    assert glossary.terms == {"Hunde": "hounds", "Park": "Tiergarten"} and watched is not None
    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    translator.glossary = glossary
    path.write_text(MARTIF.replace("Tiergarten", "Stadtpark") + "\n", encoding="utf-8")
    watched.refresh(translator)
    assert translator.glossary.terms == {"Hunde": "hounds", "Park": "Stadtpark"}


@pytest.mark.parametrize(("content", "message"), [
    ("Hunde\thounds\n", "is not a TBX file (its XML: syntax error: line 1, column 0)"),
    (MARTIF.replace('"de"', '"fr"').replace('"de-DE"', '"fr"'),
     "holds no concept with a term in both de and en (one not deprecated in en)"),
])
def test_a_bad_termbase_is_one_line(trained_run, tmp_path, content, message):
    path = tmp_path / "terms.tbx"
    path.write_text(content, encoding="utf-8")
    result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                      "--glossary", str(path), "Zwei Hunde."])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"mt translate: error: the glossary {path} {message}")
    with pytest.raises(MTError, match="read it for a language pair"):
        Glossary.read(path)
