"""Scoring translations with sacreBLEU: BLEU (cased, 13a) and chrF on detokenized text."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sacrebleu.metrics import BLEU, CHRF

if TYPE_CHECKING:
    from transformer_mt.translate import Translator


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_text: str  # sacreBLEU's full line, with n-gram precisions and brevity penalty

    def as_dict(self) -> dict[str, float | str]:
        return {"bleu": round(self.bleu, 2), "chrf": round(self.chrf, 2),
                "bleu_signature": self.bleu_signature, "chrf_signature": self.chrf_signature}


def score(hypotheses: Sequence[str], references: Sequence[str]) -> Scores:
    """Corpus BLEU and chrF of detokenized ``hypotheses`` against raw ``references``."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(list(hypotheses), [list(references)])
    c = chrf.corpus_score(list(hypotheses), [list(references)])
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()),
                  b.format())


def lowercase_token_bleu(hypotheses: Sequence[Sequence[str]],
                         references: Sequence[Sequence[str]]) -> float:
    """BLEU on lowercased spaCy tokens, as tutorials report it (not comparable to sacreBLEU)."""
    bleu = BLEU(tokenize="none", lowercase=True, force=True)
    hyp = [" ".join(h) for h in hypotheses]
    ref = [" ".join(r) for r in references]
    return bleu.corpus_score(hyp, [ref]).score


@dataclass
class SplitResult:
    hypotheses: list[str]  # detokenized translations, in the split's order
    scores: Scores
    bleu_lowercased_tokens: float
    beam_size: int
    seconds: float  # translation time


def evaluate_split(translator: Translator, split: str, beam_size: int | None = None,
                   max_sentences: int | None = None, progress: bool = False) -> SplitResult:
    """Translate a Multi30k split (its first ``max_sentences``) and score it."""
    from transformer_mt.data.loader import read_tokenized

    src, refs, _, ref_tokens = read_tokenized(translator.config.data, split, max_sentences)
    beam = beam_size or translator.config.decode.beam_size
    start = time.perf_counter()
    results = translator.translate_nbest(src, 1, beam, progress=progress)
    seconds = time.perf_counter() - start
    hypotheses = [r[0].text for r in results]
    return SplitResult(hypotheses, score(hypotheses, refs),
                       lowercase_token_bleu([r[0].tokens for r in results], ref_tokens),
                       beam, seconds)
