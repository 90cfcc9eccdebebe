"""A model exported by ``mt export`` (``formats/ctranslate2.py``), decoded by CTranslate2,
OpenNMT's C++ inference engine, as our search decodes: the same batches, length limits, length
penalty, n-best and scores (``tests/integration/test_export.py``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import Tensor

from transformer_mt.config import Config, DecodeConfig
from transformer_mt.config.file import config_from_dict
from transformer_mt.data.tokenize import make_tokenizer
from transformer_mt.data.vocab import BOS, EOS_ID, PAD, SPECIALS, Vocab
from transformer_mt.decode.alternatives import Alternative
from transformer_mt.decode.forcing import Forcing
from transformer_mt.decode.search import Hypothesis, length_penalty
from transformer_mt.device import pick_device, threads_per_process
from transformer_mt.errors import MTError
from transformer_mt.translate.engines import Loaded, output_limits

# as in our search (decode/search.py: _allowed); exports bar them in their projection's bias
# too, but those of earlier versions do not
NEVER_PRODUCED = [[PAD], [BOS]]
PROBE_TOKENS = 12  # the length of the probe's sentences and outputs (CTranslate2Engine._probe)
log = logging.getLogger(__name__)
T = TypeVar("T")
E = TypeVar("E")


class CTranslate2Engine:
    """A model exported by ``mt export``, decoding in CTranslate2 as our decoder batches:
    sorted by source length, ``batch_size`` a batch, no output longer than search allows; in
    the export's own type by default (``mt export --quantization int8`` decodes in int8: at
    ``"float32"``, the engine widens its weights as it loads them), with ``threads`` OpenMP
    threads, by default as many as torch's in this process (``OMP_NUM_THREADS``, or a server
    worker's share of the cores), not its own default (as many as the cores, in each process:
    ``mt serve --workers 2`` ran 2 x 2 on 2 cores). Where nothing says how many: all the cores
    on a batch, or one thread a batch with as many batches at once as cores, whichever decodes
    a probe faster (:func:`fastest`)."""

    can_inspect = False

    CANNOT = ("the CTranslate2 engine does not sample (--sample-topk, --top-p); use the "
              "PyTorch engine for that")

    def __init__(self, model_dir: str | Path, config: Config, src_vocab: Vocab,
                 tgt_vocab: Vocab, device: torch.device, compute_type: str = "default",
                 threads: int = 0, workers: int = 1) -> None:
        ct2 = _check_exported(model_dir)
        self.device = device
        self.config, self.src_vocab, self.tgt_vocab = config, src_vocab, tgt_vocab

        def make(way: tuple[int, int]) -> Any:  # (threads a batch, batches at once)
            torch_threads = torch.get_num_threads()
            try:
                return ct2.Translator(str(model_dir), device="cuda" if device.type == "cuda"
                                      else "cpu", compute_type=compute_type,
                                      intra_threads=way[0], inter_threads=way[1])
            finally:  # it sets this thread's OpenMP threads, and so torch's, to its own count
                if torch.get_num_threads() != torch_threads:
                    torch.set_num_threads(torch_threads)

        cores = threads_per_process(workers) if workers > 1 else torch.get_num_threads()
        ways = [(threads or cores, workers)]
        if device.type == "cpu" and not threads and workers == 1 and cores > 1 and (
                "OMP_NUM_THREADS" not in os.environ):  # nothing says: one thread a batch too
            ways.append((1, cores))
        (self.threads, self.at_once), self.translator = fastest(ways, make, self._probe, named)

    def _probe(self, translator: Any) -> float:
        """Seconds to decode a probe greedily (best of 2, after a first): 4 sentences of
        the source vocabulary's first words, each output ``PROBE_TOKENS`` tokens long."""
        words = [w for w in self.src_vocab.itos[:64] if w not in SPECIALS][:PROBE_TOKENS]
        batch = [words[k:] + words[:k] for k in range(4)]
        times = []
        for _ in range(3):
            start = time.perf_counter()
            translator.translate_batch(batch, beam_size=1, max_decoding_length=PROBE_TOKENS,
                                       min_decoding_length=PROBE_TOKENS)
            times.append(time.perf_counter() - start)
        return min(times[1:])

    def decode(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig, nbest: int = 1,
               progress: bool = False, scores: bool = True, forcing: Forcing | None = None,
               stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        """(``stop`` is not asked: CTranslate2 decodes a batch in one call.)"""
        if cfg.samples:
            raise MTError(self.CANNOT)
        sources = [[self.src_vocab.itos[i] for i in s[:-1]] for s in ids]  # without <eos>
        limits = output_limits(ids, cfg, self.config.model.max_output_tokens)
        prefixes = None if forcing is None else self._prefixes(forcing)
        if prefixes is not None:
            limits = [max(n, len(p)) for n, p in zip(limits, prefixes, strict=True)]
        found = self.search(sources, limits, cfg.beam_size, cfg.batch_size, prefixes, cfg.alpha,
                            nbest, cfg.no_repeat_ngram_size)
        return [[Hypothesis(self.tgt_vocab.encode(tokens, eos=False), score)
                 for tokens, score in hyps] for hyps in found]

    def alternatives(self, ids: Sequence[int], forcing: Forcing, k: int,
                     cfg: DecodeConfig) -> list[Alternative]:
        """CTranslate2's own ``return_alternatives``: the tokens at the position, each
        completed by its search and scored as ours (``score_batch``). Greedy completions are
        ours (``tests/integration/test_interactive.py``); its beam search, with our length
        penalty, stops when its best hypothesis ends where ours waits for ``beam_size``
        finished ones, and may differ."""
        if cfg.samples:
            raise MTError(self.CANNOT)
        prefix = self._prefixes(forcing)[0]
        limit = max(output_limits([ids], cfg, self.config.model.max_output_tokens)[0],
                    len(prefix) + 1)
        result = self.translator.translate_batch(
            [[self.src_vocab.itos[i] for i in ids[:-1]]], target_prefix=[prefix],
            beam_size=cfg.beam_size, length_penalty=cfg.alpha, num_hypotheses=k,
            return_alternatives=True, no_repeat_ngram_size=cfg.no_repeat_ngram_size,
            return_scores=False, max_decoding_length=limit + 1, min_decoding_length=0,
            suppress_sequences=NEVER_PRODUCED)[0]
        outputs = [tokens[:limit] for tokens in result.hypotheses]
        source = [self.src_vocab.itos[i] for i in ids[:-1]]
        found = []  # each scored as ours: its token's log-probability there, its search's score
        for tokens, cut, lp in zip(outputs, result.hypotheses, self.score_tokens(
                [source] * len(outputs), outputs), strict=True):
            out = self.tgt_vocab.encode(tokens, eos=False)
            token = out[len(prefix)] if len(out) > len(prefix) else EOS_ID  # it ends there
            total = sum(lp[:-1]) if len(cut) > limit else sum(lp)  # cut: <eos> forced, p 1
            found.append(Alternative(token, lp[len(prefix)], Hypothesis(
                out, _our_score(total, len(out) + 1, cfg.alpha, cfg.beam_size))))
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

    def cross_attention(self, sources: Sequence[Sequence[int]],
                        outputs: Sequence[Sequence[int]], layer: int = -1,
                        head: int | None = None) -> list[Tensor]:
        """The last decoder layer's cross-attention, its heads averaged (what ``mt export``
        makes CTranslate2 return: its alignment heads), as ours: ``(T_out + 1, S)`` with the
        ``<eos>`` row and column, which CTranslate2 leaves out, zero. Other layers or one head:
        a one-line error."""
        n_layers = self.config.model.n_decoder_layers
        if layer not in (-1, n_layers - 1) or head is not None:
            raise MTError("a CTranslate2 export gives its last layer's attention, the heads "
                          "averaged, alone: for other layers or heads use the PyTorch engine")
        results = self.translator.translate_batch(
            [[self.src_vocab.itos[i] for i in s[:-1]] for s in sources],
            target_prefix=[[self.tgt_vocab.itos[i] for i in o] for o in outputs],
            beam_size=1, return_attention=True, max_batch_size=512, min_decoding_length=0,
            max_decoding_length=max((len(o) for o in outputs), default=0) + 1)
        found = []
        for result, src, out in zip(results, sources, outputs, strict=True):
            weights = torch.zeros(len(out) + 1, len(src))
            read = torch.tensor(result.attention[0], dtype=torch.float32)[:len(out)]
            weights[:read.size(0), :read.size(1)] = read[:, :len(src) - 1]
            found.append(weights)
        return found

    def score(self, ids: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
              cfg: DecodeConfig) -> list[list[float]]:
        return self.score_tokens([[self.src_vocab.itos[i] for i in x[:-1]] for x in ids],
                                 [[self.tgt_vocab.itos[i] for i in o] for o in outputs])

    def translate_tokens(self, sources: Sequence[Sequence[str]], limits: Sequence[int],
                         beam_size: int = 1, batch_size: int = 32,
                         prefixes: Sequence[Sequence[str]] | None = None,
                         alpha: float = 0.0) -> list[list[str]]:
        """Output tokens (without ``<eos>``) of each source token list (without ``<eos>``):
        the best of :meth:`search`."""
        return [hyps[0][0] for hyps in self.search(sources, limits, beam_size, batch_size,
                                                   prefixes, alpha)]

    def search(self, sources: Sequence[Sequence[str]], limits: Sequence[int],
               beam_size: int = 1, batch_size: int = 32,
               prefixes: Sequence[Sequence[str]] | None = None, alpha: float = 0.0,
               nbest: int = 1, no_repeat: int = 0) -> list[list[tuple[list[str], float]]]:
        """The ``nbest`` best outputs (at most ``beam_size``; tokens without ``<eos>``) of each
        source token list (without ``<eos>``), at most ``limits[i]`` tokens each, each beginning
        with its ``prefixes[i]`` if given, best first, with their scores as ours: the
        log-probability, over the GNMT length penalty ``((5 + length) / 6) ** alpha`` in a
        beam. CTranslate2 ranks a beam's finished hypotheses by log-probability over
        ``length ** alpha`` and stops when its best one has ended; asked for all ``beam_size``
        of them, it searches on until that many have ended, as ours does, and they are ranked
        here as ours ranks them (test_2016_flickr, beam 5: 2-11 of 1,000 translations then
        differ from ours at alpha 0.6-1.6, against 45-202 taking its own best).
        ``no_repeat``: its ``no_repeat_ngram_size``, ours (``decode/repeats.py``)."""
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        # all batches asked for at once: with --workers N (or where the probe chose it), N
        # decode side by side
        chunks = dealt(order, batch_size, self.at_once)
        pending = [self.translator.translate_batch(
            [list(sources[i]) for i in chunk],
            target_prefix=None if prefixes is None else [list(prefixes[i]) for i in chunk],
            beam_size=beam_size, length_penalty=alpha, num_hypotheses=beam_size,
            no_repeat_ngram_size=no_repeat, return_scores=True,
            max_decoding_length=max(limits[i] for i in chunk) + 1,
            min_decoding_length=0,  # as ours, <eos> may come first (its default: 1)
            suppress_sequences=NEVER_PRODUCED, asynchronous=True) for chunk in chunks]
        found: list[list[tuple[list[str], float]]] = [[] for _ in sources]
        for chunk, results in zip(chunks, pending, strict=True):
            for i, waiting in zip(chunk, results, strict=True):
                result = waiting.result()
                # its score: the log-probability over length ** alpha
                found[i] = [(tokens, _our_score(score * (len(tokens) + 1) ** alpha,
                                                len(tokens) + 1, alpha, beam_size))
                            for tokens, score in zip(result.hypotheses, result.scores,
                                                     strict=True)]
        self._cut_to_limits(sources, limits, found, alpha, beam_size)
        return [sorted(hyps, key=lambda h: -h[1])[:nbest] for hyps in found]

    def _cut_to_limits(self, sources: Sequence[Sequence[str]], limits: Sequence[int],
                       found: list[list[tuple[list[str], float]]], alpha: float,
                       beam_size: int) -> None:
        """Outputs past their sentence's limit (a batch shares the longest one) cut there and
        scored as ours, which ends them there with ``<eos>``, the only token it may then
        produce (log-probability 0); rare: a limit is 1.5 times the source and 10 more."""
        long = [(i, n) for i, hyps in enumerate(found) for n, (tokens, _) in enumerate(hyps)
                if len(tokens) > limits[i]]
        if not long:
            return
        cut = [found[i][n][0][:limits[i]] for i, n in long]
        log_probs = self.score_tokens([sources[i] for i, _ in long], cut)
        for (i, n), tokens, lp in zip(long, cut, log_probs, strict=True):
            found[i][n] = (tokens, _our_score(sum(lp[:-1]), len(tokens) + 1, alpha, beam_size))

    def score_tokens(self, sources: Sequence[Sequence[str]],
                     targets: Sequence[Sequence[str]]) -> list[list[float]]:
        """Per-token log-probabilities of each target (and its ``<eos>``) given its source."""
        results = self.translator.score_batch([list(s) for s in sources],
                                              [list(t) for t in targets])
        return [list(r.log_probs) for r in results]


def dealt(order: list[int], batch_size: int, at_once: int) -> list[list[int]]:
    """``order`` (sources sorted by length) in batches of at most ``batch_size``, and no
    fewer than the engine decodes ``at_once`` where there are enough: each span of
    ``batch_size * at_once`` dealt out in turn, so that batches decoded side by side hold
    lengths alike and end together (a server's batch of 32 where it runs two: two of 16)."""
    size = max(min(batch_size, -(-len(order) // at_once)), 1)
    spans = [order[start:start + size * at_once] for start in range(0, len(order),
                                                                     size * at_once)]
    return [span[k::at_once] for span in spans for k in range(at_once) if span[k::at_once]]


def fastest(ways: Sequence[T], make: Callable[[T], E], timed: Callable[[E], float],
            named: Callable[[T], str] = str, margin: float = 1.25) -> tuple[T, E]:
    """Of ``ways`` to run the engine (``make(way)``; here its threads a batch and its batches
    at once), the one that decodes a probe fastest (``timed``; none timed where there is one),
    with its engine: the first unless another is ``margin`` times faster, each made only once
    the last is timed (one more engine in memory at a time). CTranslate2's OpenMP on 2 threads
    has decoded 4-6x slower than on 1 (an Intel Xeon VM with its MKL in float32, int8 on AMD
    and Intel VMs alike), where on others 2 run 1.2-2x faster (docs/export.md, "Threads")."""
    best, engine = ways[0], make(ways[0])
    if len(ways) == 1:
        return best, engine
    first_time = best_time = timed(engine)
    for way in ways[1:]:
        other = make(way)
        other_time = timed(other)
        if other_time * margin < best_time:
            best, engine, best_time = way, other, other_time
        del other
    if best != ways[0]:
        log.debug("CTranslate2 decodes with %s here: with %s it ran a probe %.1fx slower",
                  named(best), named(ways[0]), first_time / best_time)
    return best, engine


def named(way: tuple[int, int]) -> str:
    """(threads a batch, batches at once) in words."""
    threads, batches = way
    return (f"{threads} thread{'s' if threads > 1 else ''} a batch"
            + (f", {batches} batches at once" if batches > 1 else ""))


def _our_score(log_prob: float, length: int, alpha: float, beam_size: int) -> float:
    """The score ours gives an output of ``length`` tokens (``<eos>`` included): in a beam the
    log-probability over the GNMT penalty, in greedy search the log-probability."""
    return log_prob if beam_size == 1 else log_prob / float(length_penalty(length, alpha))


def _check_exported(model_dir: str | Path) -> Any:
    """The ctranslate2 module, once ``model_dir`` is known to hold an exported model."""
    from transformer_mt.formats.ctranslate2 import require_ctranslate2

    ct2 = require_ctranslate2()
    if not (Path(model_dir) / "model.bin").is_file():
        raise MTError(f"'{model_dir}' holds no CTranslate2 model; make one with "
                      "mt export --format ctranslate2 CKPT DIR")
    return ct2


def load_exported(model_dir: str | Path, device: str = "auto", compute_type: str = "default",
                  threads: int = 0, workers: int = 1) -> Loaded:
    """``mt export``'s directory: the CTranslate2 model with our config, vocabularies and
    SentencePiece models beside it; ``workers``: batches decoded side by side (its
    ``inter_threads``), each with its share of the cores unless ``threads`` says."""
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
                                   threads, workers)
    except (OSError, ValueError, RuntimeError, TypeError, MTError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MTError(f"'{model_dir}' is not a complete export ({reason}); export the "
                      "checkpoint again with mt export") from exc
    return Loaded(engine, config, vocabs[0], vocabs[1], tokenizers)
