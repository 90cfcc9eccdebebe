"""What a glossary costs and gives: a test set translated as it is and with one glossary term
a sentence, drawn from its reference, greedy and beam.

    python bench/glossary.py --checkpoint runs/cpu/avg.pt [--set test_2016_flickr] [--beam 5]

The target term of a sentence is its reference's longest word (letters only, at least 4 of
them); its source term, the source word the model attends to most while it reads that word of
the reference (its own alignment, as ``mt translate --align``): a glossary built from the
references. Three searches: ``plain`` (no glossary: it holds the term where the model writes it
anyway), ``constrained`` (the term placed by constrained search, ``decode/constraints.py``, the
source as it is) and ``glossary`` (as ``mt translate --glossary`` translates: the source term
read as its target term, ``translate/glossary.py``, then constrained search and unknown words
copied); both of the last must hold every term. Prints one JSON record: per search, BLEU and
chrF (sacreBLEU, as ``mt evaluate``), how many outputs hold their term (whole word, exact case)
and the seconds; ``ratio`` is the BLEU of the glossary's beam search against the plain one,
``read_as_target_ratio`` against the constrained one, each measured in the same run.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import on_a_test_set
from transformer_mt.data.tokenize import WORD_START
from transformer_mt.evaluate import score
from transformer_mt.translate import Translator
from transformer_mt.translate.glossary import Glossary, steered
from transformer_mt.translate.unknown import copy_unknown

WORD = re.compile(r"[^\W\d_]{4,}")


def term_of(reference: str) -> str:
    """The reference's longest word of letters (the first of the longest); "" if none."""
    return max(WORD.findall(reference), key=len, default="")


def holds(text: str, term: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text) is not None


def glossary_of(translator: Translator, source: str, reference: str) -> Glossary:
    """The sentence's glossary: its reference's term, and the source word the model aligns
    with it; empty where either is missing or the word is not found as a whole word."""
    term = term_of(reference)
    if not term:
        return Glossary()
    src_tokens = list(next(iter(translator.tokenizers[0].tokenize([source]))))
    tgt_tokens = list(next(iter(translator.tokenizers[1].tokenize([reference]))))
    subword = translator.tokenizers[1].subword  # (a piece that begins the word, or the word)
    first = [k for k, t in enumerate(tgt_tokens) if (
        t[:1] == WORD_START and len(t) > 1 and term.startswith(t[1:]) if subword else t == term)]
    if not first or not src_tokens:
        return Glossary()
    weights = translator.cross_attention(translator.src_vocab.encode(src_tokens),
                                         translator.tgt_vocab.encode(tgt_tokens, eos=False))
    j = int(weights[first[0], :len(src_tokens)].argmax())  # (the source's <eos> left out)
    if translator.tokenizers[0].subword:  # the whole word of the piece: from its "▁" on
        start = max(i for i in range(j + 1) if src_tokens[i].startswith(WORD_START) or i == 0)
        end = next((i for i in range(j + 1, len(src_tokens))
                    if src_tokens[i].startswith(WORD_START)), len(src_tokens))
        word = "".join(src_tokens[start:end]).lstrip(WORD_START)
    else:
        word = src_tokens[j]
    glossary = Glossary({word: term}) if WORD.fullmatch(word) else Glossary()
    return glossary if glossary.required(source) else Glossary()


def run(translator: Translator, sources: list[str], refs: list[str], beam: int) -> dict:
    glossaries = [glossary_of(translator, s, r) for s, r in zip(sources, refs, strict=True)]
    terms = [g.required(s)[0] if g else "" for g, s in zip(glossaries, sources, strict=True)]
    steer = [steered(translator, [s], g) if g else ([s], translator.encode([s]), [[]])
             for s, g in zip(sources, glossaries, strict=True)]
    read, marked = [m[0][0] for m in steer], [m[1][0] for m in steer]
    required = [m[2][0] for m in steer]
    ids = translator.encode(sources)
    out: dict = {"sentences": len(sources), "with_a_term": sum(map(bool, terms))}
    lang = translator.config.data.tgt_lang
    for name, size in (("greedy", 1), (f"beam{beam}", beam)):
        cfg = translator.settings(beam_size=size)
        for how, given, src in (("plain", ids, sources), ("constrained", ids, sources),
                                ("glossary", marked, read)):
            start = time.perf_counter()
            hyps = translator.translate_ids(given, cfg, scores=False,
                                            required=None if how == "plain" else required)
            if cfg.replace_unk:  # (as mt translates)
                hyps = copy_unknown(translator, src, hyps, how == "glossary")
            seconds = time.perf_counter() - start
            texts = [h[0].text for h in hyps]
            s = score(texts, refs, lang)
            out[f"{name}_{how}"] = {
                "bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2),
                "terms_held": sum(holds(x, t) for x, t in zip(texts, terms, strict=True) if t),
                "seconds": round(seconds, 2)}
    plain, held = out[f"beam{beam}_plain"], out[f"beam{beam}_glossary"]
    constrained = out[f"beam{beam}_constrained"]
    out["ratio"] = round(held["bleu"] / plain["bleu"], 3) if plain["bleu"] else None
    out["read_as_target_ratio"] = (round(held["bleu"] / constrained["bleu"], 3)
                                   if constrained["bleu"] else None)
    out["slowdown"] = round(held["seconds"] / plain["seconds"], 2) if plain["seconds"] else None
    return out


def main() -> None:
    on_a_test_set("glossary", __doc__.split("\n\n")[0], run,
                  lambda parser: parser.add_argument("--beam", type=int, default=5))


if __name__ == "__main__":
    main()
