"""A translation memory (``translate/memory.py``): the sentences it holds are its translations,
everywhere a text gets one translation (lines, text, HTML, the server's routes); the others
are the model's, as without it."""
from __future__ import annotations

import logging
import os
import re
from xml.sax.saxutils import escape

import pytest

from tests.helpers import local_client, run_cli
from transformer_mt.errors import MTError
from transformer_mt.translate.glossary import Glossary
from transformer_mt.translate.memory import Memory

HELD = "Zwei Hunde schwimmen im Park."
OTHER = "Ein Kind fährt Fahrrad."
PAIR = "Ein alter Mann läuft. Zwei Hunde warten im Park."  # held whole, not each sentence
MARKED = "Zwei (braune) Hunde warten."  # marks the model does not read ('(': no token of its)
# translations no model of the toy corpus writes: each seen only where the memory gave it
APPROVED = {HELD: "Two hounds bathe in the park.", PAIR: "An old man and two dogs.",
            MARKED: "Two (brown) dogs wait."}


def tmx(units: list[list[tuple[str, str]]]) -> str:
    """A TMX file of ``units``, each (language tag, segment) pairs."""
    body = "".join("<tu>" + "".join(f'<tuv xml:lang="{tag}"><seg>{text}</seg></tuv>'
                                    for tag, text in unit) + "</tu>" for unit in units)
    return f'<?xml version="1.0"?><tmx version="1.4"><header/><body>{body}</body></tmx>'


@pytest.fixture(scope="module")
def remembering(translator):
    """The tiny run's translator with the memory of APPROVED."""
    return translator.with_settings(translator.config.decode, memory=Memory.of(APPROVED.items()))


def test_a_sentence_the_memory_holds_is_its_translation_the_others_the_models(translator,
                                                                              remembering):
    """Held: the same text but for spacing (a line's, a paragraph's, between sentences), a
    line of two sentences held whole, a sentence in quotes, one with marks the model reads
    apart from it; not held: another case, a part of a held line; the other sentences
    translate as without the memory, in one batch."""
    model = {s: translator.translate([s])[0] for s in (HELD, OTHER, *PAIR.split(". "))}
    ours = remembering.translate([f"  {HELD}  {OTHER}", f" {OTHER}\t{HELD.replace(' ', '  ')}",
                                  PAIR, f"„{HELD}“", MARKED, HELD.upper(),
                                  f"{PAIR.split('. ')[0]}."])
    assert ours == [f"{APPROVED[HELD]}  {model[OTHER]}", f"{model[OTHER]}\t{APPROVED[HELD]}",
                    APPROVED[PAIR], f"“{APPROVED[HELD]}”", APPROVED[MARKED],
                    translator.translate([HELD.upper()])[0],
                    translator.translate([f"{PAIR.split('. ')[0]}."])[0]]
    assert remembering.translate([f"{HELD}\n\n{OTHER}\n"], form="text") == [
        f"{APPROVED[HELD]}\n\n{model[OTHER]}\n"]
    # n-best lists (and attention, prefixes) are the model's own
    assert remembering.translate([HELD], nbest=1)[0][0].text == model[HELD]


def test_a_held_sentence_is_never_cut_and_takes_the_markup_of_its_source(translator,
                                                                         remembering):
    """A sentence too long for the model's parts (max_sentence_tokens) is read whole where the
    memory holds it; in HTML, its inline markup goes into the memory's translation, the
    page's text the memory's."""
    assert remembering.translate([HELD], max_sentence_tokens=2) == [APPROVED[HELD]]
    assert translator.translate([HELD], max_sentence_tokens=2) != [APPROVED[HELD]]
    page = f"<p>Zwei <b>Hunde</b> schwimmen im Park. {OTHER}</p>"
    [out] = remembering.translate([page], form="html")
    assert re.sub("<[^>]+>", "", out) == f"{APPROVED[HELD]} {translator.translate([OTHER])[0]}"
    assert re.fullmatch(r"<p>[^<]*<b>[^<]+</b>[^<]*</p>", out), out


def test_a_memory_reads_from_tmx_as_from_tsv(tmp_path):
    """A TMX file's units in the model's languages (regional tags, inline codes left out, a
    source given twice: its last) are the pairs of a TSV file of the same; a one-line error
    for a file that does not read or holds no pair."""
    (tmp_path / "m.tmx").write_text(tmx([
        [("de-DE", "Zwei Hunde."), ("en-GB", "Two cats.")],
        [("en-US", "Two dogs."), ("de-AT", 'Zwei <bpt i="1">&lt;b&gt;</bpt>Hunde'
                                           '<ept i="1">&lt;/b&gt;</ept>.')],
        [("de", "Ein Hund."), ("fr", "Un chien.")]]), encoding="utf-8")
    (tmp_path / "m.tsv").write_text("# approved\nZwei Hunde.\tTwo cats.\n\nZwei Hunde.\t"
                                    "Two dogs.\n", encoding="utf-8")
    tsv = Memory.read(tmp_path / "m.tsv", ("", ""))
    assert Memory.read(tmp_path / "m.tmx", ("de", "en")) == tsv
    assert tsv.translations == {"Zwei Hunde.": "Two dogs."}
    for name, text, error in [
            ("a.tsv", "Hund\tdog\textra\n", "a.tsv, line 1: a memory's line is 'source<TAB>"
                                             "translation', not 3 field(s)"),
            ("b.tsv", "# nothing\n\n", "b.tsv holds no 'source<TAB>translation' line"),
            ("c.tmx", tmx([[("de", "Hund"), ("fr", "chien")]]), "--memory: '" + str(
                tmp_path / "c.tmx") + "' holds no translation unit with a segment in both de "
             "and en (its languages: de, fr); the model's languages are the two read"),
            ("d.tmx", "Hund\tdog\n", "is not a TMX file")]:
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(MTError, match=re.escape(error)):
            Memory.read(tmp_path / name, ("de", "en"))


def test_mt_translate_memory_translates_a_file_as_the_memory_says(trained_run, tmp_path):
    """``--memory`` on lines (a file's), its sentences held or the model's; with ``--nbest``
    (the model's own list), a missing file: one line of error, nothing written."""
    checkpoint = str(trained_run[0] / "best.pt")
    (tmp_path / "m.tmx").write_text(tmx([[("de", escape(s)), ("en", escape(t))]
                                         for s, t in APPROVED.items()]), encoding="utf-8")
    (tmp_path / "in.txt").write_text(f"{HELD}\n{OTHER} {HELD}\n", encoding="utf-8")
    plain = run_cli(["translate", "--checkpoint", checkpoint, OTHER])
    result = run_cli(["translate", "--checkpoint", checkpoint, "--memory",
                      str(tmp_path / "m.tmx"), "--input", str(tmp_path / "in.txt"),
                      "--output", str(tmp_path / "out.txt")])
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == (
        f"{APPROVED[HELD]}\n{plain.stdout.strip()} {APPROVED[HELD]}\n")
    for extra, error in [(["--nbest", "2"], "--memory gives a sentence its one translation"),
                         (["--memory", str(tmp_path / "none.tsv")], "cannot read the memory")]:
        result = run_cli(["translate", "--checkpoint", checkpoint, "--memory",
                          str(tmp_path / "m.tmx"), *extra, "--output",
                          str(tmp_path / "no.txt"), HELD])
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert error in result.stderr.strip().splitlines()[-1]
        assert not (tmp_path / "no.txt").exists()


def test_the_server_translates_held_sentences_as_its_memory_says(translator, remembering):
    """Every route (LibreTranslate's, /v1/translate with a request's glossary too): the held
    sentences the memory's, the others as ``mt translate`` with the memory has them, twice
    (the second from the cache); /v1/info counts the memory's translations; a prefix is the
    model's to continue, and what a request inspects (attention, the top tokens, alignment)
    the model's own translation."""
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    texts = [f"{HELD} {OTHER}", PAIR, OTHER]
    with local_client(create_app(remembering, ServeOptions())) as client:
        assert client.get("/v1/info").json()["memory"] == {"translations": len(APPROVED)}
        for _ in range(2):
            r = client.post("/translate", json={"q": texts, "source": "de", "target": "en"})
            assert r.status_code == 200, r.text
            assert r.json()["translatedText"] == remembering.translate(texts)
        r = client.post("/v1/translate", json={"text": texts, "glossary": {"Kind": "kid"}})
        assert r.status_code == 200, r.text
        with_glossary = remembering.translate(texts, glossary=Glossary({"Kind": "kid"}))
        assert [t["text"] for t in r.json()["translations"]] == with_glossary
        assert APPROVED[PAIR] in with_glossary and "kid" in with_glossary[2]
        # each held sentence counted (/metrics): HELD and PAIR, three times
        assert "mt_memory_hits_total 6.0" in client.get("/metrics").text
        r = client.post("/v1/translate", json={"text": [HELD], "prefix": "Two"})
        assert r.json()["translations"][0]["text"] == translator.translate(
            [HELD], prefix=["Two"], nbest=1)[0][0].text
        own = translator.translate([HELD], nbest=1)[0][0]
        for asked in ({"attention": True}, {"topk": 2, "align": True},
                      {"attention": True, "glossary": {"Kind": "kid"}}):
            r = client.post("/v1/translate", json={"text": [HELD], **asked})
            assert r.status_code == 200, r.text
            [found] = r.json()["translations"]
            assert found["text"] == own.text and found["tokens"] == own.tokens


def test_mt_serve_memory_is_read_again_when_its_file_changes(trained_run, tmp_path, caplog):
    """``mt serve --memory FILE`` (its arguments as the command reads them): the memory from
    the next request on after an edit; a version that does not read leaves the one before in
    use, said in /v1/info and the log; a file that is none, one line of error."""
    pytest.importorskip("fastapi")
    from transformer_mt.cli import build_parser
    from transformer_mt.cli.serve import _glossary, _load, _memory
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    path = tmp_path / "memory.tsv"
    path.write_text(f"{HELD}\t{APPROVED[HELD]}\n", encoding="utf-8")
    args = build_parser().parse_args(["serve", "--checkpoint", str(trained_run[0] / "best.pt"),
                                      "--memory", str(path), "--device", "cpu"])
    args.engine, args.terms, args.remembered = "torch", _glossary(args), _memory(args)
    server = _load(args)[0]

    def translated(client) -> str:
        r = client.post("/translate", json={"q": HELD, "source": "de", "target": "en"})
        assert r.status_code == 200, r.text
        return r.json()["translatedText"]

    with local_client(create_app(server, ServeOptions(memory_file=args.memory_file))) as client:
        assert translated(client) == APPROVED[HELD]
        path.write_text(f"{HELD}\tTwo dogs bathe.\n{OTHER}\tA kid cycles.\n", encoding="utf-8")
        os.utime(path, ns=(2 * 10**9, 2 * 10**9))  # (a clock that did not tick: told apart)
        assert translated(client) == "Two dogs bathe."
        assert client.get("/v1/info").json()["memory"] == {"translations": 2}
        path.write_text("a\tb\tc\n", encoding="utf-8")
        with caplog.at_level(logging.ERROR, "transformer_mt.serve.watched_file"):
            assert translated(client) == "Two dogs bathe."
        assert "the 2 translations read before stay in use" in caplog.text
        assert "line 1: a memory's line" in client.get("/v1/info").json()["memory"]["error"]
    args.memory = str(tmp_path)
    with pytest.raises(MTError, match="cannot read the memory"):
        _memory(args)


XLF = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="de"
 datatype="plaintext" original="x"><body>
<trans-unit id="held"><source>Zwei <g id="1">Hunde</g> schwimmen im Park.</source></trans-unit>
<trans-unit id="half"><source>{HELD} {OTHER}</source></trans-unit>
<trans-unit id="model"><source>{OTHER}</source></trans-unit>
</body></file></xliff>"""
PO = f'msgid ""\nmsgstr ""\n\nmsgid "{HELD}"\nmsgstr ""\n\nmsgid "{OTHER}"\nmsgstr ""\n'


def test_xliff_and_gettext_say_a_memorys_translation_needs_no_review_as_mt(remembering):
    """A unit whose every sentence the memory gave is XLIFF 1.2's ``exact-match`` (not
    ``leveraged-mt``), a message gettext's without ``fuzzy`` (as msgmerge takes a compendium's
    exact matches); one the model translated, even in part, is machine translation to review;
    the same through the server's /translate_file."""
    pytest.importorskip("lxml")
    polib = pytest.importorskip("polib")
    from lxml import etree

    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions
    from transformer_mt.translate.files import translate_file

    xlf = translate_file(remembering, "units.xlf", XLF.encode())
    units = etree.fromstring(xlf).iter("{urn:oasis:names:tc:xliff:document:1.2}trans-unit")
    states = {u.get("id"): (u[1].get("state"), u[1].get("state-qualifier"),
                            "".join(u[1].itertext())) for u in units}
    assert states == {
        "held": ("needs-review-translation", "exact-match", APPROVED[HELD]),
        "half": ("needs-review-translation", "leveraged-mt",
                 f"{APPROVED[HELD]} {remembering.translate([OTHER])[0]}"),
        "model": ("needs-review-translation", "leveraged-mt", remembering.translate([OTHER])[0])}
    po = translate_file(remembering, "app.po", PO.encode())
    assert [(m.msgstr, m.fuzzy) for m in polib.pofile(po.decode())] == [
        (APPROVED[HELD], False), (remembering.translate([OTHER])[0], True)]
    with local_client(create_app(remembering, ServeOptions())) as client:
        for name, source, ours in (("units.xlf", XLF, xlf), ("app.po", PO, po)):
            answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                                 files={"file": (name, source.encode())})
            assert answer.status_code == 200, answer.text
            assert client.get(answer.json()["translatedFileUrl"]).content == ours
