"""A translation ends as its source ends (``decode.end_as_source``).

A model trained on sentences that end with a full stop (nearly all of Multi30k's do) writes
one after whatever it translates: a title, a list's item, a caption without a verb, a part of
a long sentence cut after its comma (``long_sentences.py``) come back as "A dog." and "a man
in a blue shirt." (a part joined to the next: "a man in a blue shirt. and a woman"), and the
full stop goes into the markup that ends a sentence ("Ein <b>Hund</b>": "A <b>dog.</b>").

So the full stop a translation ends with is left out where its source ends with a word (a
letter or a digit in its last token, or a token the model does not know: a name, a URL), and
written as the source's mark where the source ends with a comma, a semicolon, a colon, a
question or an exclamation mark (that the target vocabulary holds, as a piece or a byte); a
source that ends otherwise (a full stop, a bracket, a quotation mark) leaves the translation as
the model wrote it. The hypothesis' tokens change (so ``--align``, ``--attention`` and the
server's cache read what is written); its score stays the model's. Of Multi30k's test2017, 207
of the 1,000 sources end without a mark and 170 of their references too: leaving the full stops
out gave +0.3 BLEU (test2016, 20 such sources: +0.01).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from transformer_mt.data.tokenize import WORD_START, Tokenizer
from transformer_mt.data.vocab import UNK_ID, Vocab
from transformer_mt.decode.constraints import Placed
from transformer_mt.decode.search import Hypothesis

if TYPE_CHECKING:
    from transformer_mt.config import DecodeConfig
    from transformer_mt.translate import Translator

H = TypeVar("H", bound=Hypothesis)

FULL_STOPS = frozenset(".。")
CARRIED = frozenset(",;:?!，；：？！")  # a source's last mark that its translation ends with too


class Endings:
    """Translations ended as their sources end, for a model of these vocabularies and
    tokenizers (a subword model's pieces read as the text they write: "▁." and "<0x2E>" are
    a full stop)."""

    def __init__(self, vocabs: tuple[Vocab, Vocab], tokenizers: tuple[Tokenizer, Tokenizer]
                 ) -> None:
        self.vocabs, self.tokenizers = vocabs, tokenizers

    def of(self, src_ids: Sequence[int], hyps: Sequence[H], forced: int = 0) -> list[H]:
        """``hyps`` (one source's, ``src_ids`` ending in ``<eos>``) each ending as the source
        ends: its final full stop left out, or written as the source's last mark; the first
        ``forced`` tokens (a prefix's) and a constraint's tokens as they are. A hypothesis
        that becomes one before it (the same tokens) is left out."""
        last = src_ids[-2] if len(src_ids) > 1 else None
        mark = "" if last is None else self._text(0, last)
        # (a token the model does not know is a word's: a name, a rare word, a URL)
        word = last == UNK_ID or any(c.isalnum() for c in mark)
        if not word and mark not in CARRIED:
            return list(hyps)
        out: list[H] = []
        for h in hyps:
            tokens = h.tokens
            end = self._text(1, tokens[-1]) if len(tokens) > max(1, forced) else ""
            held = isinstance(h, Placed) and any(stop >= len(tokens) for _, _, stop in h.spans)
            if end in FULL_STOPS and self._text(1, tokens[-2]) not in FULL_STOPS and not held:
                written = [] if word else [self._mark(tokens[-1], mark)]
                h = dataclasses.replace(h, tokens=[*tokens[:-1], *written])
            if all(h.tokens != o.tokens for o in out):
                out.append(h)
        return out

    def _text(self, side: int, token: int) -> str:
        """The text a token of the source (``side`` 0) or the output (1) writes."""
        itos = self.vocabs[side].itos
        if not 0 <= token < len(itos) or token == UNK_ID:
            return ""
        tokenizer = self.tokenizers[side]
        return tokenizer.detokenize([itos[token]]) if tokenizer.subword else itos[token]

    def _mark(self, stop: int, mark: str) -> int:
        """The output id of ``mark`` spelt as the full stop ``stop`` is (with a word-start mark
        or without, or as a byte); the full stop itself where the vocabulary lacks it."""
        vocab = self.vocabs[1]
        spelt = vocab.itos[stop].replace(vocab.itos[stop].replace(WORD_START, ""), mark)
        byte = "".join(f"<0x{b:02X}>" for b in mark.encode())
        return vocab.stoi.get(spelt, vocab.stoi.get(byte, stop))


def ended(translator: Translator, cfg: DecodeConfig, ids: Sequence[Sequence[int]],
          hyps: Sequence[Sequence[H]], forced: Sequence[int]) -> list[list[H]]:
    """Each source's (``ids``) hypotheses ended as it ends (:meth:`Endings.of`, the first
    ``forced`` tokens of each as they are), where ``cfg.end_as_source``; else as they are."""
    if not cfg.end_as_source:
        return [list(found) for found in hyps]
    ends = Endings((translator.src_vocab, translator.tgt_vocab), translator.tokenizers)
    return [ends.of(src, found, n) for src, found, n in zip(ids, hyps, forced, strict=True)]
