"""Translating text with a trained model: tokenize, batch by length, search, detokenize."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from transformer_mt.checkpoint import (
    build_model,
    load_checkpoint,
    model_from_checkpoint,
    tokenizers_from_checkpoint,
)
from transformer_mt.config import Config, DecodeConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.tokenize import Tokenizer, make_tokenizer
from transformer_mt.data.vocab import BOS_ID, PAD_ID, Vocab
from transformer_mt.decode.ensemble import Ensemble
from transformer_mt.decode.search import decode_corpus, max_output_lengths
from transformer_mt.device import pick_device
from transformer_mt.errors import MTError
from transformer_mt.model.transformer import AttentionWeights, Transformer
from transformer_mt.precision import for_decoding, resolve_precision

log = logging.getLogger(__name__)


@dataclass
class Translation:
    text: str  # detokenized output
    tokens: list[str]
    # log-probability (beam search: divided by the length penalty); NaN if not asked for
    score: float
    ids: list[int] = field(default_factory=list)  # output ids, without <bos> and <eos>
    # cross-attention (T_out + 1, S) of the last decoder layer, mean over heads, if asked:
    # a row per output token and <eos>, a column per source token and <eos>
    attention: Tensor | None = None


class Translator:
    """Checkpoints with their vocabularies and decoding settings, ready to translate text.

    From Python::

        from transformer_mt import Translator
        translator = Translator.load("runs/quickstart/best.pt")
        translator.translate(["Ein Hund läuft."])              # ['A dog is running.']
        translator.translate(sentences, beam_size=5, alpha=1.0)
        translator.translate_nbest(sentences, nbest=3, attention=True)  # Translation objects

    Several checkpoints of one vocabulary translate as an ensemble (their probabilities
    averaged at every step).
    """

    def __init__(self, model: Transformer | None, config: Config, src_vocab: Vocab,
                 tgt_vocab: Vocab, device: torch.device,
                 members: list[Transformer] | None = None, engine: Any = None,
                 tokenizers: tuple[Tokenizer, Tokenizer] | None = None) -> None:
        self.model, self.config = model, config
        self.src_vocab, self.tgt_vocab, self.device = src_vocab, tgt_vocab, device
        self.tokenizers = tokenizers or (make_tokenizer(config.data, "src"),
                                         make_tokenizer(config.data, "tgt"))
        self.members = members or ([model] if model is not None else [])
        self.engine = engine  # an EngineTranslator (CTranslate2) instead of the model
        self._decoding: dict[str, torch.nn.Module] = {}  # for_decoding's copies, by precision

    @classmethod
    def load(cls, paths: str | Path | Sequence[str | Path], device: str = "auto") -> Translator:
        """A translator for one checkpoint, or an ensemble of several of one vocabulary (the
        first one's config gives the decoding settings)."""
        dev = pick_device(device)
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        first = load_checkpoint(paths[0])
        loaded = [model_from_checkpoint(first, paths[0], dev)]
        loaded += [model_from_checkpoint(load_checkpoint(p), p, dev) for p in paths[1:]]
        model, config, src_vocab, tgt_vocab = loaded[0]
        tokenizers = tokenizers_from_checkpoint(first, config, paths[0])
        for path, (_, _, src, tgt) in zip(paths[1:], loaded[1:]):
            if (src, tgt) != (src_vocab, tgt_vocab):
                raise MTError(f"'{path}' has other vocabularies than '{paths[0]}'; an ensemble "
                              "needs models trained on the same vocabularies")
        members = [m for m, *_ in loaded]
        if len(members) > 1:
            return cls(Ensemble(members), config, src_vocab, tgt_vocab, dev, members,
                       tokenizers=tokenizers)
        return cls(model, config, src_vocab, tgt_vocab, dev, tokenizers=tokenizers)

    @classmethod
    def load_engine(cls, model_dir: str | Path, device: str = "auto") -> Translator:
        """A translator whose decoding runs in CTranslate2, from ``mt export``'s directory."""
        import json

        from transformer_mt.config import config_from_dict
        from transformer_mt.export import CONFIG_NAME, EngineTranslator

        dev = pick_device(device)
        engine = EngineTranslator(model_dir, "cuda" if dev.type == "cuda" else "cpu")
        config = config_from_dict(json.loads((Path(model_dir) / CONFIG_NAME).read_text()))
        vocabs, models = [], []
        for side in ("source", "target"):
            path = Path(model_dir) / f"{side}_vocabulary.json"
            if not path.is_file():  # CTranslate2 writes one file for equal vocabularies
                path = Path(model_dir) / "shared_vocabulary.json"
            vocabs.append(Vocab(json.loads(path.read_text(encoding="utf-8"))))
            spm_path = Path(model_dir) / f"{side}.spm"
            models.append(spm_path.read_bytes() if spm_path.is_file() else None)
        tokenizers = (make_tokenizer(config.data, "src", models[0]),
                      make_tokenizer(config.data, "tgt", models[1]))
        return cls(None, config, vocabs[0], vocabs[1], dev, engine=engine, tokenizers=tokenizers)

    @classmethod
    def untrained(cls, config: Config | None = None, data_dir: str | None = None,
                  seed: int = 0) -> Translator:
        """A seeded, untrained model with vocabularies built from the config's training corpus
        (Multi30k by default), for ``mt trace``."""
        from transformer_mt.data.loader import prepare_data

        config = config or Config()
        if data_dir:
            config.data.data_dir = data_dir
        data = prepare_data(config)
        torch.manual_seed(seed)
        model = build_model(config, data.src_vocab, data.tgt_vocab).eval()
        return cls(model, config, data.src_vocab, data.tgt_vocab, torch.device("cpu"),
                   tokenizers=data.tokenizers)

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        """Tokenize and map to ids, truncating inputs longer than ``decode.max_input_tokens``."""
        limit = min(self.config.decode.max_input_tokens,
                    min(m.cfg.max_source_tokens for m in self.members) if self.members
                    else self.config.model.max_source_tokens)
        ids = []
        for n, tokens in enumerate(self.tokenizers[0].tokenize(sentences), start=1):
            if len(tokens) > limit:
                log.warning("input %d has %d tokens; only the first %d are translated "
                            "(decode.max_input_tokens)", n, len(tokens), limit)
                tokens = tokens[:limit]
            ids.append(self.src_vocab.encode(tokens))
        return ids

    def settings(self, **changes: Any) -> DecodeConfig:
        """The checkpoint's decoding settings with ``changes`` (None keeps a setting), checked."""
        changes = {k: v for k, v in changes.items() if v is not None}
        if changes.get("sample_topk"):  # sampling draws one translation: no beam
            changes.setdefault("beam_size", 1)
        try:
            cfg = dataclasses.replace(self.config.decode, **changes)
        except TypeError as exc:
            names = ", ".join(f.name for f in dataclasses.fields(DecodeConfig))
            raise MTError(f"unknown decoding setting ({exc}); the settings are: {names}") from exc
        cfg.validate()
        return cfg

    def translate(self, sentences: Sequence[str], beam_size: int | None = None,
                  progress: bool = False, **settings: Any) -> list[str]:
        """Translate raw sentences into detokenized text, one per sentence (an empty line
        gives an empty translation). ``settings`` override the checkpoint's ``decode``
        settings for this call: ``alpha``, ``max_len_a``, ``max_len_b``, ``sample_topk``,
        ``temperature``, ``sample_seed``, ``batch_size``, ``precision``."""
        return [hyps[0].text for hyps in self.translate_nbest(
            sentences, 1, beam_size, progress=progress, scores=False, **settings)]

    def translate_nbest(self, sentences: Sequence[str], nbest: int = 1,
                        beam_size: int | None = None, attention: bool = False,
                        progress: bool = False, scores: bool = True,
                        **settings: Any) -> list[list[Translation]]:
        """The ``nbest`` best translations of each sentence, best first, with their scores (and
        their cross-attention weights with ``attention=True``). ``scores=False`` spares greedy
        decoding the scores (NaN then), a tenth of its time."""
        if isinstance(sentences, str):
            raise TypeError("translate a list of sentences, e.g. translate([\"Ein Hund.\"])")
        cfg = self.settings(beam_size=beam_size, **settings)
        nonempty = [i for i, s in enumerate(sentences) if s.strip()]
        ids = self.encode([sentences[i] for i in nonempty])
        if self.engine is not None:
            return self._translate_with_engine(sentences, nonempty, ids, cfg, nbest, attention)
        # one copy for all calls (the interactive prompt translates a line at a time)
        precision = resolve_precision(cfg.precision, self.device)
        if precision not in self._decoding:
            self._decoding[precision] = for_decoding(self.model, precision, self.device)
        model = self._decoding[precision]
        hyps = decode_corpus(model, ids, cfg, self.device, cfg.beam_size, nbest,
                             progress=progress, scores=scores)
        out: list[list[Translation]] = [[Translation("", [], 0.0)] for _ in sentences]
        for i, src_ids, sentence_hyps in zip(nonempty, ids, hyps):
            out[i] = []
            for h in sentence_hyps:
                tokens = self.tgt_vocab.decode(h.tokens)
                weights = self.cross_attention(src_ids, h.tokens) if attention else None
                out[i].append(Translation(self.detokenize(tokens), tokens, h.score, h.tokens,
                                          weights))
        return out

    def _translate_with_engine(self, sentences: Sequence[str], nonempty: list[int],
                               ids: list[list[int]], cfg: DecodeConfig, nbest: int,
                               attention: bool) -> list[list[Translation]]:
        if nbest > 1 or attention or cfg.sample_topk:
            raise MTError("the CTranslate2 engine gives one translation per sentence, without "
                          "attention weights or sampling; use the PyTorch engine for those")
        sources = [[self.src_vocab.itos[i] for i in s[:-1]] for s in ids]  # without <eos>
        outputs = self.engine.translate_tokens(sources, self.output_limits(ids, cfg),
                                               cfg.beam_size, cfg.batch_size)
        out: list[list[Translation]] = [[Translation("", [], 0.0)] for _ in sentences]
        for i, tokens in zip(nonempty, outputs):
            out[i] = [Translation(self.detokenize(tokens), tokens, 0.0,
                                  self.tgt_vocab.encode(tokens, eos=False))]
        return out

    def output_limits(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig) -> list[int]:
        """The longest output (in tokens, ``<eos>`` excluded) search allows for each source."""
        if not ids:
            return []
        padded = pad_sequence([torch.tensor(s) for s in ids], batch_first=True,
                              padding_value=PAD_ID)  # (B, S)
        return max_output_lengths(source_mask(padded), cfg.max_len_a, cfg.max_len_b,
                                  self.config.model.max_output_tokens).tolist()

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Output tokens as text, the target tokenizer's way."""
        return self.tokenizers[1].detokenize(tokens)

    @torch.no_grad()
    def cross_attention(self, src_ids: Sequence[int], out_ids: Sequence[int], layer: int = -1,
                        head: int | None = None) -> Tensor:
        """Cross-attention ``(T_out + 1, S)`` of one decoder layer (one head, or the mean over
        heads) while the model reads ``out_ids`` (teacher forcing) for the source ``src_ids``."""
        if len(self.members) > 1:
            raise MTError("attention weights are those of one model; pass one checkpoint")
        model = self.members[0]
        src = torch.tensor([list(src_ids)], device=self.device)  # (1, S)
        tgt_in = torch.tensor([[BOS_ID, *out_ids]], device=self.device)  # (1, T_out + 1)
        weights = AttentionWeights()
        model(src, tgt_in, source_mask(src), attention=weights)
        cross = weights.cross[layer][0]  # (H, T_out + 1, S)
        return (cross.mean(0) if head is None else cross[head]).float().cpu()
