"""What turns source ids into output ids: an engine. :class:`~transformer_mt.translate.Translator`
wraps one with the text side (tokenizers and vocabularies).

- :class:`TorchEngine`: our PyTorch model(s), one checkpoint or an ensemble of several, decoded
  by ``decode/search.py`` (greedy, beam, sampling, n-best, attention weights, constraints).
- :class:`~transformer_mt.translate.exported.CTranslate2Engine` (``exported.py``): a model
  exported by ``mt export``, decoded by CTranslate2 (greedy, beam, n-best, scores).
:func:`engine_for` says which decodes a path.
Each loader returns a :class:`Loaded`: the engine, and the config, vocabularies and tokenizers
it was trained with. A new engine implements ``decode`` (and says what it cannot do there).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from tqdm.auto import tqdm

from transformer_mt.build import check_ensemble, model_from_checkpoint, tokenizers_from_checkpoint
from transformer_mt.checkpoint import load_checkpoint
from transformer_mt.config import Config, DecodeConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import BOS_ID, PAD_ID, Vocab
from transformer_mt.decode.alternatives import Alternative, alternatives
from transformer_mt.decode.compiled import CompiledDecoding, check_compilable
from transformer_mt.decode.constraints import Placed, decode_constrained
from transformer_mt.decode.ensemble import Ensemble
from transformer_mt.decode.forcing import Forcing
from transformer_mt.decode.score import score_outputs
from transformer_mt.decode.search import (
    Hypothesis,
    check_width,
    decode_corpus,
    max_output_lengths,
)
from transformer_mt.decode.state import Decodable
from transformer_mt.decode.stopping import stopping
from transformer_mt.device import pick_device
from transformer_mt.errors import ConfigError, MTError
from transformer_mt.internals import torch_private
from transformer_mt.model.transformer import AttentionWeights, Transformer
from transformer_mt.precision import autocast, for_decoding, resolve_precision
from transformer_mt.translate.processes import Workers

log = logging.getLogger(__name__)


class Engine(Protocol):
    device: torch.device
    can_inspect: bool  # attention weights, next-token candidates, beam steps

    @property
    def max_source_tokens(self) -> int:
        """The most source tokens a sentence may have (``<eos>`` not counted)."""
        ...

    def decode(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig, nbest: int = 1,
               progress: bool = False, scores: bool = True, forcing: Forcing | None = None,
               stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        """The ``nbest`` best outputs of each source (ids ending in ``<eos>``), best first;
        ``forcing``: how each must begin (``decode/forcing.py``); ``stop``, asked between
        steps where the engine can: a yes ends the decoding with ``StoppedError``
        (``decode/stopping.py``)."""
        ...

    def alternatives(self, ids: Sequence[int], forcing: Forcing, k: int,
                     cfg: DecodeConfig) -> list[Alternative]:
        """For one source, the ``k`` best tokens after its forced prefix, each completed."""
        ...

    def cross_attention(self, sources: Sequence[Sequence[int]],
                        outputs: Sequence[Sequence[int]], layer: int = -1,
                        head: int | None = None) -> list[Tensor]:
        """For each source (ids ending in ``<eos>``) and output (ids), the cross-attention
        ``(T_out + 1, S)`` of one decoder layer (one head, or the mean over heads) while the
        model reads the output (teacher forcing)."""
        ...

    def score(self, ids: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
              cfg: DecodeConfig) -> list[list[float]]:
        """Each output's per-token log-probabilities (its tokens', then ``<eos>``'s) given its
        source (ids ending in ``<eos>``)."""
        ...


@dataclass
class Loaded:
    """An engine with the config, vocabularies and tokenizers it was trained with."""
    engine: Engine
    config: Config
    src_vocab: Vocab
    tgt_vocab: Vocab
    tokenizers: tuple[Tokenizer, Tokenizer]


GPU_DECODE_BATCH = 512  # a GPU decodes far more sentences at once than decode.batch_size says


def one_hypothesis(cfg: DecodeConfig) -> DecodeConfig:
    """``cfg`` for what runs one hypothesis a sentence (scoring, a prefix's alternatives): so
    that ``--compile`` loads no beam's graph for it."""
    return dataclasses.replace(cfg, beam_size=1)


class TorchEngine:
    """Our model, or an ensemble of models of one vocabulary, on ``device``."""

    can_inspect = True

    def __init__(self, members: Sequence[Transformer], device: torch.device,
                 keep_copies: bool = True, compile: bool = False, workers: int = 1) -> None:
        self.members = list(members)
        self.model: Transformer | Ensemble = (self.members[0] if len(self.members) == 1
                                              else Ensemble(self.members))
        self.device = device
        # for_decoding's copies by precision, made once (the interactive prompt translates a
        # line at a time); not kept for a model that is still training
        self._copies: dict[str, Decodable] | None = {} if keep_copies else None
        if compile:
            check_compilable(device, len(self.members))
        # decode/compiled.py: decoding steps compiled (on a torch it was tested on)
        self.compile = compile and torch_private.compile_usable()
        if workers > 1 and device.type != "cpu":
            raise MTError(f"--workers {workers} shares the CPU's cores out between processes; "
                          f"on {device.type} one process decodes (--workers 1)")
        self.workers = workers  # processes decoding a corpus's batches (processes.py)
        self._pool: Workers | None = None

    def decode(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig, nbest: int = 1,
               progress: bool = False, scores: bool = True, forcing: Forcing | None = None,
               stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        if self.device.type == "cuda":
            cfg = dataclasses.replace(cfg, batch_size=max(cfg.batch_size, GPU_DECODE_BATCH))
        if (self.workers > 1 and forcing is None and stop is None and len(ids) > cfg.batch_size
                and self._copies is not None):
            return self._decode_shared(ids, cfg, nbest, progress, scores)
        model = self._decoding_model(cfg, len(ids))
        with stopping(model, stop):
            return decode_corpus(model, ids, cfg, self.device, cfg.beam_size, nbest,
                                 progress=progress, scores=scores, forcing=forcing)

    def _decode_shared(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig, nbest: int,
                       progress: bool, scores: bool) -> list[list[Hypothesis]]:
        """``decode``'s, the batches shared with ``workers - 1`` processes (``processes.py``),
        this one at its share of the cores meanwhile; after one failed, here alone."""
        if self._pool is None:
            self._pool = Workers(self.members, self.compile, self.workers)
        threads = torch.get_num_threads()
        torch.set_num_threads(self._pool.threads)
        try:
            model = self._decoding_model(cfg, len(ids))
            check_width(model, cfg.beam_size, nbest)
            if self._pool.broken:
                return decode_corpus(model, ids, cfg, self.device, cfg.beam_size, nbest,
                                     progress=progress, scores=scores)
            with tqdm(total=len(ids), desc="translate", unit="sent", disable=not progress,
                      leave=False) as bar:
                return self._pool.decode(ids, cfg, nbest, scores, lambda batch: decode_corpus(
                    model, batch, cfg, self.device, cfg.beam_size, nbest, scores=scores),
                                         bar.update)
        finally:
            torch.set_num_threads(threads)

    def decode_constrained(self, ids: Sequence[Sequence[int]],
                           constraints: Sequence[Sequence[Sequence[int]]], cfg: DecodeConfig,
                           nbest: int = 1, stop: Callable[[], bool] | None = None,
                           glued: frozenset[int] = frozenset(),
                           avoid: Sequence[Sequence[Sequence[int]]] | None = None,
                           ) -> list[list[Placed]]:
        """Outputs holding each source's constraints and none of its ``avoid`` sequences
        (``decode/constraints.py``), searched with the eager steps (``--compile``'s graphs
        are the plain search's)."""
        model = self._decoding_model(cfg, sentences=0)
        if isinstance(model, CompiledDecoding):
            model = model.model
        with stopping(model, stop):
            return decode_constrained(model, ids, constraints, cfg, self.device, nbest, glued,
                                      avoid)

    def alternatives(self, ids: Sequence[int], forcing: Forcing, k: int,
                     cfg: DecodeConfig) -> list[Alternative]:
        model = self._decoding_model(one_hypothesis(cfg))
        precision = resolve_precision(cfg.precision, self.device)
        src = torch.tensor([list(ids)], device=self.device)  # (1, S)
        generator = None
        if cfg.samples:
            generator = torch.Generator(self.device).manual_seed(cfg.sample_seed)
        with autocast(self.device, precision):
            return alternatives(model, src, source_mask(src), forcing, k, cfg,
                                generator=generator)

    def _decoding_model(self, cfg: DecodeConfig, sentences: int = 1) -> Decodable:
        """The model laid out for decoding at ``cfg``'s precision (made once, then kept); with
        ``compile``, its steps compiled: a lone sentence's graphs at the first call of one
        sentence (its beam's at the first lone call of a beam), a batch's at the first call of
        several or of a lone beam wider than the lone graphs take, in any order (a lone
        sentence ran the batch's 1.45x slower greedy, 1.15x beam 5: the quickstart model,
        fp32); ``sentences``: how many the call decodes (0: it runs no graph)."""
        if self._copies is None:
            return self.model
        precision = resolve_precision(cfg.precision, self.device)
        if precision not in self._copies:
            copy: Decodable = for_decoding(self.model, precision, self.device)
            if self.compile and isinstance(self.model, Transformer):
                assert isinstance(copy, Transformer)
                # compiled over nn.Linear layers (the copy's are packed for oneDNN)
                copy = CompiledDecoding(copy, for_decoding(self.model, precision,
                                                           self.device, pack=False))
            self._copies[precision] = copy
        model = self._copies[precision]
        if isinstance(model, CompiledDecoding) and sentences and not model.loaded_for(
                sentences, cfg.beam_size):
            batches = model.runs_batches(sentences, cfg.beam_size)
            model.warm_up(precision, cfg.beam_size, lone=not batches, batches=batches)
        return model

    def score(self, ids: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
              cfg: DecodeConfig) -> list[list[float]]:
        model = self._decoding_model(one_hypothesis(cfg), len(ids))
        precision = resolve_precision(cfg.precision, self.device)
        out: list[list[float]] = []
        for start in range(0, len(ids), cfg.batch_size):
            chunk = slice(start, start + cfg.batch_size)
            src = pad_sequence([torch.tensor(x, dtype=torch.long) for x in ids[chunk]],
                               batch_first=True, padding_value=PAD_ID).to(self.device)  # (B, S)
            with autocast(self.device, precision):
                out += score_outputs(model, src, source_mask(src), outputs[chunk],
                                     use_cache=True)
        return out

    @property
    def max_source_tokens(self) -> int:
        return min(m.cfg.max_source_tokens for m in self.members)

    def one_model(self, what: str) -> Transformer:
        """The model, where ``what`` reads one ("attention weights", say)."""
        if len(self.members) > 1:
            raise MTError(f"{what}: not for an ensemble ({len(self.members)} models); load "
                          "one checkpoint")
        return self.members[0]

    @torch.no_grad()
    def cross_attention(self, sources: Sequence[Sequence[int]],
                        outputs: Sequence[Sequence[int]], layer: int = -1,
                        head: int | None = None) -> list[Tensor]:
        """Cross-attention ``(T_out + 1, S)`` of one decoder layer (one head, or the mean over
        heads) while the model reads each output (teacher forcing) for its source, in batches
        of 32 (padded: padding is masked, and its rows and columns cut off). An ensemble's: the
        mean of its members' last layers' (other layers or one head: one model's alone)."""
        models = self.members if layer == -1 and head is None else [
            self.one_model("one layer's or one head's attention weights")]
        n_layers = len(models[0].decoder.layers)
        if not -n_layers <= layer < n_layers:
            raise MTError(f"--layer {layer} is out of range: the decoder has {n_layers} layers")
        if head is not None and not 0 <= head < models[0].cfg.n_heads:
            raise MTError(f"--head {head} is out of range: the model has "
                          f"{models[0].cfg.n_heads} heads")
        found: list[Tensor] = []
        for at in range(0, len(sources), 32):
            pairs = list(zip(sources[at:at + 32], outputs[at:at + 32], strict=True))
            src = _padded([list(s) for s, _ in pairs], self.device)  # (B, S)
            tgt_in = _padded([[BOS_ID, *o] for _, o in pairs], self.device)  # (B, T_out + 1)
            cross = torch.stack([_cross(m, src, tgt_in, layer, head) for m in models]).mean(0)
            found += [c[:len(o) + 1, :len(s)] for c, (s, o) in zip(cross, pairs, strict=True)]
        return found


def _cross(model: Transformer, src: Tensor, tgt_in: Tensor, layer: int,
           head: int | None) -> Tensor:
    """(B, T_out + 1, S) cross-attention of one decoder layer of ``model``, one head or the
    heads' mean, as fp32 on the CPU, while it reads ``tgt_in`` for ``src``."""
    weights, mask = AttentionWeights(), source_mask(src)
    model.decoder(tgt_in, model.encode(src, mask), mask, weights)  # (no logits needed)
    cross = weights.cross[layer]  # (B, H, T_out + 1, S)
    return (cross.mean(1) if head is None else cross[:, head]).float().cpu()


def _padded(rows: list[list[int]], device: torch.device) -> Tensor:
    """Rows of ids as one (B, longest) tensor, padded with ``<pad>``."""
    return pad_sequence([torch.tensor(r) for r in rows], batch_first=True,
                        padding_value=PAD_ID).to(device)


def load_checkpoints(paths: str | Path | Sequence[str | Path], device: str = "auto",
                     compile: bool = False, workers: int = 1) -> Loaded:
    """One checkpoint, or an ensemble of several of one vocabulary (the first one's config
    gives the decoding settings); ``compile``: lone sentences' decoding steps compiled
    (``decode/compiled.py``); ``workers``: processes decoding a corpus (``processes.py``)."""
    dev = pick_device(device)
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise ConfigError("no checkpoint to load; give a path, or a list of paths for an "
                          "ensemble")
    first = load_checkpoint(paths[0])
    loaded = [model_from_checkpoint(first, paths[0], dev)]
    loaded += [model_from_checkpoint(load_checkpoint(p), p, dev) for p in paths[1:]]
    _, config, src_vocab, tgt_vocab = loaded[0]
    tokenizers = tokenizers_from_checkpoint(first, config, paths[0])
    check_ensemble(paths, [(cfg, src, tgt) for _, cfg, src, tgt in loaded])
    return Loaded(TorchEngine([m for m, *_ in loaded], dev, compile=compile, workers=workers),
                  config,
                  src_vocab, tgt_vocab, tokenizers)


def output_limits(ids: Sequence[Sequence[int]], cfg: DecodeConfig, cap: int) -> list[int]:
    """The longest output (in tokens, ``<eos>`` excluded) search allows for each source: what
    an engine other than ours is told, so that both stop alike."""
    if not ids:
        return []
    padded = pad_sequence([torch.tensor(s) for s in ids], batch_first=True,
                          padding_value=PAD_ID)  # (B, S)
    return max_output_lengths(source_mask(padded), cfg.max_len_a, cfg.max_len_b, cap).tolist()


def note_cut(ids: Sequence[Sequence[int]], hyps: Sequence[Sequence[Hypothesis]],
             cfg: DecodeConfig, cap: int) -> None:
    """Say how many of the best translations of ``ids`` reached the output limit
    (:func:`output_limits`), where search ended them: a model repeating itself, or a limit
    too low for the languages (``mt train`` raises ``max_len_a`` to what its pairs need)."""
    limits = output_limits(ids, cfg, cap)
    cut = sum(1 for found, n in zip(hyps, limits, strict=True) if found and
              len(found[0].tokens) >= n)
    if cut:
        hint = "" if cfg.no_repeat_ngram_size else " (no_repeat_ngram_size 3 cuts its loops)"
        log.info("%d of %d translations reached the output limit (max_len_a %g x source "
                 "tokens + max_len_b %d) and end there: a model repeating itself%s, or a "
                 "limit too low for these languages", cut, len(ids), cfg.max_len_a,
                 cfg.max_len_b, hint)


ENGINES = ("auto", "torch", "ctranslate2")


def engine_for(paths: str | Path | Sequence[str | Path], engine: str = "auto") -> str:
    """The engine that decodes ``paths``: ``engine`` as given, or for ``"auto"`` CTranslate2
    where the one path is a directory holding a CTranslate2 model (``mt export``'s), our
    PyTorch model otherwise."""
    if engine not in ENGINES:
        raise MTError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    if engine != "auto":
        return engine
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    exported = [p for p in paths if (Path(p) / "model.bin").is_file()]
    if exported and len(paths) > 1:
        raise MTError(f"'{exported[0]}' is a CTranslate2 export: an ensemble decodes "
                      "checkpoints (.pt) together, and the engine decodes one export alone")
    return "ctranslate2" if exported else "torch"
