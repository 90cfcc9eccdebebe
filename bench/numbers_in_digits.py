"""Numbers in digits: the pairs of a German -> English test set whose source and reference
each say one number in words ("Zwei Männer ..." / "Two men ..."), that number written in digits
on both sides as another (2-99 most often, then hundreds, years and thousands: "37 Männer ..." /
"37 men ..."), translated by a model trained with ``data.train.numbers`` (variants of its
pairs with numbers: data/numbers.py) against one trained without (``--against``, its peer).

    python bench/numbers_in_digits.py --checkpoint runs/numbers/avg.pt --against runs/cpu/avg.pt

Prints one JSON record: for each model, how many of its translations hold the number exactly
(``kept``), how many hold another (``others``: a number the source lacks) and their BLEU and
chrF against the references so written, as the model writes them (``keep_spans=False``, ``mt
translate --no-keep-spans``) and with spans kept (``*_keep_spans``: ``decode.keep_spans``, on
by default), and with spans
kept, the number in brackets on both sides where it begins neither ("Auf dem Bild sind (37)
Männer" / "There are (37) men ...", ``*_in_brackets``: ``kept`` counts "(37)" whole, the marks
round the number; one that begins a line is a list item's marker), each row's seconds;
``ratio`` (ours kept over the peer's, as the models write them, measured in the same run) and
``keep_spans_slowdown`` (ours with spans kept against without: what the constrained search
costs).
"""

from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import on_a_test_set
from transformer_mt.data.numbers import drawn_number
from transformer_mt.evaluate import score
from transformer_mt.translate import Translator

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


def _row(model: Translator, keep: bool, lines: list[str], refs: list[str],
         said: list[str], lang: str, bracketed: bool = False) -> dict:
    """How many translations of ``lines`` hold their number (``bracketed``: "(37)" whole),
    how many another, their BLEU and chrF against ``refs``, and the seconds it took."""
    if not lines:
        return {"sentences": 0}
    start = time.perf_counter()
    texts = model.translate(lines, keep_spans=keep)
    seconds = time.perf_counter() - start
    numbers = [re.findall(r"\d+(?:[.,:]\d+)*", t) for t in texts]
    s = score(texts, refs, lang)
    return {"sentences": len(lines),
            "kept": sum(f"({n})" in t if bracketed else n in found
                        for n, t, found in zip(said, texts, numbers, strict=True)),
            "others": sum(any(f != n for f in found)
                          for n, found in zip(said, numbers, strict=True)),
            "bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2), "seconds": round(seconds, 2)}


def run(translator: Translator, sources: list[str], refs: list[str],
        against: Path) -> dict:
    lang = translator.config.data.tgt_lang
    if (translator.config.data.src_lang, lang) != ("de", "en"):
        raise SystemExit("bench/numbers_in_digits.py: its numbers in words are German and "
                         "English ones")
    pairs = in_digits(sources, refs)
    out: dict = {"sentences": len(pairs), "against": str(against)}
    plain = ([s for s, _, _ in pairs], [r for _, r, _ in pairs], [n for _, _, n in pairs])
    # in brackets where the number does not begin either side (there "(37) " is a list
    # item's marker, kept as it is and not read: translate/sentences.py)
    inner = [(s, r, n) for s, r, n in pairs if not s.startswith(n) and not r.startswith(n)]
    bracketed = ([s.replace(n, f"({n})", 1) for s, _, n in inner],
                 [r.replace(n, f"({n})", 1) for _, r, n in inner], [n for _, _, n in inner])
    for name, model in (("ours", translator), ("peer", Translator.load(against))):
        out[name] = _row(model, False, *plain, lang)
        out[f"{name}_keep_spans"] = _row(model, True, *plain, lang)
        out[f"{name}_in_brackets"] = _row(model, True, *bracketed, lang, bracketed=True)
    # what holding the spans costs: the constrained search (decode/constraints.py) against
    # the plain one, the same sentences, the same run
    seconds = out["ours"].get("seconds")
    out["keep_spans_slowdown"] = round(out["ours_keep_spans"]["seconds"] / seconds, 2) \
        if seconds else None
    out["ratio"] = round(out["ours"]["kept"] / out["peer"]["kept"], 3) \
        if out["peer"]["kept"] else None
    return out


def main() -> None:
    on_a_test_set("numbers", __doc__.split("\n\n")[0], run, lambda parser: parser.add_argument(
        "--against", type=Path, required=True,
        help="a checkpoint of the same recipe trained without data.train.numbers"))


if __name__ == "__main__":
    main()
