"""Numbers in digits: the pairs of a German -> English test set whose source and reference
each say one number in words ("Zwei Männer ..." / "Two men ..."), that number written in digits
on both sides as another (2-99 most often, then hundreds, years and thousands: "37 Männer ..." /
"37 men ..."), translated by a model trained with ``data.train.numbers`` (variants of its
pairs with numbers: data/numbers.py) against one trained without (``--against``, its peer).

    python bench/numbers_in_digits.py --checkpoint runs/numbers/avg.pt --against runs/cpu/avg.pt

Prints one JSON record: for each model, how many of its translations hold the number exactly
(``kept``), how many hold another (``others``: a number the source lacks) and their BLEU and
chrF against the references so written, as it translates and with spans kept
(``*_keep_spans``: ``Glossary(keep_spans=True)``, ``mt translate --keep-spans``), and with spans
kept, the number in brackets on both sides ("(37) Männer ..." / "(37) men ...",
``*_in_brackets``: ``kept`` counts "(37)" whole, the marks round the number); ``ratio`` (ours
kept over the peer's, as it translates, measured in the same run).
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import on_a_test_set
from transformer_mt.data.numbers import drawn_number
from transformer_mt.evaluate import score
from transformer_mt.translate import Translator
from transformer_mt.translate.glossary import Glossary

# the numbers Multi30k's captions say in words, German and English
IN_WORDS = {"zwei": "two", "drei": "three", "vier": "four", "fünf": "five", "sechs": "six",
            "sieben": "seven", "acht": "eight", "neun": "nine", "zehn": "ten", "elf": "eleven",
            "zwölf": "twelve"}


def _said(words: list[str], sentence: str) -> list[str]:
    return [m.casefold() for m in re.findall(rf"\b(?:{'|'.join(words)})\b", sentence,
                                             flags=re.IGNORECASE)]


def in_digits(sources: list[str], refs: list[str]) -> list[tuple[str, str, str]]:
    """(source, reference, number) of each pair that says one number in words on each side,
    the same, that number written in digits as another, the same for the same pairs."""
    found = []
    for n, (src, ref) in enumerate(zip(sources, refs, strict=True)):
        de, en = _said(list(IN_WORDS), src), _said(list(IN_WORDS.values()), ref)
        if len(de) == len(en) == 1 and IN_WORDS[de[0]] == en[0]:
            number = drawn_number(random.Random(n))
            found.append((re.sub(rf"\b{de[0]}\b", number, src, flags=re.IGNORECASE),
                          re.sub(rf"\b{en[0]}\b", number, ref, flags=re.IGNORECASE), number))
    return found


def run(translator: Translator, sources: list[str], refs: list[str],
        against: Path) -> dict:
    lang = translator.config.data.tgt_lang
    if (translator.config.data.src_lang, lang) != ("de", "en"):
        raise SystemExit("bench/numbers_in_digits.py: its numbers in words are German and "
                         "English ones")
    pairs = in_digits(sources, refs)
    lines, their_refs = [s for s, _, _ in pairs], [r for _, r, _ in pairs]
    out: dict = {"sentences": len(pairs), "against": str(against)}
    said = [n for _, _, n in pairs]
    bracketed = [[t.replace(n, f"({n})", 1) for t, n in zip(side, said, strict=True)]
                 for side in (lines, their_refs)]
    for name, model in (("ours", translator), ("peer", Translator.load(against))):
        for key, glossary, (ins, outs, held) in (
                (name, None, (lines, their_refs, said)),
                (f"{name}_keep_spans", Glossary(keep_spans=True), (lines, their_refs, said)),
                (f"{name}_in_brackets", Glossary(keep_spans=True),
                 (*bracketed, [f"({n})" for n in said]))):
            texts = model.translate(ins, glossary=glossary)
            numbers = [re.findall(r"\d+(?:[.,:]\d+)*", t) for t in texts]
            s = score(texts, outs, lang)
            out[key] = {"kept": sum(h in (t if h.startswith("(") else found) for t, found, h
                                    in zip(texts, numbers, held, strict=True)),
                        "others": sum(any(f != n for f in found) for found, n in zip(
                            numbers, said, strict=True)),
                        "bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2)}
    out["ratio"] = round(out["ours"]["kept"] / out["peer"]["kept"], 3) \
        if out["peer"]["kept"] else None
    return out


def main() -> None:
    on_a_test_set("numbers", __doc__.split("\n\n")[0], run, lambda parser: parser.add_argument(
        "--against", type=Path, required=True,
        help="a checkpoint of the same recipe trained without data.train.numbers"))


if __name__ == "__main__":
    main()
