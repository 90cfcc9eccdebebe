"""What turns source ids into output ids: an engine. :class:`~transformer_mt.translate.Translator`
wraps one with the text side (tokenizers and vocabularies).

- :class:`TorchEngine`: our PyTorch model(s), one checkpoint or an ensemble of several, decoded
  by ``decode/search.py`` (greedy, beam, sampling, n-best, attention weights, constraints).
- :class:`CTranslate2Engine`: a model exported by ``mt export`` (CTranslate2, OpenNMT's C++
  inference engine): greedy or beam search, one translation per sentence.
Each loader returns a :class:`Loaded`: the engine, and the config, vocabularies and tokenizers
it was trained with. A new engine implements ``decode`` (and says what it cannot do there).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from transformer_mt.build import check_ensemble, model_from_checkpoint, tokenizers_from_checkpoint
from transformer_mt.checkpoint import load_checkpoint
from transformer_mt.config import Config, DecodeConfig
from transformer_mt.config.file import config_from_dict
from transformer_mt.data.batch import source_mask
from transformer_mt.data.tokenize import Tokenizer, make_tokenizer
from transformer_mt.data.vocab import BOS, BOS_ID, EOS_ID, PAD, PAD_ID, Vocab
from transformer_mt.decode.alternatives import Alternative, alternatives
from transformer_mt.decode.compiled import CompiledDecoding, check_compilable
from transformer_mt.decode.constraints import Placed, decode_constrained
from transformer_mt.decode.ensemble import Ensemble
from transformer_mt.decode.forcing import Forcing
from transformer_mt.decode.score import score_outputs
from transformer_mt.decode.search import Hypothesis, decode_corpus, max_output_lengths
from transformer_mt.decode.state import Decodable
from transformer_mt.decode.stopping import stopping
from transformer_mt.device import pick_device
from transformer_mt.errors import ConfigError, MTError
from transformer_mt.internals import torch_private
from transformer_mt.model.transformer import AttentionWeights, Transformer
from transformer_mt.precision import autocast, for_decoding, resolve_precision


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

    def cross_attention(self, src_ids: Sequence[int], out_ids: Sequence[int], layer: int = -1,
                        head: int | None = None) -> Tensor:
        """Cross-attention ``(T_out + 1, S)`` of one decoder layer (one head, or the mean over
        heads) while the model reads ``out_ids`` (teacher forcing) for the source
        ``src_ids``."""
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

class TorchEngine:
    """Our model, or an ensemble of models of one vocabulary, on ``device``."""

    can_inspect = True

    def __init__(self, members: Sequence[Transformer], device: torch.device,
                 keep_copies: bool = True, compile: bool = False) -> None:
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

    def decode(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig, nbest: int = 1,
               progress: bool = False, scores: bool = True, forcing: Forcing | None = None,
               stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        if self.device.type == "cuda":
            cfg = dataclasses.replace(cfg, batch_size=max(cfg.batch_size, GPU_DECODE_BATCH))
        model = self._decoding_model(cfg, len(ids))
        with stopping(model, stop):
            return decode_corpus(model, ids, cfg, self.device, cfg.beam_size, nbest,
                                 progress=progress, scores=scores, forcing=forcing)

    def decode_constrained(self, ids: Sequence[Sequence[int]],
                           constraints: Sequence[Sequence[Sequence[int]]], cfg: DecodeConfig,
                           nbest: int = 1, stop: Callable[[], bool] | None = None,
                           glued: frozenset[int] = frozenset()) -> list[list[Placed]]:
        """Outputs holding each source's constraints (``decode/constraints.py``), searched
        with the eager steps (``--compile``'s graphs are the plain search's)."""
        model = self._decoding_model(cfg)
        if isinstance(model, CompiledDecoding):
            model = model.model
        with stopping(model, stop):
            return decode_constrained(model, ids, constraints, cfg, self.device, nbest, glued)

    def alternatives(self, ids: Sequence[int], forcing: Forcing, k: int,
                     cfg: DecodeConfig) -> list[Alternative]:
        model, precision = self._decoding_model(cfg), resolve_precision(cfg.precision,
                                                                        self.device)
        src = torch.tensor([list(ids)], device=self.device)  # (1, S)
        generator = None
        if cfg.samples:
            generator = torch.Generator(self.device).manual_seed(cfg.sample_seed)
        with autocast(self.device, precision):
            return alternatives(model, src, source_mask(src), forcing, k, cfg,
                                generator=generator)

    def _decoding_model(self, cfg: DecodeConfig, sentences: int = 1) -> Decodable:
        """The model laid out for decoding at ``cfg``'s precision (made once, then kept); with
        ``compile``, its steps compiled: a lone sentence's graphs at a first call of one
        sentence, a batch's at the first call of several (a lone sentence runs it too)."""
        if self._copies is None:
            return self.model
        precision = resolve_precision(cfg.precision, self.device)
        if precision not in self._copies:
            copy = for_decoding(self.model, precision, self.device)
            if self.compile and isinstance(self.model, Transformer):
                assert isinstance(copy, Transformer)
                # fp32: the model's own nn.Linear layers (the copy's are packed for oneDNN)
                compiled = CompiledDecoding(copy, self.model if precision == "fp32" else copy)
                compiled.warm_up(precision, cfg.beam_size, lone=sentences == 1,
                                 batches=sentences > 1)
                self._copies[precision] = compiled
            else:
                self._copies[precision] = copy
        model = self._copies[precision]
        if isinstance(model, CompiledDecoding) and sentences > 1 and not model.batches:
            model.warm_up(precision, lone=False, batches=True)
        return model

    def score(self, ids: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
              cfg: DecodeConfig) -> list[list[float]]:
        model, precision = self._decoding_model(cfg), resolve_precision(cfg.precision,
                                                                        self.device)
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
    def cross_attention(self, src_ids: Sequence[int], out_ids: Sequence[int], layer: int = -1,
                        head: int | None = None) -> Tensor:
        """Cross-attention ``(T_out + 1, S)`` of one decoder layer (one head, or the mean over
        heads) while the model reads ``out_ids`` (teacher forcing) for the source ``src_ids``."""
        model = self.one_model("attention weights")
        n_layers = len(model.decoder.layers)
        if not -n_layers <= layer < n_layers:
            raise MTError(f"--layer {layer} is out of range: the decoder has {n_layers} layers")
        if head is not None and not 0 <= head < model.cfg.n_heads:
            raise MTError(f"--head {head} is out of range: the model has {model.cfg.n_heads} "
                          "heads")
        src = torch.tensor([list(src_ids)], device=self.device)  # (1, S)
        tgt_in = torch.tensor([[BOS_ID, *out_ids]], device=self.device)  # (1, T_out + 1)
        weights = AttentionWeights()
        model(src, tgt_in, source_mask(src), attention=weights)
        cross = weights.cross[layer][0]  # (H, T_out + 1, S)
        return (cross.mean(0) if head is None else cross[head]).float().cpu()


def load_checkpoints(paths: str | Path | Sequence[str | Path], device: str = "auto",
                     compile: bool = False) -> Loaded:
    """One checkpoint, or an ensemble of several of one vocabulary (the first one's config
    gives the decoding settings); ``compile``: lone sentences' decoding steps compiled
    (``decode/compiled.py``)."""
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
    return Loaded(TorchEngine([m for m, *_ in loaded], dev, compile=compile), config,
                  src_vocab, tgt_vocab, tokenizers)


def output_limits(ids: Sequence[Sequence[int]], cfg: DecodeConfig, cap: int) -> list[int]:
    """The longest output (in tokens, ``<eos>`` excluded) search allows for each source: what
    an engine other than ours is told, so that both stop alike."""
    if not ids:
        return []
    padded = pad_sequence([torch.tensor(s) for s in ids], batch_first=True,
                          padding_value=PAD_ID)  # (B, S)
    return max_output_lengths(source_mask(padded), cfg.max_len_a, cfg.max_len_b, cap).tolist()


# as in our search (decode/search.py: _allowed); exports bar them in their projection's bias
# too, but those of earlier versions do not
NEVER_PRODUCED = [[PAD], [BOS]]


class CTranslate2Engine:
    """A model exported by ``mt export``, decoding in CTranslate2 as our decoder batches:
    sorted by source length, ``batch_size`` a batch, no output longer than search allows; in
    the export's own type by default (``mt export --quantization int8`` decodes in int8: at
    ``"float32"``, the engine widens its weights as it loads them), with ``threads`` OpenMP
    threads, by default as many as torch's in this process (all the cores, ``OMP_NUM_THREADS``,
    or a server worker's share of them), not its own default (as many as the cores, in each
    process: ``mt serve --workers 2`` ran 2 x 2 on 2 cores)."""

    can_inspect = False

    CANNOT = ("the CTranslate2 engine gives one translation per sentence, without attention "
              "weights or sampling; use the PyTorch engine for those")

    def __init__(self, model_dir: str | Path, config: Config, src_vocab: Vocab,
                 tgt_vocab: Vocab, device: torch.device, compute_type: str = "default",
                 threads: int = 0) -> None:
        ct2 = _check_exported(model_dir)
        self.device = device
        self.config, self.src_vocab, self.tgt_vocab = config, src_vocab, tgt_vocab
        self.translator = ct2.Translator(str(model_dir), device="cuda" if device.type == "cuda"
                                         else "cpu", compute_type=compute_type,
                                         intra_threads=threads or torch.get_num_threads())

    def decode(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig, nbest: int = 1,
               progress: bool = False, scores: bool = True, forcing: Forcing | None = None,
               stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        """(``stop`` is not asked: CTranslate2 decodes a batch in one call.)"""
        if nbest > 1 or cfg.samples:
            raise MTError(self.CANNOT)
        sources = [[self.src_vocab.itos[i] for i in s[:-1]] for s in ids]  # without <eos>
        limits = output_limits(ids, cfg, self.config.model.max_output_tokens)
        prefixes = None if forcing is None else self._prefixes(forcing)
        if prefixes is not None:
            limits = [max(n, len(p)) for n, p in zip(limits, prefixes, strict=True)]
        outputs = self.translate_tokens(sources, limits, cfg.beam_size, cfg.batch_size,
                                        prefixes, cfg.alpha)
        return [[Hypothesis(self.tgt_vocab.encode(tokens, eos=False), math.nan)]  # no score
                for tokens in outputs]

    def alternatives(self, ids: Sequence[int], forcing: Forcing, k: int,
                     cfg: DecodeConfig) -> list[Alternative]:
        """CTranslate2's own ``return_alternatives``: the tokens at the position, each
        completed by its search (greedy: as ours, ``tests/integration/test_interactive.py``; its
        beam search, with our length penalty, stops when its best hypothesis ends where ours
        waits for ``beam_size`` finished ones, and may differ)."""
        if cfg.samples:
            raise MTError(self.CANNOT)
        prefix = self._prefixes(forcing)[0]
        limit = max(output_limits([ids], cfg, self.config.model.max_output_tokens)[0],
                    len(prefix) + 1)
        result = self.translator.translate_batch(
            [[self.src_vocab.itos[i] for i in ids[:-1]]], target_prefix=[prefix],
            beam_size=cfg.beam_size, length_penalty=cfg.alpha, num_hypotheses=k,
            return_alternatives=True,
            return_scores=False, max_decoding_length=limit + 1, min_decoding_length=0,
            suppress_sequences=NEVER_PRODUCED)[0]
        found = []
        for tokens in result.hypotheses:
            out = self.tgt_vocab.encode(tokens[:limit], eos=False)
            token = out[len(prefix)] if len(out) > len(prefix) else EOS_ID  # it ends there
            found.append(Alternative(token, math.nan, Hypothesis(out, math.nan)))
        return found

    def _prefixes(self, forcing: Forcing) -> list[list[str]]:
        """The forced tokens as CTranslate2's target prefixes; it cannot finish a word."""
        if any(then is not None for then in forcing.then):
            raise MTError("the CTranslate2 engine continues whole words: end the prefix with "
                          "a space, or use the PyTorch engine")
        return [[self.tgt_vocab.itos[i] for i in tokens] for tokens in forcing.tokens]

    @property
    def max_source_tokens(self) -> int:
        return self.config.model.max_source_tokens

    def cross_attention(self, src_ids: Sequence[int], out_ids: Sequence[int], layer: int = -1,
                        head: int | None = None) -> Tensor:
        raise MTError(self.CANNOT)

    def score(self, ids: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
              cfg: DecodeConfig) -> list[list[float]]:
        return self.score_tokens([[self.src_vocab.itos[i] for i in x[:-1]] for x in ids],
                                 [[self.tgt_vocab.itos[i] for i in o] for o in outputs])

    def translate_tokens(self, sources: Sequence[Sequence[str]], limits: Sequence[int],
                         beam_size: int = 1, batch_size: int = 32,
                         prefixes: Sequence[Sequence[str]] | None = None,
                         alpha: float = 0.0) -> list[list[str]]:
        """Output tokens (without ``<eos>``) of each source token list (without ``<eos>``), at
        most ``limits[i]`` of them, each beginning with its ``prefixes[i]`` if given; a beam
        ranks finished hypotheses by log-probability over the GNMT length penalty with
        ``alpha``, as ours (CTranslate2's ``length_penalty``; its own default is 1)."""
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        outputs: list[list[str]] = [[] for _ in sources]
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            results = self.translator.translate_batch(
                [list(sources[i]) for i in chunk],
                target_prefix=None if prefixes is None else [list(prefixes[i]) for i in chunk],
                beam_size=beam_size, length_penalty=alpha,
                max_decoding_length=max(limits[i] for i in chunk) + 1, return_scores=False,
                min_decoding_length=0,  # as ours, <eos> may come first (its default: 1)
                suppress_sequences=NEVER_PRODUCED)
            for i, result in zip(chunk, results, strict=True):
                outputs[i] = result.hypotheses[0][:limits[i]]
        return outputs

    def score_tokens(self, sources: Sequence[Sequence[str]],
                     targets: Sequence[Sequence[str]]) -> list[list[float]]:
        """Per-token log-probabilities of each target (and its ``<eos>``) given its source."""
        results = self.translator.score_batch([list(s) for s in sources],
                                              [list(t) for t in targets])
        return [list(r.log_probs) for r in results]


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


def _check_exported(model_dir: str | Path) -> Any:
    """The ctranslate2 module, once ``model_dir`` is known to hold an exported model."""
    from transformer_mt.formats.ctranslate2 import require_ctranslate2

    ct2 = require_ctranslate2()
    if not (Path(model_dir) / "model.bin").is_file():
        raise MTError(f"'{model_dir}' holds no CTranslate2 model; make one with "
                      "mt export --format ctranslate2 CKPT DIR")
    return ct2


def load_exported(model_dir: str | Path, device: str = "auto", compute_type: str = "default",
                  threads: int = 0) -> Loaded:
    """``mt export``'s directory: the CTranslate2 model with our config, vocabularies and
    SentencePiece models beside it."""
    from transformer_mt.formats.ctranslate2 import CONFIG_NAME

    model_dir = Path(model_dir)
    dev = pick_device(device)
    _check_exported(model_dir)
    try:
        config = config_from_dict(json.loads((model_dir / CONFIG_NAME).read_text()))
        vocabs, models = [], []
        for side in ("source", "target"):
            path = model_dir / f"{side}_vocabulary.json"
            if not path.is_file():  # CTranslate2 writes one file for equal vocabularies
                path = model_dir / "shared_vocabulary.json"
            vocabs.append(Vocab(json.loads(path.read_text(encoding="utf-8"))))
            spm_path = model_dir / f"{side}.spm"
            models.append(spm_path.read_bytes() if spm_path.is_file() else None)
        tokenizers = (make_tokenizer(config.data, "src", models[0]),
                      make_tokenizer(config.data, "tgt", models[1]))
        engine = CTranslate2Engine(model_dir, config, vocabs[0], vocabs[1], dev, compute_type,
                                   threads)
    except (OSError, ValueError, RuntimeError, TypeError, MTError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MTError(f"'{model_dir}' is not a complete export ({reason}); export the "
                      "checkpoint again with mt export") from exc
    return Loaded(engine, config, vocabs[0], vocabs[1], tokenizers)
