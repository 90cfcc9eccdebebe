"""Looking inside: training plots, attention maps, and a step-by-step trace of one translation."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt
import torch
from torch import Tensor

from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID
from transformer_mt.decode.incremental import decode_step, start_decoding
from transformer_mt.decode.search import max_output_lengths, next_token_logprobs
from transformer_mt.errors import MTError
from transformer_mt.model.transformer import AttentionWeights
from transformer_mt.translate import Translator

# --------------------------------------------------------------------------------------- plots


def read_metrics(run_dir: Path) -> tuple[list[dict], list[dict]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise MTError(f"'{path}' not found; pass a run directory written by 'mt train'")
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError as exc:
                raise MTError(f"'{path}', line {n}: not JSON ({exc})") from exc
    train = [r for r in records if r.get("type") == "train"]
    valid = [r for r in records if r.get("type") == "valid"]
    if not train and not valid:
        raise MTError(f"'{path}' holds no training records yet")
    return train, valid


def plot_run(run_dir: Path, out_dir: Path | None = None) -> list[Path]:
    """Write ``loss.png``, ``bleu.png`` and ``lr.png`` for a run; returns their paths."""
    train, valid = read_metrics(run_dir)
    out_dir = Path(out_dir or Path(run_dir) / "plots")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def figure(name: str, draw: Callable[[plt.Axes], None], ylabel: str) -> None:
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
        draw(ax)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)

    def loss(ax: plt.Axes) -> None:
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train (smoothed CE)")
        ax.plot([r["step"] for r in valid], [r["val_loss"] for r in valid], "o-", label="val")

    figure("loss", loss, "loss per token")
    if valid:
        figure("bleu", lambda ax: ax.plot([r["step"] for r in valid],
                                          [r["val_bleu"] for r in valid], "o-",
                                          label="val BLEU"), "BLEU")
    if train:
        figure("lr", lambda ax: ax.plot([r["step"] for r in train], [r["lr"] for r in train]),
               "learning rate")
    return written


# ------------------------------------------------------------------------------ attention maps


def cross_attention(translator: Translator, sentence: str, layer: int = -1,
                    head: int | None = None) -> tuple[list[str], list[str], Tensor, str]:
    """Translate greedily, then return source tokens, output tokens, the cross-attention
    weights ``(T_out, S)`` of one decoder layer (one head, or the mean over heads) and the
    translation."""
    model = translator.members[0]
    n_layers = len(model.decoder.layers)
    if not -n_layers <= layer < n_layers:
        raise MTError(f"--layer {layer} is out of range: the decoder has {n_layers} layers")
    if head is not None and not 0 <= head < model.cfg.n_heads:
        raise MTError(f"--head {head} is out of range: the model has {model.cfg.n_heads} heads")
    src_ids = translator.encode([sentence])[0]
    result = translator.translate_nbest([sentence], beam_size=1)[0][0]
    weights = translator.cross_attention(src_ids, result.ids, layer, head)  # (T_out + 1, S)
    src_tokens = [translator.src_vocab.itos[i] for i in src_ids]
    return src_tokens, [*result.tokens, "<eos>"], weights, result.text


def plot_attention(weights: Tensor, rows: list[str], cols: list[str], path: Path,
                   title: str = "") -> Path:
    """Save a heatmap: one row per output token, one column per source token."""
    height = max(2.5, 0.35 * len(rows) + 1.2)
    width = max(3.0, 0.4 * len(cols) + 1.8)
    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    image = ax.imshow(weights.float().numpy(), cmap="viridis", aspect="auto", vmin=0.0)
    ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title:
        ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------- trace


def _vec(t: Tensor, n: int = 4) -> str:
    return "[" + ", ".join(f"{v:+.3f}" for v in t[:n].tolist()) + ", ...]"


@torch.no_grad()
def trace(translator: Translator, sentence: str, emit: Callable[[str], None],
          figures: Path | None = None, max_steps: int | None = None) -> list[str]:
    """Walk one sentence through every stage of the model, describing each with ``emit``.

    Returns the output tokens (greedy). With ``figures``, saves the positional-encoding matrix
    and the attention maps of every layer and head there.
    """
    model, cfg = translator.model, translator.model.cfg
    d = cfg.d_model
    src_ids = translator.encode([sentence])[0]
    src_tokens = [translator.src_vocab.itos[i] for i in src_ids]
    src = torch.tensor([src_ids], device=translator.device)  # (1, S)
    mask = source_mask(src)  # (1, 1, 1, S)
    s = len(src_ids)

    emit("1. Tokens and ids")
    emit(f"   input: {sentence!r}")
    emit("   tokens: " + " ".join(f"{t}({i})" for t, i in zip(src_tokens, src_ids)))
    unknown = [t for t, i in zip(src_tokens, src_ids) if i == 0]
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

    emit(f"4. Encoder: {len(model.encoder.layers)} layers of self-attention + feed-forward "
         f"({cfg.norm}-norm)")
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

    emit("5. Decoder, one token at a time (greedy), reusing cached keys and values")
    state = start_decoding(model, src, mask)
    last = torch.tensor([BOS_ID], device=translator.device)
    dcfg = translator.config.decode
    limit = max_steps or int(max_output_lengths(mask, dcfg.max_len_a, dcfg.max_len_b,
                                                cfg.max_output_tokens)[0]) + 1  # + <eos>
    out: list[str] = []
    for step in range(limit):
        att = AttentionWeights()
        logits = decode_step(state, last, attention=att)  # (1, V)
        probs = next_token_logprobs(logits).exp()[0]  # (V,)
        cross = att.cross[-1][0, :, -1].mean(0)  # (S,) last layer, mean over heads
        top_src = cross.topk(min(2, s)).indices.tolist()
        top_p, top_i = probs.topk(5)
        prefix = " ".join(["<bos>", *out])
        choice = int(top_i[0])
        word = translator.tgt_vocab.itos[choice]
        emit(f"   step {step}: prefix '{prefix}' | logits {tuple(logits.shape)} | "
             "cross-attention on " + ", ".join(f"{src_tokens[j]} ({cross[j]:.2f})"
                                               for j in top_src))
        emit("     top 5: " + ", ".join(f"{translator.tgt_vocab.itos[i]} {p:.3f}"
                                        for p, i in zip(top_p.tolist(), top_i.tolist()))
             + f" -> choose '{word}'")
        if choice == EOS_ID:
            break
        out.append(word)
        last = torch.tensor([choice], device=translator.device)
    emit(f"6. Output: {translator.detokenize(out)!r}")

    if figures is not None:
        figures = Path(figures)
        figures.mkdir(parents=True, exist_ok=True)
        fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
        image = ax.imshow(model.encoder.pos.table[:50].cpu().numpy(), cmap="RdBu",
                          aspect="auto")
        ax.set_xlabel("dimension")
        ax.set_ylabel("position")
        ax.set_title("positional encoding")
        fig.colorbar(image, ax=ax)
        fig.tight_layout()
        fig.savefig(figures / "positional_encoding.png")
        plt.close(fig)
        for n, w in enumerate(enc_weights):
            for h in range(w.size(0)):
                plot_attention(w[h].cpu(), src_tokens, src_tokens,
                               figures / f"encoder_layer{n}_head{h}.png",
                               f"encoder self-attention, layer {n}, head {h}")
        # Every decoder layer and head: teacher-force the output to get all weights at once.
        out_ids = [translator.tgt_vocab.stoi[t] for t in out]
        tgt_in = torch.tensor([[BOS_ID, *out_ids]], device=translator.device)
        att = AttentionWeights()
        model(src, tgt_in, mask, attention=att)
        rows = [*out, "<eos>"]
        cols_self = ["<bos>", *out]
        for n, (self_w, cross_w) in enumerate(zip(att.decoder_self, att.cross)):
            for h in range(cross_w.size(1)):
                plot_attention(cross_w[0, h].cpu(), rows, src_tokens,
                               figures / f"decoder_layer{n}_head{h}_cross.png",
                               f"decoder cross-attention, layer {n}, head {h}")
                plot_attention(self_w[0, h].cpu(), rows, cols_self,
                               figures / f"decoder_layer{n}_head{h}_self.png",
                               f"decoder self-attention, layer {n}, head {h}")
        emit(f"figures written to {figures}")
    return out
