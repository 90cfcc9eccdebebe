"""Long inputs: a test set's sentences joined k to a line ("S1. S2.") and k to one sentence of
clauses ("S1, s2, s3."; their references joined alike), translated as ``mt translate`` does
them (sentence by sentence, one longer than the training's in parts:
translate/long_sentences.py) against each input read whole (as an export in CTranslate2 or
transformers reads it, and ours did before).

    python bench/long_inputs.py --checkpoint runs/cpu/avg.pt [--set test_2016_flickr]
        [--joined 2,5] [--max-sentence-tokens N]

Prints one JSON record: for the sentences alone and for each way of joining and each k, how
many inputs, their mean length in tokens, how many were cut into parts, BLEU and chrF of ours
and of the inputs read whole against the references joined alike (``ratio``: ours over whole,
measured in the same run). ``--max-sentence-tokens``: where a checkpoint does not record how
long its training's sentences were (made before 2026-12-01), the length to cut at.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import on_a_test_set
from transformer_mt.evaluate import score
from transformer_mt.translate import Translator


def joined(sources: list[str], refs: list[str], k: int, clauses: bool
           ) -> tuple[list[str], list[str]]:
    """The sources k at a time as one line (or one sentence of clauses), the references
    joined alike."""
    lines, joined_refs = [], []
    for i in range(0, len(sources) - k + 1, k):
        lines.append(_join(sources[i:i + k], clauses))
        joined_refs.append(_join(refs[i:i + k], clauses))
    return lines, joined_refs


def _join(group: list[str], clauses: bool) -> str:
    """ "S1. S2. S3.", or "S1, s2, s3." (each but the first lowercased, the full stops
    dropped: a reference's "A man rides. Two dogs play." is "A man rides, two dogs play.")."""
    if not clauses:
        return " ".join(group)
    return ", ".join(s.rstrip(" .") if n == 0 else s[:1].lower() + s[1:].rstrip(" .")
                     for n, s in enumerate(group)) + "."


def compared(translator: Translator, lines: list[str], refs: list[str], **settings) -> dict:
    """Ours (a sentence at a time, in parts) against each line read whole, on ``lines``."""
    lang = translator.config.data.tgt_lang
    cfg = translator.settings(**settings)
    tokens = [len(t) for t in translator.tokenizers[0].tokenize(lines)]
    out: dict = {"inputs": len(lines), "tokens": round(sum(tokens) / max(len(tokens), 1), 1),
                 "cut": sum(not f for f in translator.fits(lines, cfg))}
    start = time.perf_counter()
    ours = translator.translate(lines, cfg)
    seconds = time.perf_counter() - start
    whole = [h[0].text for h in translator.translate(lines, cfg, nbest=1, scores=False)]
    for name, texts in (("ours", ours), ("whole", whole)):
        s = score(texts, refs, lang)
        out[name] = {"bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2),
                     "length": round(sum(map(len, texts)) / max(sum(map(len, refs)), 1), 3)}
    out["ours"]["seconds"] = round(seconds, 2)
    out["ratio"] = round(out["ours"]["bleu"] / out["whole"]["bleu"], 3) \
        if out["whole"]["bleu"] else None
    return out


def run(translator: Translator, sources: list[str], refs: list[str], joined_by: str = "2,5",
        max_sentence_tokens: int | None = None) -> dict:
    settings = {"max_sentence_tokens": max_sentence_tokens} if max_sentence_tokens else {}
    cut_at = translator.settings(**settings).max_sentence_tokens
    out: dict = {"max_sentence_tokens": cut_at or translator.max_source_tokens,
                 "alone": compared(translator, sources, refs, **settings)}
    for k in (int(n) for n in joined_by.split(",")):
        for name, clauses in (("lines", False), ("clauses", True)):
            out[f"{k} {name}"] = compared(translator, *joined(sources, refs, k, clauses),
                                          **settings)
    return out


def options(parser) -> None:
    parser.add_argument("--joined", dest="joined_by", default="2,5",
                        help="how many sentences to a line (comma-separated)")
    parser.add_argument("--max-sentence-tokens", type=int,
                        help="cut sentences longer than this (default: the checkpoint's)")


def main() -> None:
    on_a_test_set("long_inputs", __doc__.split("\n\n")[0], run, options)


if __name__ == "__main__":
    main()
