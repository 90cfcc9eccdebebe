"""Sentences as people type them: a test set in capitals (its references too), in lower case,
its first letter in lower case, in title case, without its language's letters ("ae" for "ä",
"ss" for "ß", or "a" for "ä": translate/spelling.py), with an emoji after its second word,
with its words after the second in brackets or in German quotes, as a question (its
references too), and with a semicolon or a dash for its first comma, translated as ``mt
translate`` does them (translate/casing.py, translate/spelling.py, ``sentences.symbols``,
translate/marks.py) against each read as typed (its tokens as they are, as an export in
CTranslate2 or transformers reads it, and as ours did before 2026-12-06), and against the
sentences as written (the bound).

    python bench/typed_inputs.py --checkpoint runs/cpu/avg.pt [--set test_2016_flickr]

Prints one JSON record: BLEU and chrF of the sentences as written, and for each way of
typing them how many it changed, BLEU and chrF of ours and of each read as typed, ``ratio``
(ours over as typed, BLEU, measured in the same run) and ``recovered`` (ours over the
translations of the sentences as written, typed alike: in capitals for capitals); with an
emoji, how many translations hold it once (``kept``), scored without it; in brackets or
quotes, how many hold them in order (quotes in any language's marks), scored without them.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import on_a_test_set
from transformer_mt.evaluate import score
from transformer_mt.translate import Translator
from transformer_mt.translate.quotation import delimiters
from transformer_mt.translate.spelling import BARE, SPELT

WORDS = re.compile(r"[^\W\d_]+")
SPELT_OUT = str.maketrans({**SPELT, **{c.upper(): s.capitalize() for c, s in SPELT.items()
                                       if len(c.upper()) == 1}})
WITHOUT_MARKS = str.maketrans({**SPELT, **BARE, **{c.upper(): s.upper() for c, s in BARE.items()}})


EMOJI = "🙂"


def with_emoji(sentence: str) -> str:
    """``sentence`` with an emoji after its second word."""
    words = sentence.split(" ")
    return " ".join([*words[:2], EMOJI, *words[2:]])


def bracketed(sentence: str) -> str:
    """``sentence`` with its words after the second in brackets, the final mark outside."""
    words, end = sentence.rstrip(".").split(" "), "." if sentence.endswith(".") else ""
    return " ".join([*words[:2], f"({' '.join(words[2:])})"]) + end if len(words) > 2 \
        else sentence


def quoted(sentence: str) -> str:
    """``sentence`` with its words after the second in German quotes, the final mark outside."""
    return bracketed(sentence).replace("(", "„").replace(")", "“")


def kept_in_order(translation: str, marks: str) -> bool:
    """Whether ``translation`` holds two of ``marks``: "(" then ")" for brackets; for quotes
    two of any of them (the source's „“, the target's “” or straight ones, as a model
    writes them)."""
    found = [c for c in translation if c in marks]
    return found == ["(", ")"] if marks == "()" else len(found) == 2


def asked(sentence: str) -> str:
    """``sentence`` as a question: its full stop a question mark."""
    return sentence.rstrip(".") + "?"


# each way of typing: the sentences, and what their translations are scored against
TYPINGS: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "capitals": (str.upper, str.upper),
    "lower case": (str.lower, str),
    "first in lower case": (lambda s: s[:1].lower() + s[1:], str),
    "title case": (lambda s: WORDS.sub(lambda m: m[0][:1].upper() + m[0][1:].lower(), s), str),
    "spelt out": (lambda s: s.translate(SPELT_OUT), str),
    "without dots": (lambda s: s.translate(WITHOUT_MARKS), str),  # (ß spelt "ss")
    "an emoji": (with_emoji, str),
    "in brackets": (bracketed, str),
    "in quotes": (quoted, str),
    "a question": (asked, asked),
    "a semicolon": (lambda s: s.replace(", ", "; ", 1), str),  # (for the first comma)
    "a dash": (lambda s: s.replace(", ", " – ", 1), str),
}


@contextlib.contextmanager
def as_typed(translator: Translator) -> Iterator[None]:
    """``translator`` reading each sentence as it is typed: no case or spelling read."""
    vars(translator)["as_read"] = list  # (the instance's, over the class's method)
    try:
        yield
    finally:
        del vars(translator)["as_read"]


def scored(texts: list[str], refs: list[str], lang: str) -> dict:
    s = score(texts, refs, lang)
    return {"bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2)}


def run(translator: Translator, sources: list[str], refs: list[str]) -> dict:
    lang = translator.config.data.tgt_lang
    quotes = {c for code in (translator.config.data.src_lang, lang)
              for c in (delimiters(code) or "")[:2]}
    pairs = {"in brackets": "()", "in quotes": "".join(sorted(quotes)) + '"'}
    written = translator.translate(sources)
    out: dict = {"sentences": len(sources), "written": scored(written, refs, lang)}
    for name, (typed, as_ref) in TYPINGS.items():
        lines, their_refs = [typed(s) for s in sources], [as_ref(r) for r in refs]
        ours = translator.translate(lines)
        with as_typed(translator):  # (one sentence at a time: a symbol read as it is)
            plain = [h[0].text for h in translator.translate(lines, nbest=1, scores=False)]
        found: dict = {"changed": sum(a != b for a, b in zip(lines, sources, strict=True))}
        if name == "an emoji":  # (kept, then scored as the references are: without it)
            found["kept"] = {k: sum(t.count(EMOJI) == 1 for t in texts)
                             for k, texts in (("ours", ours), ("typed", plain))}
            ours, plain = ([re.sub(f" ?{EMOJI} ?", " ", t).strip() for t in texts]
                           for texts in (ours, plain))
        if name in pairs:  # (kept in order, then scored without them)
            found["kept"] = {k: sum(kept_in_order(t, pairs[name]) for t in texts)
                             for k, texts in (("ours", ours), ("typed", plain))}
            marks = re.compile(f" ?[{re.escape(pairs[name])}] ?")
            ours, plain = ([marks.sub(" ", t).replace(" .", ".").strip() for t in texts]
                           for texts in (ours, plain))
        found |= {"ours": scored(ours, their_refs, lang), "typed": scored(plain, their_refs, lang)}
        bound = scored([as_ref(w) for w in written], their_refs, lang)["bleu"]
        found["ratio"] = round(found["ours"]["bleu"] / found["typed"]["bleu"], 3) \
            if found["typed"]["bleu"] else None
        found["recovered"] = round(found["ours"]["bleu"] / bound, 3) if bound else None
        out[name] = found
    return out


def main() -> None:
    on_a_test_set("typed_inputs", __doc__.split("\n\n")[0], run)


if __name__ == "__main__":
    main()
