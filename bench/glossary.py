"""What a glossary costs and gives: a test set translated as it is and with one required term
a sentence, drawn from its reference, greedy and beam.

    python bench/glossary.py --checkpoint runs/cpu/avg.pt [--set test_2016_flickr] [--beam 5]

The term of a sentence is its reference's longest word (letters only, at least 4 of them):
what a glossary built from the references asks. Constrained search (``decode/constraints.py``)
must place it in every output; the plain search places it where the model writes it anyway.
Prints one JSON record: per search, BLEU and chrF (sacreBLEU, as ``mt evaluate``), how many
outputs hold their term (whole word, exact case) and the seconds; ``ratio`` is the BLEU of
constrained beam search against the plain one, measured in the same run.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import on_a_test_set
from transformer_mt.evaluate import score
from transformer_mt.translate import Translator
from transformer_mt.translate.results import Required

WORD = re.compile(r"[^\W\d_]{4,}")


def term_of(reference: str) -> str:
    """The reference's longest word of letters (the first of the longest); "" if none."""
    return max(WORD.findall(reference), key=len, default="")


def holds(text: str, term: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text) is not None


def run(translator: Translator, sources: list[str], refs: list[str], beam: int) -> dict:
    ids = translator.encode(sources)
    terms = [term_of(r) for r in refs]
    pieces = translator.tokenizers[1].tokenize(terms)
    required = [[Required(t, translator.tgt_vocab.encode(p, eos=False))] if t else []
                for t, p in zip(terms, pieces, strict=True)]
    out: dict = {"sentences": len(sources), "with_a_term": sum(map(bool, terms))}
    lang = translator.config.data.tgt_lang
    for name, size in (("greedy", 1), (f"beam{beam}", beam)):
        cfg = translator.settings(beam_size=size)
        for how, given in (("plain", None), ("glossary", required)):
            start = time.perf_counter()
            hyps = translator.translate_ids(ids, cfg, scores=False, required=given)
            seconds = time.perf_counter() - start
            texts = [h[0].text for h in hyps]
            s = score(texts, refs, lang)
            out[f"{name}_{how}"] = {
                "bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2),
                "terms_held": sum(holds(x, t) for x, t in zip(texts, terms, strict=True) if t),
                "seconds": round(seconds, 2)}
    plain, held = out[f"beam{beam}_plain"], out[f"beam{beam}_glossary"]
    out["ratio"] = round(held["bleu"] / plain["bleu"], 3) if plain["bleu"] else None
    out["slowdown"] = round(held["seconds"] / plain["seconds"], 2) if plain["seconds"] else None
    return out


def main() -> None:
    on_a_test_set("glossary", __doc__.split("\n\n")[0], run,
                  lambda parser: parser.add_argument("--beam", type=int, default=5))


if __name__ == "__main__":
    main()
