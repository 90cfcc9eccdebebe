"""Translating text with a trained model: tokenize, batch by length, search, detokenize."""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from transformer_mt.config import Config, DecodeConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.tokenize import detokenize, tokenize
from transformer_mt.data.vocab import PAD_ID, Vocab
from transformer_mt.decode.search import Hypothesis, translate_batch
from transformer_mt.device import pick_device, resolve_precision
from transformer_mt.model.transformer import Transformer
from transformer_mt.train.checkpoint import load_checkpoint, model_from_checkpoint

log = logging.getLogger(__name__)


def decode_corpus(model: Transformer, src_ids: Sequence[Sequence[int]], cfg: DecodeConfig,
                  device: torch.device, beam_size: int | None = None, nbest: int = 1,
                  use_cache: bool = True, progress: bool = False) -> list[list[Hypothesis]]:
    """Translate many id sequences: sorted by length into batches, results in input order."""
    beam_size = cfg.beam_size if beam_size is None else beam_size
    precision = resolve_precision(cfg.precision, device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
    if precision == "bf16":
        model = with_bf16_linears(model)
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    results: list[list[Hypothesis]] = [[] for _ in src_ids]
    bar = tqdm(total=len(order), desc="translate", unit="sent", disable=not progress,
               leave=False)
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(order), cfg.batch_size):
            chunk = order[start:start + cfg.batch_size]
            src = torch.nn.utils.rnn.pad_sequence(
                [torch.tensor(src_ids[i], dtype=torch.long) for i in chunk], batch_first=True,
                padding_value=PAD_ID).to(device)  # (B, S)
            with autocast:
                hyps = translate_batch(model, src, source_mask(src), beam_size, cfg.alpha,
                                       cfg.max_len_a, cfg.max_len_b, nbest, use_cache)
            for i, h in zip(chunk, hyps):
                results[i] = h
            bar.update(len(chunk))
    finally:
        bar.close()
        model.train(was_training)
    return results


def with_bf16_linears(model: Transformer) -> Transformer:
    """A copy of ``model`` whose linear layers hold bf16 weights, for decoding under autocast.

    Autocast computes every linear layer in bf16 anyway, but outside training it casts the fp32
    weights again at every call: a fifth of the decoding time. With the weights cast once the
    results are the same. Embeddings and LayerNorms stay fp32 (the tied output projection gets
    its own bf16 copy), so nothing else changes. A model that is already such a copy is
    returned as it is.
    """
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if all(m.weight.dtype == torch.bfloat16 for m in linears):
        return model
    clone = copy.deepcopy(model).eval()
    for module in clone.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight = torch.nn.Parameter(module.weight.detach().bfloat16(),
                                               requires_grad=False)
            if module.bias is not None:
                module.bias = torch.nn.Parameter(module.bias.detach().bfloat16(),
                                                 requires_grad=False)
    return clone


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
        from transformer_mt.model.transformer import build_model

        config = config or Config()
        if data_dir:
            config.data.data_dir = data_dir
        _, _, src_tok, tgt_tok = read_tokenized(config.data, config.data.train_split,
                                                config.data.max_pairs)
        src_vocab, tgt_vocab = build_vocabs(config.data, src_tok, tgt_tok)
        torch.manual_seed(seed)
        model = build_model(config.model, len(src_vocab), len(tgt_vocab)).eval()
        return cls(model, config, src_vocab, tgt_vocab, torch.device("cpu"))

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        """Tokenize and map to ids, truncating inputs longer than ``decode.max_input_tokens``."""
        data = self.config.data
        limit = min(self.config.decode.max_input_tokens, self.config.model.max_positions - 1)
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
