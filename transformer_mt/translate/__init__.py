"""Translating text: tokenize, map to ids, decode with an engine, map back, detokenize.

The text side lives here; what turns ids into ids is an engine (``engines.py``): our PyTorch
model(s), or CTranslate2 after ``mt export``.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from transformer_mt.config import Config, DecodeConfig, field_types
from transformer_mt.config.file import coerce
from transformer_mt.data.tokenize import Tokenizer, make_tokenizer
from transformer_mt.data.vocab import EOS, UNK_ID, Vocab
from transformer_mt.decode.align import token_links, word_links
from transformer_mt.decode.constraints import Placed
from transformer_mt.decode.forcing import Forcing
from transformer_mt.decode.search import Hypothesis
from transformer_mt.errors import ConfigError, MTError
from transformer_mt.translate.casing import as_read, as_shouted, shouts
from transformer_mt.translate.documents import FORMS, Document, TextForm, split_document
from transformer_mt.translate.endings import ended
from transformer_mt.translate.engines import (
    Engine,
    Loaded,
    TorchEngine,
    engine_for,
    load_checkpoints,
    note_cut,
)
from transformer_mt.translate.exported import CTranslate2Engine, load_exported
from transformer_mt.translate.glossary import Glossary, asked, decode_required, holding, steered
from transformer_mt.translate.long_sentences import translate_documents
from transformer_mt.translate.memory import Memory, held_whole
from transformer_mt.translate.nbest import different as nbest_different
from transformer_mt.translate.prefix import Prefixes, forcing_of
from transformer_mt.translate.results import (
    Choice,
    InputTooLongError,
    Required,
    Scored,
    Translation,
)
from transformer_mt.translate.unknown import copy_unknown, shown, unwritable

if TYPE_CHECKING:
    from transformer_mt.decode.ensemble import Ensemble
    from transformer_mt.model.transformer import Transformer

log = logging.getLogger(__name__)
Form = typing.Literal["sentences", TextForm]  # what each text is


class Translator:
    """An engine with the vocabularies, tokenizers and decoding settings it was trained with,
    ready to translate text.

    From Python::

        from transformer_mt import Translator
        translator = Translator.load("runs/quickstart/best.pt")
        translator.translate(["Ein Hund läuft."])              # ['A dog is running.']
        translator.translate(sentences, beam_size=5, alpha=1.0)
        translator.translate(sentences, nbest=3, attention=True)  # Translation objects
        translator.translate(["Ein Mann. Zwei Hunde.\nEine Frau."], form="text")  # paragraphs

    Several checkpoints of one vocabulary translate as an ensemble (their probabilities
    averaged at every step); ``mt export``'s directory loads with CTranslate2 instead.
    """

    def __init__(self, engine: Engine, config: Config, src_vocab: Vocab, tgt_vocab: Vocab,
                 tokenizers: tuple[Tokenizer, Tokenizer] | None = None,
                 glossary: Glossary | None = None, memory: Memory | None = None) -> None:
        self.engine, self.config = engine, config
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.glossary = glossary  # what a call that gives none holds to
        self.memory = memory  # sentences translated as it holds them (memory.py)
        self.tokenizers = tokenizers or (make_tokenizer(config.data, "src"),
                                         make_tokenizer(config.data, "tgt"))

    @classmethod
    def load(cls, paths: str | Path | Sequence[str | Path], device: str = "auto",
             engine: str = "auto", compile: bool = False, workers: int = 1) -> Translator:
        """A translator for one checkpoint, or an ensemble of several of one vocabulary (the
        first one's config gives the decoding settings); for the directory ``mt export``
        wrote, with CTranslate2 (``engine``: ``"auto"`` tells them apart, ``"torch"`` or
        ``"ctranslate2"`` insists). ``compile``: the decoding steps compiled
        (``decode/compiled.py``; CPU, one model): a lone sentence's at the first call of one
        sentence (its beam's at the first of a beam), a batch's at the first of several or of
        a beam wider than 8 (then read from the cache). ``workers``: on
        the CPU, the batches of a call decoded by that many processes (``processes.py``;
        CTranslate2: side by side in its own), each with its share of the cores."""
        if workers < 1:
            raise MTError(f"workers must be 1 or more, not {workers}")
        engine = engine_for(paths, engine)
        if compile and engine != "torch":
            raise MTError("--compile compiles our decoder; the CTranslate2 engine has its own")
        if engine == "ctranslate2":
            paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
            if len(paths) > 1:
                raise MTError("--engine ctranslate2 translates with one exported model")
            return cls.of(load_exported(paths[0], device, workers=workers))
        return cls.of(load_checkpoints(paths, device, compile, workers))

    @classmethod
    def of(cls, loaded: Loaded) -> Translator:
        return cls(loaded.engine, loaded.config, loaded.src_vocab, loaded.tgt_vocab,
                   loaded.tokenizers)

    def with_settings(self, cfg: DecodeConfig, glossary: Glossary | None = None,
                      memory: Memory | None = None) -> Translator:
        """This translator with ``cfg`` (:meth:`settings`) as what a call that names no setting
        decodes with (``glossary``: what it holds to; ``memory``: the translations it uses), a
        new one around the same engine; the loaded config is left as it is."""
        return Translator(self.engine, dataclasses.replace(self.config, decode=cfg),
                          self.src_vocab, self.tgt_vocab, self.tokenizers,
                          self.glossary if glossary is None else glossary,
                          self.memory if memory is None else memory)

    @property
    def model(self) -> Transformer | Ensemble:
        """The PyTorch model (one, or the ensemble); a CTranslate2 engine has none."""
        return self._torch_engine().model

    def one_model(self, what: str) -> Transformer:
        """The PyTorch model, where ``what`` reads one ("attention weights", say)."""
        return self._torch_engine().one_model(what)

    def _torch_engine(self) -> TorchEngine:
        if not isinstance(self.engine, TorchEngine):
            raise MTError("this needs a PyTorch checkpoint (.pt), not an exported model")
        return self.engine

    @property
    def device(self) -> torch.device:
        return self.engine.device

    @property
    def max_source_tokens(self) -> int:
        """The most source tokens a sentence may have (``<eos>`` not counted)."""
        return min(self.config.decode.max_input_tokens,
                   self.engine.max_source_tokens)

    def fits(self, sentences: Sequence[str], cfg: DecodeConfig | None = None) -> list[bool]:
        """Whether each sentence is translated whole (``cfg``'s, by default the checkpoint's,
        ``max_sentence_tokens``; ``max_input_tokens``), not in parts."""
        limit = min(self.max_source_tokens,
                    (cfg or self.config.decode).max_sentence_tokens or self.max_source_tokens)
        return [len(tokens) <= limit
                for tokens in self.tokenizers[0].tokenize(self.as_read(sentences))]

    def as_read(self, sentences: Sequence[str]) -> list[str]:
        """``sentences`` as the model reads them: one written in capitals as it would be
        written otherwise (``casing.py``; its translation comes back in capitals)."""
        return as_read(sentences, self.tokenizers[0], self.src_vocab)

    def encode(self, sentences: Sequence[str], strict: bool = False) -> list[list[int]]:
        """Tokenize and map to ids, truncating inputs longer than ``decode.max_input_tokens``
        (``strict=True``: refusing them, with :class:`InputTooLongError`); :meth:`translate`
        cuts them into parts instead (``long_sentences.py``)."""
        limit = self.max_source_tokens
        ids = []
        for n, tokens in enumerate(self.tokenizers[0].tokenize(self.as_read(sentences)),
                                   start=1):
            if len(tokens) > limit and strict:
                raise InputTooLongError(f"sentence {n} has {len(tokens)} tokens; this model "
                                        f"takes at most {limit}: split it")
            if len(tokens) > limit:
                log.warning("input %d has %d tokens; only the first %d are translated "
                            "(decode.max_input_tokens)", n, len(tokens), limit)
                tokens = tokens[:limit]
            ids.append(self.src_vocab.encode(tokens))
        return ids

    def settings(self, base: DecodeConfig | None = None, **changes: Any) -> DecodeConfig:
        """``base`` (by default the checkpoint's decoding settings) with ``changes`` (None keeps
        a setting), checked."""
        types = field_types(DecodeConfig)
        unknown = sorted(set(changes) - set(types))
        if unknown:
            raise ConfigError(f"unknown decoding setting '{unknown[0]}'; the settings are: "
                              f"{', '.join(types)}")
        changes = {k: coerce(v, types[k], f"decode.{k}") for k, v in changes.items()
                   if v is not None}
        if changes.get("sample_topk") or changes.get("top_p", 1.0) < 1.0:  # one draw: no beam
            changes.setdefault("beam_size", 1)
        cfg = dataclasses.replace(base or self.config.decode, **changes)
        cfg.validate()
        return cfg

    @typing.overload
    def translate(self, texts: Sequence[str], settings: DecodeConfig | None = None, *,
                  nbest: None = None, form: Form = "sentences", attention: bool = False,
                  scores: bool = True, prefix: Sequence[str] | None = None,
                  glossary: Glossary | None = None, progress: bool = False,
                  **changes: Any) -> list[str]: ...

    @typing.overload
    def translate(self, texts: Sequence[str], settings: DecodeConfig | None = None, *,
                  nbest: int, form: Form = "sentences", attention: bool = False,
                  scores: bool = True, prefix: Sequence[str] | None = None,
                  glossary: Glossary | None = None, progress: bool = False,
                  **changes: Any) -> list[list[Translation]]: ...

    def translate(self, texts: Sequence[str], settings: DecodeConfig | None = None, *,
                  nbest: int | None = None, form: Form = "sentences", attention: bool = False,
                  scores: bool = True, prefix: Sequence[str] | None = None,
                  glossary: Glossary | None = None, progress: bool = False,
                  **changes: Any) -> list[str] | list[list[Translation]]:
        """Translate ``texts``: one translation (detokenized text) per text, an empty text giving an
        empty one; with ``nbest=k``, the k best of each as :class:`Translation` objects, best
        first, each a different text (``nbest.py``), with their scores (``scores=False`` spares
        greedy decoding them, a tenth of its time) and their cross-attention weights with
        ``attention=True``.

        ``settings``: the decoding settings (:meth:`settings`; by default the checkpoint's), with
        ``changes`` to its fields on top (``beam_size=3``, ``sample_topk=10``,
        ``precision="fp32"``). ``form``: each text is a sentence (``"sentences"``: one translated
        sentence by sentence where it holds several, in parts where it is longer than the model
        takes, ``long_sentences.py``; each read alone with ``nbest``, ``attention`` or ``prefix``),
        or text of several sentences and lines (``"text"``), HTML (``"html"``) or XHTML read as XML
        (``"xhtml"``), split into sentences that translate in one batch and put back together with
        their spacing and markup (``documents.py``). ``prefix``: how each translation must begin
        (one per sentence, "" for none; an unfinished last word is finished by the model:
        ``prefix.py``). ``glossary``: terms each translation must hold (``glossary.py``; not with
        sampling); URLs, numbers and the like are kept as they are where ``keep_spans`` (the
        checkpoint's: on) and the search can (``glossary.holding``). Without ``nbest``,
        ``attention`` or ``prefix``, a sentence ``self.memory`` holds is its (``memory.py``)."""
        if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(
                isinstance(s, str) for s in texts):
            raise TypeError('translate a list of texts (strings), e.g. translate(["Ein Hund."])')
        cfg = self.settings(settings, **changes)
        glossary = asked(self, glossary, cfg, changes.get("keep_spans") is not None)
        if form not in ("sentences", *FORMS):
            raise MTError(f"unknown form {form!r}; use 'sentences', "
                          f"{', '.join(map(repr, FORMS))}")
        if nbest is None and not attention and prefix is None:  # sentences, parts: documents
            return translate_documents(self, [self.split(t, form) for t in texts], cfg,
                                       glossary, progress)
        if form != "sentences":
            raise MTError("n-best lists, attention and prefixes are given per sentence: "
                          "translate with form=\"sentences\"")
        if prefix is not None and (isinstance(prefix, str) or len(prefix) != len(texts)):
            raise MTError(f"give one prefix per sentence ({len(texts)}), \"\" for none")
        nonempty = [i for i, s in enumerate(texts) if s.strip()]
        glossary = holding(self, glossary, cfg, prefix is not None)
        # as the model reads them (capitals: casing.py; a glossary's terms' sources written as
        # their targets)
        read = self.as_read(texts)
        sources, ids, required = steered(self, [read[i] for i in nonempty], glossary, cfg=cfg) \
            if glossary else ([read[i] for i in nonempty], None, None)
        for i, source in zip(nonempty, sources, strict=True):
            read[i] = source
        found = self.translate_ids(
            self.encode(sources) if ids is None else ids, cfg, nbest or 1, attention, progress,
            scores and nbest is not None, into=(len(texts), nonempty), required=required,
            forcing=None if prefix is None else self.forcing([prefix[i] for i in nonempty]),
            widest=4 * (nbest or 1))
        if cfg.replace_unk:
            found = copy_unknown(self, read, found, bool(glossary))
        found = [[dataclasses.replace(h, text=as_shouted(h.text)) for h in hyps]
                 if shouts(text) else hyps for text, hyps in zip(texts, found, strict=True)]
        return found if nbest is not None else [hyps[0].text for hyps in found]

    def split(self, text: str, form: Form = "text") -> Document[str]:
        """``text`` as the sentences it is translated in (``form``: :meth:`translate`'s); a
        plain text its memory holds whole, one (``memory.held_whole``)."""
        held = held_whole(text.strip() if form == "sentences" else text, self.memory) \
            if form in ("sentences", "text") else None
        data = self.config.data
        return held or split_document(text, data.src_lang, form, data.tgt_lang)

    def forcing(self, prefixes: Sequence[str]) -> Prefixes:
        """What search forces for each target prefix (``prefix.py``)."""
        return forcing_of(prefixes, self.tokenizers[1], self.tgt_vocab,
                          self.config.model.max_output_tokens)

    def translate_ids(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig, nbest: int = 1,
                      attention: bool = False, progress: bool = False, scores: bool = True,
                      into: tuple[int, list[int]] | None = None,
                      forcing: Forcing | None = None, stop: Callable[[], bool] | None = None,
                      required: Sequence[Sequence[Required]] | None = None,
                      widest: int = 0) -> list[list[Translation]]:
        """Translations of sources already as ids (each ending in ``<eos>``): the ``nbest``
        best (``widest``: each a different text, searched up to that wide, ``nbest.py``; 0:
        the search's own list). ``into``:
        (number of sentences, positions of these sources); the others translate as empty.
        ``forcing``: how each output must begin (a row per source). ``stop``: asked between
        decoding steps; a yes raises ``decode.stopping.StoppedError`` (the server's abandoned
        requests). ``required``: what each output must hold (``glossary.steered``)."""
        if attention and not isinstance(self.engine, TorchEngine):
            raise MTError(CTranslate2Engine.CANNOT)
        if nbest > 1 and widest:
            return nbest_different(lambda c, n: self.translate_ids(
                ids, c, n, attention, progress, scores, into, forcing, stop, required),
                cfg, nbest, min(widest, (len(self.tgt_vocab) - 2) // 2))
        if required is not None and any(required):
            hyps = decode_required(self, ids, cfg, nbest, forcing, stop, required)
        else:
            hyps = self.engine.decode(ids, cfg, nbest, progress=progress, scores=scores,
                                      forcing=forcing, stop=stop)
            if forcing is None:  # (a forced prefix raises its sentence's limit)
                note_cut(ids, hyps, cfg, self.config.model.max_output_tokens)
        hyps = ended(self, cfg, ids, hyps, forcing.lengths() if forcing else [0] * len(ids))
        total, positions = into or (len(ids), list(range(len(ids))))
        out: list[list[Translation]] = [[Translation("", [], 0.0)] for _ in range(total)]
        for row, (i, src_ids, found) in enumerate(zip(positions, ids, hyps, strict=True)):
            kept = forcing.kept[row] if isinstance(forcing, Prefixes) else []  # typed words
            out[i] = [self._translation(h, self.cross_attention(src_ids, h.tokens) if attention
                                        else None, required[row] if required else (), kept)
                      for h in found]
        return out

    def _translation(self, h: Hypothesis, weights: Tensor | None = None,
                     required: Sequence[Required] = (),
                     kept: Sequence[tuple[int, int, str]] = ()) -> Translation:
        """``h`` as text; ``kept``: tokens written as a given text (a prefix's words)."""
        tokens = self.tgt_vocab.decode(h.tokens)
        if isinstance(h, Placed):  # each constraint's tokens written as its required text
            kept = [(start, end, required[j].text) for j, start, end in h.spans]
        return Translation(self.tokenizers[1].detokenize_keeping(tokens, kept),
                           shown(tokens, h.tokens, kept), h.score, h.tokens, weights,
                           kept=list(kept))

    def alternatives(self, sentence: str, prefix: str = "", k: int = 5,
                     settings: DecodeConfig | None = None, **changes: Any) -> list[Choice]:
        """The ``k`` most probable tokens after ``prefix`` in the translation of
        ``sentence``, most probable first, each with the translation search completes from
        it (greedy, beam or sampling, as the settings say: ``settings`` and ``changes`` as
        for :meth:`translate`)."""
        if not sentence.strip():
            raise MTError("there is no sentence to translate")
        if k < 1:
            raise MTError(f"ask for at least one alternative, not {k}")
        cfg, forcing = self.settings(settings, **changes), self.forcing([prefix])
        src = self.encode([sentence])[0]
        found = self.engine.alternatives(src, forcing, k, cfg)
        at = len(forcing.tokens[0])  # the alternatives' position (an <unk>: its copy there)
        completed = ended(self, cfg, [src] * len(found), [[a.completion] for a in found],
                          [at + 1] * len(found))  # (each ends as the source, but its token)
        done = [[self._translation(c, kept=forcing.kept[0])] for [c] in completed]
        done = copy_unknown(self, [sentence] * len(done), done) if cfg.replace_unk else done
        return [Choice(c.tokens[at] if a.token == UNK_ID else self.tgt_vocab.itos[a.token],
                       a.log_prob, c) for a, [c] in zip(found, done, strict=True)]

    def score(self, sources: Sequence[str], translations: Sequence[str], strict: bool = False,
              **settings: Any) -> list[Scored]:
        """How probable the model finds each given translation of each source: per-token
        log-probabilities (each target token's, then ``<eos>``'s), as search computes them; a
        word the target vocabulary lacks that the source holds is ``<unk>`` (``replace_unk``).
        ``settings``: ``precision``, ``batch_size``, ``alpha`` (for :meth:`Scored.score`);
        ``strict``: a source too long is refused (:meth:`encode`), not cut."""
        if len(sources) != len(translations):
            raise MTError(f"{len(sources):,} sources but {len(translations):,} translations; "
                          "they must be parallel line by line")
        cfg = self.settings(**settings)
        ids = self.encode(sources, strict=strict)
        tokens = list(self.tokenizers[1].tokenize(translations))
        outputs = [self.tgt_vocab.encode(t, eos=False) for t in tokens]
        most = self.config.model.max_positions - 1  # <bos> takes a position
        for n, (out, pieces) in enumerate(zip(outputs, tokens, strict=True)):
            if len(out) + 1 > most:
                raise InputTooLongError(f"translation {n + 1} has {len(out):,} tokens; this "
                                        f"model scores at most {most - 1:,}: split it")
            unknown = unwritable(self, sources[n], pieces, out, cfg.replace_unk)
            if unknown:  # scored as <unk>, it would be the probability of another text
                raise MTError(f"translation {n + 1} holds '{unknown[0]}', which this model's "
                              "target vocabulary does not have" + " nor its source" * (
                                  cfg.replace_unk) + ": it cannot write it")
        log_probs = self.engine.score(ids, outputs, cfg)
        return [Scored([*t, EOS], lp, cfg.alpha) for t, lp in zip(tokens, log_probs, strict=True)]

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Output tokens as text, the target tokenizer's way."""
        return self.tokenizers[1].detokenize(tokens)

    def align(self, sentence: str, translation: Translation, layer: int = -1,
              head: int | None = None) -> list[tuple[int, int]]:
        """Word alignment of ``sentence`` and its ``translation`` read off the cross-attention
        of one decoder layer (one head, or the mean over heads): (source word, output word)
        pairs, words counted from 0 as the tokenizers see them (``decode/align.py``)."""
        tokens = next(iter(self.tokenizers[0].tokenize([sentence])))[:self.max_source_tokens]
        src_ids = self.src_vocab.encode(tokens)
        weights = self.cross_attention(src_ids, translation.ids, layer, head)  # (T + 1, S)
        return word_links(token_links(weights), self.tokenizers[0].words(tokens),
                          self.tokenizers[1].words(translation.tokens))

    def cross_attention(self, src_ids: Sequence[int], out_ids: Sequence[int], layer: int = -1,
                        head: int | None = None) -> Tensor:
        """Cross-attention ``(T_out + 1, S)`` of one decoder layer (one head, or the mean over
        heads) while the model reads ``out_ids`` (teacher forcing) for the source ``src_ids``."""
        return self.engine.cross_attention([src_ids], [out_ids], layer, head)[0]
