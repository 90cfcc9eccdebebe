"""Translating text with a trained model: tokenize, batch by length, search, detokenize."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from transformer_mt.checkpoint import build_model, load_checkpoint, model_from_checkpoint
from transformer_mt.config import Config
from transformer_mt.data.tokenize import detokenize, tokenize
from transformer_mt.data.vocab import Vocab
from transformer_mt.decode.search import decode_corpus, with_bf16_linears
from transformer_mt.device import pick_device, resolve_precision
from transformer_mt.model.transformer import Transformer

log = logging.getLogger(__name__)


@dataclass
class Translation:
    text: str  # detokenized output
    tokens: list[str]
    score: float


class Translator:
    """A model with its vocabularies and decoding settings, ready to translate raw sentences."""

    def __init__(self, model: Transformer, config: Config, src_vocab: Vocab, tgt_vocab: Vocab,
                 device: torch.device) -> None:
        self.model, self.config = model, config
        self.src_vocab, self.tgt_vocab, self.device = src_vocab, tgt_vocab, device
        self._bf16_model: Transformer | None = None  # made once, for bf16 decoding

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str = "auto") -> Translator:
        dev = pick_device(device)
        model, config, src_vocab, tgt_vocab = model_from_checkpoint(load_checkpoint(path), path,
                                                                    dev)
        return cls(model, config, src_vocab, tgt_vocab, dev)

    @classmethod
    def untrained(cls, config: Config | None = None, data_dir: str | None = None,
                  seed: int = 0) -> Translator:
        """A seeded, untrained model with vocabularies built from Multi30k (for ``mt trace``)."""
        from transformer_mt.data.loader import build_vocabs, read_tokenized

        config = config or Config()
        if data_dir:
            config.data.data_dir = data_dir
        _, _, src_tok, tgt_tok = read_tokenized(config.data, config.data.train_split,
                                                config.data.max_pairs)
        src_vocab, tgt_vocab = build_vocabs(config.data, src_tok, tgt_tok)
        torch.manual_seed(seed)
        model = build_model(config.model, src_vocab, tgt_vocab).eval()
        return cls(model, config, src_vocab, tgt_vocab, torch.device("cpu"))

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        """Tokenize and map to ids, truncating inputs longer than ``decode.max_input_tokens``."""
        data = self.config.data
        limit = min(self.config.decode.max_input_tokens, self.config.model.max_source_tokens)
        ids = []
        for n, tokens in enumerate(tokenize(sentences, data.src_lang, data.lowercase), start=1):
            if len(tokens) > limit:
                log.warning("input %d has %d tokens; only the first %d are translated "
                            "(decode.max_input_tokens)", n, len(tokens), limit)
                tokens = tokens[:limit]
            ids.append(self.src_vocab.encode(tokens))
        return ids

    def translate(self, sentences: Sequence[str], beam_size: int | None = None, nbest: int = 1,
                  progress: bool = False) -> list[list[Translation]]:
        """Translate raw sentences; an empty line gives an empty translation."""
        nonempty = [i for i, s in enumerate(sentences) if s.strip()]
        ids = self.encode([sentences[i] for i in nonempty])
        model = self.model
        if resolve_precision(self.config.decode.precision, self.device) == "bf16":
            # one copy for all calls (the interactive prompt translates a line at a time)
            self._bf16_model = self._bf16_model or with_bf16_linears(self.model)
            model = self._bf16_model
        hyps = decode_corpus(model, ids, self.config.decode, self.device, beam_size, nbest,
                             progress=progress)
        out: list[list[Translation]] = [[Translation("", [], 0.0)] for _ in sentences]
        lang = self.config.data.tgt_lang
        for i, sentence_hyps in zip(nonempty, hyps):
            out[i] = []
            for h in sentence_hyps:
                tokens = self.tgt_vocab.decode(h.tokens)
                out[i].append(Translation(detokenize(tokens, lang), tokens, h.score))
        return out
