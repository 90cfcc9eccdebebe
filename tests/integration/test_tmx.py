"""Translation memories (TMX) as a corpus, ``{tmx: FILE}`` (data/tmx.py): the pairs a memory
holds train the model as the same pairs in a TSV file do; its tools' markup, regional language
tags, old versions, UTF-16 and gzip read as translation tools write them; bad files one line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from tests.helpers import run_cli, write_config, write_corpus
from transformer_mt.data.tmx import tmx_pairs
from transformer_mt.errors import DataError

HEAD = '<?xml version="1.0" encoding="{encoding}"?>\n<tmx version="1.4"><header ' \
       'creationtool="test" srclang="{src}" datatype="plaintext" segtype="sentence" ' \
       'adminlang="en" o-tmf="x"/><body>\n'


def memory(units: list[list[tuple[str, str]]], encoding: str = "UTF-8", src: str = "fr-FR",
           attribute: str = "xml:lang") -> str:
    """A TMX file of ``units``, each a list of (language tag, the <seg>'s inner XML)."""
    body = "".join("<tu>" + "".join(f'<tuv {attribute}="{tag}"><seg>{seg}</seg></tuv>'
                                    for tag, seg in unit) + "</tu>\n" for unit in units)
    return HEAD.format(encoding=encoding, src=src) + body + "</body></tmx>\n"


def test_a_memory_trains_the_model_as_its_pairs_in_a_tsv_file_do(tmp_path):
    """The toy corpus as a TMX file as a translation tool writes one (regional tags, a word of
    each pair in bold as inline codes, units to pass over: one language only, an untranslated
    one, another pair's) trains the same model as the TSV file of its pairs: the same losses,
    the same translations; ``mt data`` counts the units passed over."""
    data = write_corpus(tmp_path / "corpus", "tsv")
    for name in ("train", "valid"):
        tsv = Path(data[name]["tsv"]).read_text(encoding="utf-8")
        rows = [line.split("\t") for line in tsv.splitlines()]
        units = [[("fr-FR", _bold_first(escape(a))), ("ES_es", escape(b)), ("de", "Ein Wort.")]
                 for a, b in rows]
        units[1:1] = [[("fr-FR", "Seul.")], [("fr-FR", "Vide."), ("es-ES", " ")],
                      [("de-DE", "Hallo."), ("en-GB", "Hello.")]]
        path = tmp_path / "corpus" / (f"{name}.tmx" + (".gz" if name == "valid" else ""))
        text = memory(units).encode("utf-8")
        path.write_bytes(gzip.compress(text) if name == "valid" else text)
        data[f"{name}_tmx"] = {"tmx": str(path)}
    runs = {}
    for form in ("tsv", "tmx"):
        extra = "" if form == "tsv" else "_tmx"
        section = {key: value for key, value in data.items() if not key.endswith("_tmx")}
        section.update(train=data[f"train{extra}"], valid=data[f"valid{extra}"])
        write_config(tmp_path / f"{form}.yaml", section)
        runs[form] = tmp_path / form
        result = run_cli(["train", "--config", str(tmp_path / f"{form}.yaml"), "--run-dir",
                          str(runs[form])])
        assert result.returncode == 0, result.stderr
    assert "180 training pairs" in (runs["tmx"] / "train.log").read_text()
    summary = run_cli(["data", "--config", str(tmp_path / "tmx.yaml")]).stdout  # (mt data)
    assert "  of 183 translation units; passed over: no es segment 1, an empty segment 1, " \
           "no fr segment 1\n" in summary, summary
    assert _losses(runs["tmx"]) == _losses(runs["tsv"]) != []
    outs = [run_cli(["translate", "--checkpoint", str(runs[form] / "last.pt"),
                     "Le chien blanc court.", "L'oiseau rouge chante."]).stdout
            for form in ("tsv", "tmx")]
    assert outs[0] == outs[1] == "El perro blanco corre.\nEl pájaro rojo canta.\n"


def _bold_first(text: str) -> str:
    """The first word of ``text`` in bold as a translation tool marks it: inline codes round it
    (their content the document's markup, escaped)."""
    first, _, rest = text.partition(" ")
    return f'<bpt i="1">&lt;b&gt;</bpt>{first}<ept i="1">&lt;/b&gt;</ept> {rest}'


def _losses(run) -> list[float]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if "loss" in r]


def test_a_segments_text_is_what_a_reader_sees(tmp_path):
    """Inline codes (and a sub-flow inside one) left out, a highlight's text kept, line breaks
    and runs of spaces one space, a no-break space kept; a tag that is the language exactly
    before a regional one; TMX 1.1's ``lang``; UTF-16 as Trados writes it, gzip."""
    units = [[("de", 'Ein <ph x="1">{1}</ph>Hund <hi type="b">läuft</hi>\n  schnell.'),
              ("en-US", 'A <bpt i="1">&lt;a href="x"&gt;<sub>Link</sub></bpt>dog'
                        '<ept i="1">&lt;/a&gt;</ept> runs\tfast.')],
             [("de", "Es kostet 12,50\u00a0€."), ("en", "It costs €12.50.")],
             [("zh-CN", "简体"), ("zh-TW", "繁體"), ("de", "Zeichen.")]]
    path = tmp_path / "m.tmx"
    path.write_bytes(memory(units, "UTF-16").encode("utf-16"))
    assert list(tmx_pairs(path, "de", "en", "data.train")) == [
        ("Ein Hund läuft schnell.", "A dog runs fast."),
        ("Es kostet 12,50\u00a0€.", "It costs €12.50.")]
    assert list(tmx_pairs(path, "zh-TW", "de", "data.train")) == [("繁體", "Zeichen.")]
    assert list(tmx_pairs(path, "zh", "de", "data.train")) == [("简体", "Zeichen.")]
    old = tmp_path / "old.tmx.gz"
    old.write_bytes(gzip.compress(memory(units[:1], attribute="lang").encode()))
    assert list(tmx_pairs(old, "en", "de", "x")) == [("A dog runs fast.",
                                                      "Ein Hund läuft schnell.")]


BOMB = ('<?xml version="1.0"?><!DOCTYPE tmx [<!ENTITY a "aaaaaaaaaa">'
        + "".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">'
                  for p, c in zip("abcdefgh", "bcdefghi", strict=True))
        + ']><tmx version="1.4"><body><tu><tuv xml:lang="fr"><seg>&i;</seg></tuv>'
          '<tuv xml:lang="es"><seg>x</seg></tuv></tu></body></tmx>')


@pytest.mark.parametrize("problem, content, expected", [
    ("no-xml", "un\tuno\n", "'{dir}/m.tmx' is not a TMX file (its XML: syntax error: line 1"),
    ("cut", memory([[("fr", "Un."), ("es", "Uno.")]]).replace("</body></tmx>", ""),
     "'{dir}/m.tmx' is not a TMX file (its XML: no element found: line 5"),
    ("languages", memory([[("de-DE", "Hallo."), ("en-US", "Hello.")]]),
     "'{dir}/m.tmx' holds no translation unit with a segment in both fr and es (its "
     "languages: de-de, en-us)"),
    ("bomb", BOMB, "'{dir}/m.tmx' is not a TMX file (its XML: "),
])
def test_a_file_that_is_no_memory_of_the_pair_is_one_line(tmp_path, problem, content,
                                                          expected):
    path = tmp_path / "m.tmx"
    path.write_text(content, encoding="utf-8")
    if problem == "bomb":  # refused by expat, not expanded (a billion a's, ~1 GB)
        with pytest.raises(DataError, match="is not a TMX file"):
            list(tmx_pairs(path, "fr", "es", "data.train"))
        return
    write_config(tmp_path / "bad.yaml", {"src_lang": "fr", "tgt_lang": "es",
                                         "train": {"tmx": str(path)},
                                         "valid": {"tmx": str(path)}})
    run_dir = tmp_path / "run"
    result = run_cli(["train", "--config", str(tmp_path / "bad.yaml"), "--run-dir",
                      str(run_dir)])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("mt train: error: data.valid.tmx: ") and expected.format(
        dir=tmp_path) in last, last
    assert not run_dir.exists()


def test_a_memory_that_translate_toolkit_writes_reads_as_its_units(tmp_path):
    """translate-toolkit's TMX (its DOCTYPE names a DTD, never fetched; its text escaped, a
    line break in a segment): each unit one pair, as its own reader reads them."""
    tmx = pytest.importorskip("translate.storage.tmx")
    memory = tmx.tmxfile(sourcelanguage="de-DE", targetlanguage="en-US")
    pairs = [("Ein Hund & eine <b>Katze</b>.", "A dog & a <b>cat</b>."),
             ("Zwei\nZeilen.", "Two lines.")]
    for de, en in pairs:
        memory.addtranslation(de, "de-DE", en, "en-US")
    path = tmp_path / "tt.tmx"
    path.write_bytes(bytes(memory))
    theirs = [(u.source, u.target) for u in tmx.tmxfile(path.read_bytes()).units]
    assert theirs == pairs
    assert list(tmx_pairs(path, "de", "en", "data.train")) == [
        (de.replace("\n", " "), en) for de, en in pairs]
