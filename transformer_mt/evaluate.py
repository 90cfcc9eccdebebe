"""Scoring translations with sacreBLEU: BLEU (cased; 13a, or the target language's tokenizer)
and chrF on detokenized text."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from sacrebleu.metrics import BLEU, CHRF

from transformer_mt.errors import MTError

if TYPE_CHECKING:
    from transformer_mt.config import DecodeConfig
    from transformer_mt.translate import Translator

log = logging.getLogger(__name__)


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


# sacreBLEU's tokenizers for languages that 13a (made for spaced European text) splits badly
# sacreBLEU's tokenizer for a target language (13a for the others); Thai, Lao, Khmer and
# Burmese write words without spaces between them: their characters (13a saw one word a line)
BLEU_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab", "th": "char", "lo": "char",
                   "km": "char", "my": "char"}


@functools.lru_cache(maxsize=8)
def bleu_metric(lang: str | None, ours: bool = False) -> BLEU:
    """sacreBLEU's BLEU with the tokenizer for the target language (13a where it has none);
    where that tokenizer's package is missing, character-level ("char"), with a warning.
    ``ours``: the translations are this model's, detokenized here, so sacreBLEU's guess that
    lines ending in " ." were never detokenized (an untrained model's) is not printed."""
    name = BLEU_TOKENIZERS.get(lang or "", "13a")
    try:
        return BLEU(tokenize=name, force=ours)
    except (ImportError, RuntimeError, OSError) as exc:
        log.warning("sacreBLEU's %s tokenizer for '%s' is not available (%s); scoring with "
                    "'char' instead", name, lang, str(exc).strip().splitlines()[0])
        return BLEU(tokenize="char", force=ours)


def score(hypotheses: Sequence[str], references: Sequence[str],
          lang: str | None = None, ours: bool = False) -> Scores:
    """Corpus BLEU and chrF of detokenized ``hypotheses`` against raw ``references`` in the
    target language ``lang``; ``ours``: the hypotheses are this model's (:func:`bleu_metric`)."""
    if len(hypotheses) != len(references):
        raise MTError(f"{len(hypotheses):,} translations but {len(references):,} references; "
                      "they must be parallel line by line")
    bleu, chrf = bleu_metric(lang, ours), CHRF()
    b = bleu.corpus_score(list(hypotheses), [list(references)])
    c = chrf.corpus_score(list(hypotheses), [list(references)])
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()),
                  b.format())


@dataclass
class SplitResult:
    hypotheses: list[str]  # detokenized translations, in the corpus's order
    scores: Scores
    settings: DecodeConfig  # what decoded them
    seconds: float  # translation time


def decode_and_score(translator: Translator, references: Sequence[str],
                     sources: Sequence[str] | None = None,
                     ids: Sequence[Sequence[int]] | None = None, progress: bool = False,
                     words: Sequence[Sequence[str]] = (), **settings: Any) -> SplitResult:
    """Translate ``sources`` (text, or already ``ids``, with ``words``, the source tokens
    that ``<unk>`` copies) and score the translations against ``references``: what
    validation during training and ``mt evaluate`` both do. The references of a lowercasing
    run (``data.lowercase``) are lowercased as its output is."""
    n = len(ids) if ids is not None else len(sources or [])
    if n != len(references):
        raise MTError(f"{n:,} source lines but {len(references):,} references; "
                      "they must be parallel line by line")
    cfg = translator.settings(**settings)  # the checkpoint's, with what the caller sets
    start = time.perf_counter()
    if ids is None:
        hypotheses = translator.translate(sources or [], cfg, progress=progress)
    else:
        found = translator.translate_ids(ids, cfg, progress=progress, scores=False)
        if cfg.replace_unk and words:
            from transformer_mt.translate.unknown import copy_unknown

            found = copy_unknown(translator, words, found)
        hypotheses = [r[0].text for r in found]
    seconds = time.perf_counter() - start
    if translator.config.data.lowercase:
        references = [r.lower() for r in references]
    return SplitResult(hypotheses, score(hypotheses, references, translator.config.data.tgt_lang,
                                         ours=True), cfg, seconds)


def read_test_set(translator: Translator, name: str, max_sentences: int | None = None,
                  data_dir: str | None = None) -> tuple[list[str], list[str]]:
    """Sources and references of a named set of the checkpoint's config (``valid`` or a
    ``data.test`` name), the first ``max_sentences`` of them; Multi30k's read from
    ``data_dir`` where one is given."""
    from transformer_mt.data.prepare import corpus_of

    data = translator.config.data
    corpus = corpus_of(dataclasses.replace(data, data_dir=data_dir) if data_dir else data, name)
    sides = []
    for side in ("src", "tgt"):
        lines = corpus.lines(side)
        sides.append(list(islice(lines, max_sentences) if max_sentences else lines))
    corpus.check_parallel(len(sides[0]), len(sides[1]))
    return sides[0], sides[1]
