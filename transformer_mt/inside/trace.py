"""One translation, stage by stage (``mt trace``): tokens, embeddings, positional encoding,
every encoder and decoder layer, the next-token distribution at each step, with shapes; and the
cross-attention map of one sentence (``mt translate --attention``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from transformer_mt.config import DecodeConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, UNK, UNK_ID
from transformer_mt.decode.forcing import Forcing, raise_limits
from transformer_mt.decode.incremental import decode_step, start_decoding
from transformer_mt.decode.search import (
    Hypothesis,
    beam_search,
    length_penalty,
    max_output_lengths,
    next_token_logprobs,
)
from transformer_mt.model.transformer import AttentionWeights
from transformer_mt.precision import autocast, for_decoding, resolve_precision
from transformer_mt.translate import Translation, Translator
from transformer_mt.translate.endings import ended
from transformer_mt.translate.unknown import copy_unknown


def cross_attention(translator: Translator, sentence: str, layer: int = -1,
                    head: int | None = None) -> tuple[list[str], list[str], Tensor, str]:
    """Translate greedily, then return source tokens, output tokens, the cross-attention
    weights ``(T_out, S)`` of one decoder layer (one head, or the mean over heads) and the
    translation."""
    translator.one_model("attention weights")
    src_ids = translator.encode([sentence])[0]
    result = translator.translate([sentence], nbest=1, beam_size=1)[0][0]
    weights = translator.cross_attention(src_ids, result.ids, layer, head)  # (T_out + 1, S)
    src_tokens = [translator.src_vocab.itos[i] for i in src_ids]
    return src_tokens, [*result.tokens, "<eos>"], weights, result.text


@dataclass
class Inside:
    """What the model does while it reads one source and produces one output (teacher forcing:
    the whole output at once, what search saw step by step): every layer's and head's
    attention, and at each output step the most probable next tokens."""

    source: list[str]  # source tokens, <eos> included
    output: list[str]  # output tokens, <eos> included: a row per step
    cross: Tensor  # (L, H, T_out + 1, S) cross-attention of each decoder layer and head
    self_attention: Tensor  # (L, H, T_out + 1, T_out + 1) decoder self-attention
    encoder: Tensor  # (L_enc, H, S, S) encoder self-attention
    top_tokens: list[list[str]]  # (T_out + 1, k) the k most probable next tokens at each step
    top_probs: Tensor  # (T_out + 1, k) their probabilities
    log_probs: list[float]  # (T_out + 1,) the log-probability of each output token and <eos>


@torch.no_grad()
def look_inside(translator: Translator, src_ids: list[int], out_ids: list[int],
                k: int = 5, precision: str = "fp32") -> Inside:
    """One forward pass over ``out_ids`` (ids without <bos>/<eos>) for the source ``src_ids``
    (ending in <eos>) at ``precision`` (that of the decoding it explains): the attention maps
    and next-token candidates ``mt trace`` draws and the server's page shows."""
    model = translator.one_model("attention weights")
    src = torch.tensor([src_ids], device=translator.device)  # (1, S)
    tgt_in = torch.tensor([[BOS_ID, *out_ids]], device=translator.device)  # (1, T + 1)
    att = AttentionWeights()
    with autocast(translator.device, resolve_precision(precision, translator.device)):
        logits = model(src, tgt_in, source_mask(src), attention=att)[0]  # (T + 1, V)
    log_probs = next_token_logprobs(logits)  # (T + 1, V)
    top_probs, top_ids = log_probs.exp().topk(min(k, logits.size(-1)))
    gold = torch.tensor([*out_ids, EOS_ID], device=logits.device)  # (T + 1,)
    itos = translator.tgt_vocab.itos
    return Inside([translator.src_vocab.itos[i] for i in src_ids],
                  [*(itos[i] for i in out_ids), "<eos>"],
                  torch.stack([w[0] for w in att.cross]).float().cpu(),
                  torch.stack([w[0] for w in att.decoder_self]).float().cpu(),
                  torch.stack([w[0] for w in att.encoder]).float().cpu(),
                  [[itos[i] for i in row] for row in top_ids.tolist()],
                  top_probs.float().cpu(),
                  log_probs.gather(1, gold[:, None])[:, 0].float().cpu().tolist())


@dataclass
class BeamSteps:
    """What beam search did for one sentence: at each step the hypotheses it kept (tokens so
    far and their log-probability), best first; and the hypotheses that ended (with ``<eos>``),
    with their log-probability, their score (divided by the length penalty) and their step."""

    kept: list[list[tuple[list[str], float]]]
    finished: list[tuple[list[str], float, float, int]]


@torch.no_grad()
def beam_steps(translator: Translator, src_ids: list[int], cfg: DecodeConfig,
               forcing: Forcing | None = None) -> BeamSteps:
    """Beam search over one source (ids ending in <eos>), with the settings ``cfg`` (and a
    prefix's ``forcing``), recording what it kept and what ended at each step."""
    model = translator.one_model("the beam's steps")
    precision = resolve_precision(cfg.precision, translator.device)
    src = torch.tensor([src_ids], device=translator.device)  # (1, S)
    itos = translator.tgt_vocab.itos
    kept_steps: list[list[tuple[list[str], float]]] = []

    def keep(alive: list[int], prefix: Tensor, scores: Tensor) -> None:
        kept = [([itos[i] for i in p[1:]], s) for p, s in zip(
            prefix.tolist(), scores[0].tolist(), strict=True) if math.isfinite(s)]
        if kept:  # none where every candidate ended (at the length limit, say)
            kept_steps.append(sorted(kept, key=lambda h: -h[1]))

    with autocast(translator.device, precision):
        ended = beam_search(for_decoding(model, precision, translator.device), src,
                            source_mask(src), cfg.beam_size, cfg.alpha, cfg.max_len_a,
                            cfg.max_len_b, nbest=4 * cfg.beam_size, use_cache=True,
                            on_step=keep, forcing=forcing,
                            no_repeat=cfg.no_repeat_ngram_size)[0]
    finished = []
    for h in ended:
        penalty = float(length_penalty(len(h.tokens) + 1, cfg.alpha))
        finished.append(([itos[i] for i in h.tokens], h.score * penalty, h.score, len(h.tokens)))
    return BeamSteps(kept_steps, finished)


def _vec(t: Tensor, n: int = 4) -> str:
    return "[" + ", ".join(f"{v:+.3f}" for v in t[:n].tolist()) + ", ...]"


@torch.no_grad()
def trace(translator: Translator, sentence: str, emit: Callable[[str], None],
          figures: Path | None = None, max_steps: int | None = None, prefix: str = "",
          alternatives: int = 0) -> list[str]:
    """Walk one sentence through every stage of the model, describing each with ``emit``.

    Returns the output tokens (greedy; beginning with ``prefix``, whose tokens are forced).
    With ``alternatives`` k, ends with the k best tokens after the prefix, each completed.
    With ``figures``, saves the positional-encoding matrix and the attention maps of every
    layer and head there.
    """
    src_ids = translator.encode([sentence])[0]
    src_tokens = [translator.src_vocab.itos[i] for i in src_ids]
    forcing = translator.forcing([prefix])
    enc_weights = _trace_encoder(translator, sentence, src_ids, src_tokens, emit)
    out = _trace_decoder(translator, src_ids, src_tokens, emit, max_steps, forcing)
    emit(f"6. Output: {translator.detokenize(out)!r}")
    if UNK in out and translator.config.decode.replace_unk:
        ids = translator.tgt_vocab.encode(out, eos=False)
        [[copied]] = copy_unknown(translator, [sentence], [[Translation("", out, 0.0, ids)]])
        emit(f"   each <unk> written as the source word it attends to most (decode.replace_unk,"
             f" the last layer's cross-attention): {copied.text!r}")
    ids = translator.tgt_vocab.encode(out, eos=False)
    [[end]] = ended(translator, translator.config.decode, [src_ids], [[Hypothesis(ids, 0.0)]],
                    forcing.lengths())
    if end.tokens != ids:
        emit("   ended as the source ends (decode.end_as_source): "
             f"{translator.detokenize(translator.tgt_vocab.decode(end.tokens))!r}")
    if alternatives:
        at = len(forcing.tokens[0])
        emit(f"7. Alternatives at step {at} (after the prefix {prefix!r}): the {alternatives} "
             "most probable tokens there, each completed greedily")
        for choice in translator.alternatives(sentence, prefix, alternatives, beam_size=1):
            emit(f"   {choice.token!r} (probability {math.exp(choice.log_prob):.3f}) -> "
                 f"{choice.translation.text!r} (log-probability {choice.translation.score:.3f})")
    if figures is not None:
        _trace_figures(translator, Path(figures), src_ids, src_tokens, enc_weights, out)
        emit(f"figures written to {figures}")
    return out


def _trace_encoder(translator: Translator, sentence: str, src_ids: list[int],
                   src_tokens: list[str], emit: Callable[[str], None]) -> list[Tensor]:
    """Stages 1-4: tokens, embedding, positions, the encoder's layers; returns each encoder
    layer's attention weights (H, S, S)."""
    model = translator.one_model("a trace")
    cfg = model.cfg
    d = cfg.d_model
    src = torch.tensor([src_ids], device=translator.device)  # (1, S)
    mask = source_mask(src)  # (1, 1, 1, S)
    s = len(src_ids)

    emit("1. Tokens and ids")
    emit(f"   input: {sentence!r}")
    emit("   tokens: " + " ".join(f"{t}({i})" for t, i in zip(src_tokens, src_ids, strict=True)))
    words = next(iter(translator.tokenizers[0].tokenize([sentence])))
    unknown = [w for w, i in zip(words, src_ids, strict=False) if i == UNK_ID]
    if unknown:
        emit(f"   not in the vocabulary (become <unk>): {', '.join(unknown)}")
    emit(f"   src ids: shape {tuple(src.shape)} (batch, source length)")

    emit(f"2. Token embedding x sqrt(d_model) = x {math.sqrt(d):.1f}")
    emb = model.encoder.embed(src)  # (1, S, D)
    emit(f"   shape {tuple(emb.shape)} (batch, source length, d_model)")
    emit(f"   '{src_tokens[0]}' -> {_vec(emb[0, 0])} (norm {emb[0, 0].norm():.2f})")

    emit("3. Positional encoding added: PE[pos, 2i] = sin(pos / 10000^(2i/d)), "
         "PE[pos, 2i+1] = cos(...)")
    pe = model.encoder.pos.table[:s]  # (S, D)
    x = model.encoder.pos(emb)  # (1, S, D)
    emit(f"   PE shape {tuple(pe.shape)}; PE[1] = {_vec(pe[1])}")
    emit(f"   sum shape {tuple(x.shape)}; position 0 now {_vec(x[0, 0])}")

    n_layers = len(model.encoder.layers)
    emit(f"4. Encoder: {n_layers} layer{'s' * (n_layers != 1)} of self-attention + "
         f"feed-forward ({cfg.norm}-norm)")
    enc_weights = []
    for n, layer in enumerate(model.encoder.layers):
        x, w = layer(x, mask, need_weights=True)  # (1, S, D), (1, H, S, S)
        enc_weights.append(w[0])
        looks = w[0].mean(0).argmax(-1).tolist()  # (S,)
        emit(f"   layer {n}: attention weights {tuple(w.shape)} (batch, heads, query, key); "
             f"output {tuple(x.shape)}")
        emit("     each token looks most at: " + ", ".join(
            f"{src_tokens[q]}->{src_tokens[k]}" for q, k in enumerate(looks)))
        emit("     residual-stream norms: " + " ".join(f"{v:.1f}" for v in x[0].norm(dim=-1)))
    memory = model.encoder.norm(x)
    emit(f"   encoder output (memory): {tuple(memory.shape)}")
    return enc_weights


def _trace_decoder(translator: Translator, src_ids: list[int], src_tokens: list[str],
                   emit: Callable[[str], None], max_steps: int | None,
                   forcing: Forcing) -> list[str]:
    """Stage 5: greedy decoding a token at a time, with the cross-attention and the five most
    probable next tokens of each step (the prefix's tokens forced, ``forcing``); returns the
    output tokens."""
    model = translator.one_model("a trace")
    cfg = model.cfg
    src = torch.tensor([src_ids], device=translator.device)  # (1, S)
    mask = source_mask(src)  # (1, 1, 1, S)
    s = len(src_ids)
    emit("5. Decoder, one token at a time (greedy), reusing cached keys and values")
    state = start_decoding(model, src, mask)
    last = torch.tensor([BOS_ID], device=translator.device)
    dcfg = translator.config.decode
    limit = max_steps or int(raise_limits(max_output_lengths(
        mask, dcfg.max_len_a, dcfg.max_len_b, cfg.max_output_tokens), forcing)[0]) + 1  # <eos>
    out: list[str] = []
    for step in range(limit):
        att = AttentionWeights()
        logits = decode_step(state, last, attention=att)  # (1, V)
        probs = next_token_logprobs(logits).exp()[0]  # (V,)
        cross = att.cross[-1][0, :, -1].mean(0)  # (S,) last layer, mean over heads
        top_src = cross.topk(min(2, s)).indices.tolist()
        top_p, top_i = probs.topk(5)
        prefix = " ".join(["<bos>", *out])
        allowed = forcing.mask(step, probs.size(0), probs.device)  # (1, V) or None
        choice = int(top_i[0]) if allowed is None else int(
            probs.masked_fill(~allowed[0], -1.0).argmax())
        word = translator.tgt_vocab.itos[choice]
        emit(f"   step {step}: prefix '{prefix}' | logits {tuple(logits.shape)} | "
             "cross-attention on " + ", ".join(f"{src_tokens[j]} ({cross[j]:.2f})"
                                               for j in top_src))
        top = ", ".join(f"{translator.tgt_vocab.itos[i]} {p:.3f}"
                        for p, i in zip(top_p.tolist(), top_i.tolist(), strict=True))
        if allowed is None:
            emit(f"     top 5: {top} -> choose '{word}'")
        elif int(allowed[0].sum()) == 1:
            emit(f"     top 5: {top} -> the prefix forces '{word}' ({probs[choice]:.3f}; its "
                 "log-probability counts in the score)")
        else:
            emit(f"     top 5: {top} -> the prefix ends in an unfinished word: "
                 f"{int(allowed[0].sum())} tokens begin with it; the most probable of them is "
                 f"'{word}' ({probs[choice]:.3f})")
        if choice == EOS_ID:
            break
        out.append(word)
        last = torch.tensor([choice], device=translator.device)
    return out


def _trace_figures(translator: Translator, figures: Path, src_ids: list[int],
                   src_tokens: list[str], enc_weights: list[Tensor], out: list[str]) -> None:
    """The positional encoding and every layer's and head's attention maps, as images."""
    from transformer_mt.inside.plots import plot_attention, pyplot, save_figure

    model, plt = translator.one_model("a trace"), pyplot()
    figures.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
    image = ax.imshow(model.encoder.pos.table[:50].cpu().numpy(), cmap="RdBu",
                      aspect="auto")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title("positional encoding")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    save_figure(fig, figures / "positional_encoding.png")
    for n, w in enumerate(enc_weights):
        for h in range(w.size(0)):
            plot_attention(w[h].cpu(), src_tokens, src_tokens,
                           figures / f"encoder_layer{n}_head{h}.png",
                           f"encoder self-attention, layer {n}, head {h}")
    # Every decoder layer and head: teacher-force the output to get all weights at once.
    inside = look_inside(translator, src_ids, [translator.tgt_vocab.stoi[t] for t in out])
    cols_self = ["<bos>", *out]
    layers = zip(inside.self_attention, inside.cross, strict=True)
    for n, (self_w, cross_w) in enumerate(layers):
        for h in range(cross_w.size(0)):
            plot_attention(cross_w[h], inside.output, src_tokens,
                           figures / f"decoder_layer{n}_head{h}_cross.png",
                           f"decoder cross-attention, layer {n}, head {h}")
            plot_attention(self_w[h], inside.output, cols_self,
                           figures / f"decoder_layer{n}_head{h}_self.png",
                           f"decoder self-attention, layer {n}, head {h}")
