"""Inline markup: a test set's sentences as HTML, one word of each in <b>, translated whole and
shared out (ours) against each piece translated on its own (the way a translator of text
nodes works, and ours did before).

    python bench/inline_markup.py --checkpoint runs/cpu/avg.pt [--set test_2016_flickr]

The word in <b> is a noun of a small German-English lexicon where the sentence holds one (then
where it lands is scored: the <b> holds its translation alone, ``exact``, or with one more word,
``within2``, among the outputs that hold that translation once), else a word drawn at random
(not the first). Prints one JSON record: BLEU and chrF of the pages' text (tags removed)
against the references, the plain sentences' for comparison, the placement, and ``ratio``: the
BLEU of ours against the pieces', measured in the same run, and ``differ``: the pages whose
text is not their sentence's translation (none in fp32, where it is asserted; in bf16 a batch
of other sentences may round a near-tie the other way).

And subtitles (``subtitles`` in the record): each sentence of 4 words or more cut at its middle
word into two subtitles of an .srt, the file translated as ``mt translate --input`` does (a
sentence across subtitles translated whole, shared out by attention) against each subtitle
translated on its own; BLEU of each sentence's subtitles joined, their ``ratio``, and how many
subtitles came out without a word.

And pages whose source wraps its lines (``wrapped``): each sentence a paragraph wrapped at 40
columns, read as HTML reads it (a line break is a space) against each line on its own.

And pages with a line break inside each sentence (``breaks``): a ``<br>`` before the middle
word of each of 4 words or more, read as one sentence where the line runs on, against each line
on its own.

And text copied from a PDF (``hyphens``): the longest word of each sentence cut by a hyphen and
a line break, read as one word where the line runs on, against each line on its own.
"""

from __future__ import annotations

import html
import random
import re
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import on_a_test_set
from transformer_mt.evaluate import score
from transformer_mt.precision import resolve_precision
from transformer_mt.translate import Translator
from transformer_mt.translate.documents import split_html, split_text, translate_split
from transformer_mt.translate.files import translate_file

LEXICON = dict(  # German nouns of Multi30k with one usual English translation
    Mann="man", Frau="woman", Hund="dog", Kind="child", Mädchen="girl", Junge="boy",
    Männer="men", Frauen="women", Hunde="dogs", Kinder="children", Ball="ball", Straße="street",
    Wasser="water", Hemd="shirt", Hut="hat", Gruppe="group", Menschen="people", Person="person",
    Gebäude="building", Wand="wall", Tisch="table", Baum="tree", Strand="beach", Schnee="snow",
    Gras="grass", Jacke="jacket", Auto="car", Boot="boat", Gitarre="guitar", Kamera="camera",
    Bühne="stage", Feld="field", Pferd="horse", Buch="book", Küche="kitchen", Stadt="city",
    Park="park", Menge="crowd", Sonnenbrille="sunglasses", Brille="glasses", Himmel="sky",
    Berg="mountain", Fenster="window", Tür="door", Stuhl="chair", Bank="bench", Zaun="fence",
    Brücke="bridge", Flugzeug="plane", Zug="train", Bus="bus", Essen="food", Pferde="horses",
    Hose="pants", Kleid="dress", Helm="helmet", Rucksack="backpack", Tasche="bag")


def pages_of(sources: list[str], seed: int = 1) -> list[tuple[str, str, str, str | None]]:
    """Each sentence as (before, word, after, the word's translation if in the lexicon)."""
    rng, out = random.Random(seed), []
    for sentence in sources:
        words = sentence.split(" ")
        known = [i for i, w in enumerate(words) if i and w in LEXICON]
        i = known[0] if len(known) == 1 else rng.randrange(1, len(words)) if len(words) > 1 \
            else 0
        out.append((" ".join(words[:i]) + " " * (i > 0), words[i],
                    " " * (i < len(words) - 1) + " ".join(words[i + 1:]),
                    LEXICON[words[i]] if len(known) == 1 else None))
    return out


def placed(pages: list[str], gold: list[str | None]) -> dict:
    """Where the <b> landed, among the outputs that hold the gold translation once."""
    exact = within2 = eligible = 0
    for page, word in zip(pages, gold, strict=True):
        text = html.unescape(re.sub("<[^>]+>", "", page)).lower()
        if word is None or len(re.findall(rf"\b{word}\b", text)) != 1:
            continue
        eligible += 1
        bold = re.findall(r"\w+", " ".join(re.findall(r"<b>(.*?)</b>", page, re.S)).lower())
        exact += bold == [word]
        within2 += word in bold and len(bold) <= 2
    return {"eligible": eligible, "exact": round(exact / max(eligible, 1), 3),
            "within2": round(within2 / max(eligible, 1), 3)}


def run(translator: Translator, sources: list[str], refs: list[str]) -> dict:
    cases = pages_of(sources)
    marked = [html.escape(a, False) + f"<b>{html.escape(w, False)}</b>" + html.escape(b, False)
              for a, w, b, _ in cases]
    lang, src_lang = translator.config.data.tgt_lang, translator.config.data.src_lang
    start = time.perf_counter()
    plain = translator.translate(sources, form="text")  # as a page's text is split
    plain_s = time.perf_counter() - start
    start = time.perf_counter()
    ours = translator.translate(marked, form="html")
    ours_s = time.perf_counter() - start
    by_position = translate_split([split_html(m, src_lang) for m in marked],
                                  lambda s: translator.translate(s))
    pieces = [p for a, w, b, _ in cases for p in (a, w, b)]
    alone = iter(translator.translate(pieces, form="text"))
    theirs = [f"{html.escape(next(alone), False)}<b>{html.escape(next(alone), False)}</b>"
              f"{html.escape(next(alone), False)}" for _ in cases]
    text = [html.unescape(re.sub("<[^>]+>", "", p)) for p in ours]
    out: dict = {"sentences": len(sources), "plain": _scores(plain, refs, lang, plain_s),
                 "differ": differing(translator, text, plain)}
    for name, found in (("ours", ours), ("pieces", theirs)):
        texts = [" ".join(html.unescape(re.sub("<[^>]+>", "", p)).split()) for p in found]
        out[name] = _scores(texts, refs, lang, ours_s if name == "ours" else None)
    gold = [g for *_, g in cases]
    out["placement"] = {"attention": placed(ours, gold), "position": placed(by_position, gold),
                        "pieces": placed(theirs, gold)}
    out["ratio"] = round(out["ours"]["bleu"] / out["pieces"]["bleu"], 3) \
        if out["pieces"]["bleu"] else None
    out["subtitles"] = subtitles(translator, sources, refs)
    out["wrapped"] = wrapped(translator, sources, refs, plain)
    out["breaks"] = breaks(translator, sources, refs, plain)
    out["hyphens"] = hyphens(translator, sources, refs, plain)
    return out


def differing(translator: Translator, texts: list[str], sentences: list[str]) -> int:
    """How many of ``texts`` (a page's text, read as one sentence) are not the translation of
    their sentence alone (``sentences``, translated in another batch): none in fp32; in bf16
    a batch of other sentences rounds otherwise, and a near-tie may go the other way (1 of
    1,000 pages with a line break in each, on the Zen 4's model)."""
    differ = sum(" ".join(t.split()) != " ".join(s.split())
                 for t, s in zip(texts, sentences, strict=True))
    cfg = translator.settings()
    assert not differ or resolve_precision(cfg.precision, translator.device) != "fp32", differ
    return differ


def wrapped(translator: Translator, sources: list[str], refs: list[str],
            plain: list[str]) -> dict:
    """The sentences as paragraphs of a page whose source wraps at 40 columns, as an editor
    wraps it: read as HTML reads it (a line break is a space) against each line translated
    on its own (as ours did before); each page's text is its sentence's translation
    (:func:`differing`)."""
    lines = [textwrap.wrap(sentence, 40, break_on_hyphens=False) for sentence in sources]
    pages = ["<p>" + "\n  ".join(html.escape(line, False) for line in wrap) + "</p>"
             for wrap in lines]
    start = time.perf_counter()
    ours = [" ".join(html.unescape(re.sub("<[^>]+>", "", p)).split())
            for p in translator.translate(pages, form="html")]
    seconds = time.perf_counter() - start
    differ = differing(translator, ours, plain)
    alone = iter(translator.translate([line for wrap in lines for line in wrap], form="text"))
    theirs = [" ".join(next(alone) for _ in wrap) for wrap in lines]
    lang = translator.config.data.tgt_lang
    out = {"pages": len(pages), "wrapped": sum(len(wrap) > 1 for wrap in lines), "differ": differ,
           "ours": _scores(ours, refs, lang, seconds), "lines": _scores(theirs, refs, lang, None)}
    out["ratio"] = round(out["ours"]["bleu"] / out["lines"]["bleu"], 3) \
        if out["lines"]["bleu"] else None
    return out


def breaks(translator: Translator, sources: list[str], refs: list[str],
           plain: list[str]) -> dict:
    """The sentences as paragraphs with a line break (``<br>``) before their middle word, for
    those of 4 words or more: read as one sentence where the line runs on
    (``sentences.soft_breaks``; ``runs_on`` says how many), the break kept between the words
    around it, against each line translated on its own (as ours did before)."""
    lines = [[" ".join(w[:len(w) // 2]), " ".join(w[len(w) // 2:])] if len(w) >= 4 else [s]
             for s, w in ((s, s.split()) for s in sources)]
    pages = ["<p>" + "<br>".join(html.escape(line, False) for line in page) + "</p>"
             for page in lines]
    return _broken(translator, lines, pages, "html", refs, plain)


def hyphens(translator: Translator, sources: list[str], refs: list[str],
            plain: list[str]) -> dict:
    """The sentences as text copied from a PDF, hyphenated: the longest word of 6 letters or
    more of each cut in its middle by a hyphen and a line break ("Fahr-\nrad"), read as one
    sentence and one word (``sentences.soft_breaks``), against each line translated on its
    own (as ours did before)."""
    lines = []
    for sentence in sources:
        longest = max(re.finditer(r"\w{6,}", sentence), key=lambda m: len(m[0]), default=None)
        middle = longest and (longest.start() + longest.end()) // 2
        lines.append([sentence[:middle] + "-", sentence[middle:]] if middle else [sentence])
    return _broken(translator, lines, ["\n".join(page) for page in lines], "text", refs, plain)


def _broken(translator: Translator, lines: list[list[str]], pages: list[str], form: str,
            refs: list[str], plain: list[str]) -> dict:
    """``pages`` (each of its sentence's ``lines``, in ``form``) translated whole against each
    line on its own; a page read as one sentence is its sentence's translation, and has words
    on each side of its line break."""
    src_lang = translator.config.data.src_lang
    split = split_html if form == "html" else split_text
    whole = [len(page) > 1 and len(split(p, src_lang).sentences) == 1
             for page, p in zip(lines, pages, strict=True)]
    start = time.perf_counter()
    found = translator.translate(pages, form=form)
    seconds = time.perf_counter() - start
    shown = [re.sub("<br/>", "\n", p) for p in found] if form == "html" else found
    ours = [" ".join(html.unescape(re.sub("<[^>]+>", " ", p)).split()) for p in shown]
    differ = differing(translator, [t for t, one in zip(ours, whole, strict=True) if one],
                       [s for s, one in zip(plain, whole, strict=True) if one])
    for one, page in zip(whole, shown, strict=True):
        assert not one or all(re.search(r"\w", re.sub("<[^>]+>", "", side))
                              for side in page.split("\n"))
    alone = iter(translator.translate([line for page in lines for line in page], form="text"))
    theirs = [" ".join(next(alone) for _ in page) for page in lines]
    lang = translator.config.data.tgt_lang
    out = {"pages": len(pages), "broken": sum(len(page) > 1 for page in lines),
           "runs_on": sum(whole), "differ": differ, "ours": _scores(ours, refs, lang, seconds),
           "lines": _scores(theirs, refs, lang, None)}
    out["ratio"] = round(out["ours"]["bleu"] / out["lines"]["bleu"], 3) \
        if out["lines"]["bleu"] else None
    return out


def subtitles(translator: Translator, sources: list[str], refs: list[str]) -> dict:
    """The sentences as subtitles, two for each of 4 words or more: the .srt translated whole
    against each subtitle on its own."""
    import srt

    cues, owner = [], []  # each subtitle's text, and the sentence it is of
    for i, sentence in enumerate(sources):
        words = sentence.split()
        halves = [words] if len(words) < 4 else [words[:len(words) // 2],
                                                 words[len(words) // 2:]]
        cues += [" ".join(half) for half in halves]
        owner += [i] * len(halves)
    file = srt.compose([srt.Subtitle(n + 1, timedelta(seconds=2 * n),
                                     timedelta(seconds=2 * n + 1.5), text)
                        for n, text in enumerate(cues)])
    start = time.perf_counter()
    ours = [s.content for s in srt.parse(translate_file(translator, "bench.srt",
                                                        file.encode()).decode())]
    seconds = time.perf_counter() - start
    alone = translator.translate(cues, form="text")
    out: dict = {"subtitles": len(cues), "sentences_cut": len(cues) - len(sources)}
    for name, texts in (("ours", ours), ("alone", alone)):
        joined = [" ".join(" ".join(t for t, o in zip(texts, owner, strict=True) if o == i)
                           .split()) for i in range(len(sources))]
        out[name] = {**_scores(joined, refs, translator.config.data.tgt_lang,
                               seconds if name == "ours" else None),
                     "wordless": sum(not re.search(r"\w", t) for t in texts)}
    out["ratio"] = round(out["ours"]["bleu"] / out["alone"]["bleu"], 3) \
        if out["alone"]["bleu"] else None
    return out


def _scores(texts: list[str], refs: list[str], lang: str, seconds: float | None) -> dict:
    s = score(texts, refs, lang)
    return {"bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2),
            **({"seconds": round(seconds, 2)} if seconds is not None else {})}


def main() -> None:
    on_a_test_set("inline_markup", __doc__.split("\n\n")[0], run, None)


if __name__ == "__main__":
    main()
