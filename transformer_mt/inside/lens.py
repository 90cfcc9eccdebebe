"""Looking inside the decoder: the logit lens, and parts of the model switched off.

The **logit lens** reads the decoder's residual stream after each layer as if that layer were
the last: the final LayerNorm and the output projection applied to it give the next-token
distribution the model would have produced there (for the embedding too). The last layer's
lens is the model's own distribution.

A **switch** turns off (scale 0) or scales one part and decodes again: an attention head (its
slice of the heads' concatenation, before the output projection) of the encoder's
self-attention, the decoder's self-attention or the cross-attention, or a layer's
feed-forward block. It is a forward hook put on the model from outside and taken off after:
the reference model has no branch for it. Both decode with the reference (the model as
trained, whole prefixes, fp32, the hooks seen at every step).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, UNK_ID
from transformer_mt.decode.search import greedy, next_token_logprobs
from transformer_mt.errors import MTError
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.transformer import Transformer
from transformer_mt.translate.results import Translation

if TYPE_CHECKING:
    from transformer_mt.translate import Translator

PARTS = ("encoder-self", "decoder-self", "cross", "encoder-ffn", "decoder-ffn")
SPEC = re.compile(r"(?P<part>[a-z-]+):(?P<layer>\d+)(?::(?P<head>\d+))?(?:=(?P<scale>[-+.\deE]+))?")


@dataclass
class Lens:
    """The logit lens of one output: at each position (the token written there, ``<eos>``
    included) and after each layer ("embedding", "layer 1", ...), the ``k`` most probable
    tokens and the probability of the token finally written."""

    output: list[str]  # (T + 1,) the tokens written
    layers: list[str]  # (L + 1,)
    top_tokens: list[list[list[str]]]  # [layer][position] -> k tokens, most probable first
    top_probs: Tensor  # (L + 1, T + 1, k)
    written: Tensor  # (L + 1, T + 1) probability of the written token


@torch.no_grad()
def lens_log_probs(model: Transformer, src: Tensor, tgt_in: Tensor) -> Tensor:
    """(L + 1, T, V) next-token log-probabilities read from the embedding and after each
    decoder layer, for one source ``src`` (1, S) and output prefix ``tgt_in`` (1, T). Each
    state goes through the final LayerNorm and the projection alone, in the shape the model
    projects it: the last is exactly the model's own."""
    states: list[Tensor] = []  # (1, T, D) each: the embedding, then each layer's output
    hooks = [model.decoder.pos.register_forward_hook(lambda m, i, o: states.append(o))]
    hooks += [layer.register_forward_hook(lambda m, i, o: states.append(o[0]))
              for layer in model.decoder.layers]
    try:
        model(src, tgt_in, source_mask(src))
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack([next_token_logprobs(model.decoder.project(model.decoder.norm(x))[0])
                        for x in states])


def logit_lens(translator: Translator, src_ids: list[int], out_ids: list[int],
               k: int = 5) -> Lens:
    """The lens of the output ``out_ids`` (ids without ``<bos>``/``<eos>``) for the source
    ``src_ids`` (ending in ``<eos>``), the whole output read at once (teacher forcing)."""
    model = translator.one_model("the logit lens")
    src = torch.tensor([src_ids], device=translator.device)  # (1, S)
    tgt_in = torch.tensor([[BOS_ID, *out_ids]], device=translator.device)  # (1, T + 1)
    probs = lens_log_probs(model, src, tgt_in).exp()  # (L + 1, T + 1, V)
    written = torch.tensor([*out_ids, EOS_ID], device=probs.device)  # (T + 1,)
    top_probs, top_ids = probs.topk(min(k, probs.size(-1)), dim=-1)  # (L + 1, T + 1, k)
    itos = translator.tgt_vocab.itos
    return Lens([*(itos[i] for i in out_ids), "<eos>"],
                ["embedding", *(f"layer {i + 1}" for i in range(probs.size(0) - 1))],
                [[[itos[i] for i in row] for row in layer] for layer in top_ids.tolist()],
                top_probs.cpu(), probs[:, torch.arange(len(written)), written].cpu())


@dataclass(frozen=True)
class Switch:
    """A part scaled (0: off): ``part`` one of :data:`PARTS`, ``layer`` and ``head`` from 1
    (``head`` None for a feed-forward block)."""

    part: str
    layer: int
    head: int | None = None
    scale: float = 0.0

    @classmethod
    def parse(cls, spec: str) -> Switch:
        """``PART:LAYER[:HEAD][=SCALE]``, e.g. ``cross:2:1`` (head 1 of layer 2's
        cross-attention off) or ``decoder-ffn:3=0.5``."""
        m = SPEC.fullmatch(spec.strip())
        if m is None or m["part"] not in PARTS:
            raise MTError(f"cannot read the switch {spec!r}: write PART:LAYER[:HEAD][=SCALE], "
                          f"PART one of {', '.join(PARTS)} (e.g. cross:2:1 or decoder-ffn:1=0.5)")
        ffn = m["part"].endswith("ffn")
        if ffn == (m["head"] is not None):
            what = "a feed-forward block has no heads" if ffn else "name its head: PART:LAYER:HEAD"
            raise MTError(f"the switch {spec!r}: {what}")
        try:
            scale = float(m["scale"]) if m["scale"] else 0.0
        except ValueError:
            raise MTError(f"the switch {spec!r}: the scale must be a number") from None
        return cls(m["part"], int(m["layer"]), None if ffn else int(m["head"]), scale)


@contextmanager
def switched(model: Transformer, switches: Sequence[Switch]) -> Iterator[None]:
    """The model with each switch's part scaled, inside the ``with`` block (hooks, removed
    after); a layer or head the model does not have is refused in one line."""
    hooks = [_hook(model, s) for s in switches]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


def _hook(model: Transformer, s: Switch) -> Any:
    side = model.encoder if s.part.startswith("encoder") else model.decoder
    layers = side.layers
    if not 1 <= s.layer <= len(layers):
        raise MTError(f"the {s.part} switch names layer {s.layer}; the model has layers "
                      f"1-{len(layers)}")
    name = "ffn" if s.head is None else "cross_attn" if s.part == "cross" else "self_attn"
    part = layers[s.layer - 1].get_submodule(name)
    if s.head is None:  # a feed-forward block: its output scaled
        return part.register_forward_hook(lambda m, i, out: (out[0] * s.scale, *out[1:]))
    attention = part
    assert isinstance(attention, MultiHeadAttention)
    if not 1 <= s.head <= attention.n_heads:
        raise MTError(f"the {s.part} switch names head {s.head}; the model has heads "
                      f"1-{attention.n_heads}")
    heads = slice((s.head - 1) * attention.d_head, s.head * attention.d_head)

    def scale_head(module: nn.Module, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        x = inputs[0].clone()  # (B, T, D): the heads side by side, before the projection
        x[..., heads] *= s.scale
        return (x,)

    return attention.out_proj.register_forward_pre_hook(scale_head)


@torch.no_grad()
def decode_switched(translator: Translator, sentence: str,
                    switches: Sequence[Switch] = ()) -> tuple[Translation, float]:
    """The greedy translation of ``sentence`` with ``switches`` on (each ``<unk>`` written as
    the source word the switched model attends to most, where ``decode.replace_unk``), and the
    log-probability that model gives the translation made without them (what the switches
    cost it)."""
    from transformer_mt.translate.unknown import copy_unknown

    model = translator.one_model("switches")
    src_ids = translator.encode([sentence])[0]
    src = torch.tensor([src_ids], device=translator.device)  # (1, S)
    mask = source_mask(src)
    cfg = translator.config.decode
    plain = greedy(model, src, mask, cfg.max_len_a, cfg.max_len_b,
                   no_repeat=cfg.no_repeat_ngram_size)[0]
    with switched(model, switches):
        hyp = greedy(model, src, mask, cfg.max_len_a, cfg.max_len_b,
                     no_repeat=cfg.no_repeat_ngram_size)[0]
        tgt = torch.tensor([[BOS_ID, *plain.tokens]], device=translator.device)  # (1, T + 1)
        log_probs = next_token_logprobs(model(src, tgt, mask)[0])  # (T + 1, V)
        tokens = [translator.tgt_vocab.itos[i] for i in hyp.tokens]
        found = Translation(translator.detokenize(tokens), tokens, hyp.score, hyp.tokens)
        if cfg.replace_unk and UNK_ID in hyp.tokens:
            [[found]] = copy_unknown(translator, [sentence], [[found]])
    gold = torch.tensor([*plain.tokens, EOS_ID], device=log_probs.device)
    return found, float(log_probs.gather(1, gold[:, None]).sum())


def trace_lens(translator: Translator, sentence: str, emit: Any) -> Lens:
    """``mt trace --lens``: the greedy translation's lens, a line a position: the most
    probable token after each layer and the written token's probability there."""
    src_ids = translator.encode([sentence])[0]
    decoded, _ = decode_switched(translator, sentence)
    lens = logit_lens(translator, src_ids, decoded.ids)
    emit("Logit lens: at each position, what each decoder layer would write if it were the "
         "last (its top token, and the probability it gives the token finally written)")
    emit("   written | " + " | ".join(lens.layers))
    for t, token in enumerate(lens.output):
        cells = [f"{lens.top_tokens[i][t][0]} ({float(lens.written[i, t]):.2f})"
                 for i in range(len(lens.layers))]
        emit(f"   {token} | " + " | ".join(cells))
    return lens


def trace_switches(translator: Translator, sentence: str, switches: Sequence[Switch],
                   emit: Any) -> Translation:
    """``mt trace --switch``: the greedy translation with and without the switches."""
    plain, _ = decode_switched(translator, sentence)
    after, cost = decode_switched(translator, sentence, switches)
    named = ", ".join(f"{s.part} layer {s.layer}" + (f" head {s.head}" if s.head else "")
                      + f" x {s.scale:g}" for s in switches)
    emit(f"Switched: {named}")
    emit(f"   as trained: {plain.text!r} (log-probability {plain.score:.3f})")
    marks = " ".join(t if i < len(plain.tokens) and plain.tokens[i] == t else f"[{t}]"
                     for i, t in enumerate(after.tokens))
    emit(f"   switched:   {after.text!r} (log-probability {after.score:.3f}); changed tokens "
         f"in brackets: {marks}")
    emit(f"   the trained translation, scored by the switched model: {cost:.3f} "
         f"({cost - plain.score:+.3f})")
    return after


@dataclass
class Snapshot:
    """One checkpoint's greedy translation of the sentence, with its log-probability and its
    word alignment read off the last layer's cross-attention (source word, output word)."""

    name: str
    step: int
    text: str
    score: float
    links: list[tuple[int, int]]  # (source word, output word), from 0
    source_words: list[str]
    output_words: list[str]


def across_training(run_dir: str | Path, sentence: str, device: str = "auto") -> list[Snapshot]:
    """The sentence translated by each checkpoint a run kept (``kept_*.pt``, ``step_*.pt``,
    ``best.pt``), in the order of their steps: how the model learnt it."""
    from transformer_mt.checkpoint import load_checkpoint
    from transformer_mt.translate import Translator

    run = Path(run_dir)
    paths = sorted({*run.glob("kept_*.pt"), *run.glob("step_*.pt"), *run.glob("best.pt")})
    if not paths:
        raise MTError(f"'{run}' holds no checkpoints (kept_*.pt, step_*.pt, best.pt): give "
                      "a run directory of mt train")
    snapshots = []
    for path in paths:
        translator = Translator.load(path, device)
        best = translator.translate([sentence], nbest=1, beam_size=1)[0][0]
        step = int(load_checkpoint(path).get("progress", {}).get("step", 0))
        snapshots.append(Snapshot(path.name, step, best.text, best.score,
                                  translator.align(sentence, best),
                                  *_words_of(translator, sentence, best)))
    return sorted(snapshots, key=lambda s: (s.step, s.name))


def trace_run(run_dir: str | Path, sentence: str, emit: Any, device: str = "auto") -> None:
    """``mt trace --run-dir``: a line a checkpoint."""
    emit(f"{sentence!r} across the training run in {run_dir}:")
    for s in across_training(run_dir, sentence, device):
        links = " ".join(f"{i}-{j}" for i, j in s.links)
        emit(f"   step {s.step:>7} {s.name:<16} {s.score:8.3f}  {s.text}  ||| {links}")


@dataclass
class Compared:
    """One model's side of a comparison: its translation, its log-probability, its
    log-probability of the other model's translation (None: it cannot write it) and, for
    each source word, the output words its cross-attention links to it."""

    text: str
    log_prob: float
    of_other: float | None
    links: dict[str, list[str]]


def side_by_side(models: Sequence[Translator], sentence: str) -> list[Compared]:
    """Two (or more) models on one sentence: each translation (greedy), each model's score
    of each other's (as ``mt score``), and where their cross-attention links words."""
    best = [m.translate([sentence], nbest=1, beam_size=1)[0][0] for m in models]
    sides = []
    for n, model in enumerate(models):
        other = best[(n + 1) % len(models)].text
        try:
            of_other: float | None = model.score([sentence], [other])[0].log_prob
        except MTError:  # a word its vocabulary does not have
            of_other = None
        sides.append(Compared(best[n].text, model.score([sentence], [best[n].text])[0].log_prob,
                              of_other, _links_by_word(model, sentence, best[n])))
    return sides


def _words_of(model: Translator, sentence: str,
              translation: Any) -> tuple[list[str], list[str]]:
    """The source's and the translation's words, as :meth:`Translator.align` counts them."""
    def words(tokenizer: Any, tokens: list[str]) -> list[str]:
        out: dict[int, str] = {}
        for token, word in zip(tokens, tokenizer.words(tokens), strict=True):
            out[word] = out.get(word, "") + token.replace("▁", "")
        return [out[i] for i in sorted(out)]

    source = next(iter(model.tokenizers[0].tokenize([sentence])))[:model.max_source_tokens]
    return (words(model.tokenizers[0], source),
            words(model.tokenizers[1], translation.tokens))


def _links_by_word(model: Translator, sentence: str, translation: Any) -> dict[str, list[str]]:
    src, out = _words_of(model, sentence, translation)
    links: dict[str, list[str]] = {}
    for i, j in model.align(sentence, translation):
        links.setdefault(f"{i}:{src[i]}", []).append(out[j])
    return links


def trace_compare(models: Sequence[Translator], names: Sequence[str], sentence: str,
                  emit: Any) -> list[Compared]:
    """``mt trace --checkpoint A --checkpoint B``: the two side by side."""
    sides = side_by_side(models, sentence)
    for name, side, other in zip(names, sides, [*names[1:], names[0]], strict=True):
        scored = "cannot write it" if side.of_other is None else f"{side.of_other:.3f}"
        emit(f"{name}: {side.text!r} (log-probability {side.log_prob:.3f}; of {other}'s "
             f"translation: {scored})")
    emit("cross-attention links, source word -> output words (* where they differ):")
    for word in sorted({w for s in sides for w in s.links}, key=lambda w: int(w.split(":")[0])):
        linked = [" ".join(s.links.get(word, [])) or "-" for s in sides]
        mark = "*" if len(set(linked)) > 1 else " "
        emit(f" {mark} {word.split(':', 1)[1]}: " + " | ".join(linked))
    return sides
