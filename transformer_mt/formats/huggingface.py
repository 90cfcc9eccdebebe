"""A checkpoint in Hugging Face transformers' format (``mt export --format huggingface``): a
directory that ``AutoModelForSeq2SeqLM.from_pretrained`` and ``AutoTokenizer.from_pretrained``
load with no code of ours.

The architecture is one transformers already has: a post-norm model is a ``MarianMTModel``
(post-norm layers, no final LayerNorm), a pre-norm one a ``PegasusForConditionalGeneration``
(pre-norm layers, a final LayerNorm after each stack; one vocabulary for both sides). Both scale
the embeddings by sqrt(d_model) and add the same sinusoids as ours, but with the sines in the
first half of ``d_model`` where ours interleave sine and cosine: every weight's ``d_model`` axis
is permuted once (:func:`sinusoid_order`), which changes no output. ``<pad>`` and ``<bos>``,
which our search never produces, get a -inf logit bias. The tokenizer is transformers'
``MarianTokenizer`` over the checkpoint's own SentencePiece models and vocabularies (our ids).
Word-level (spaCy) models have no stock tokenizer there and are refused.
"""

from __future__ import annotations

import json
import logging
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from transformer_mt.build import model_from_checkpoint
from transformer_mt.checkpoint import load_checkpoint, subword_models_of
from transformer_mt.config import Config
from transformer_mt.data.vocab import BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, UNK, Vocab
from transformer_mt.errors import MTError
from transformer_mt.fileio import atomic_write_bytes, atomic_write_text
from transformer_mt.formats.ctranslate2 import check_export_target, write_export
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.layers import DecoderLayer, EncoderLayer
from transformer_mt.model.transformer import Transformer
from transformer_mt.packages import imported

log = logging.getLogger(__name__)


def sinusoid_order(d_model: int) -> Tensor:
    """``(D,)``: transformers' ``d_model`` axis in terms of ours. Their position ``j`` holds the
    sine of frequency ``j`` (first half) or the cosine of ``j - D/2`` (second half); ours holds
    them at ``2j`` and ``2(j - D/2) + 1``."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def padding(config: Config) -> tuple[str, int]:
    """The token the export names its padding: ``<pad>``; ``<bos>`` for Pegasus (a pre-norm
    model), whose decoder starts from its padding token in CTranslate2's converter (and in
    Pegasus' own convention). Padding is masked out wherever it is read, so the token that
    pads changes no output, and the decoder starts where ours does."""
    return (PAD, PAD_ID) if config.model.norm == "post" else (BOS, BOS_ID)


def hf_config(config: Config, src_vocab: Vocab, tgt_vocab: Vocab) -> dict[str, Any]:
    """transformers' config of the model (``model_type``: marian or pegasus)."""
    m = config.model
    shared = config.data.shared_vocab
    out = {"model_type": "marian" if m.norm == "post" else "pegasus",
           "architectures": ["MarianMTModel" if m.norm == "post"
                             else "PegasusForConditionalGeneration"],
           "d_model": m.d_model, "encoder_layers": m.n_encoder_layers,
           "decoder_layers": m.n_decoder_layers, "encoder_attention_heads": m.n_heads,
           "decoder_attention_heads": m.n_heads, "encoder_ffn_dim": m.d_ff,
           "decoder_ffn_dim": m.d_ff, "activation_function": m.activation,
           "max_position_embeddings": m.max_positions, "scale_embedding": True,
           "vocab_size": len(src_vocab), "pad_token_id": padding(config)[1],
           "eos_token_id": EOS_ID, "bos_token_id": BOS_ID, "decoder_start_token_id": BOS_ID,
           "forced_eos_token_id": EOS_ID, "tie_word_embeddings": m.tie_embeddings,
           "dropout": m.dropout, "attention_dropout": m.attention_dropout,
           "activation_dropout": m.activation_dropout}
    if m.norm == "post":
        out.update(decoder_vocab_size=len(tgt_vocab), share_encoder_decoder_embeddings=shared)
    else:  # what CTranslate2's converter reads of a Pegasus model (transformers keeps them)
        out.update(normalize_before=True, normalize_embedding=False)
    return out


class _Weights:
    """transformers' state dict being filled: our tensors, their ``d_model`` axis permuted."""

    def __init__(self, d_model: int) -> None:
        self.order = sinusoid_order(d_model)
        self.out: dict[str, Tensor] = {}

    def rows(self, t: Tensor) -> Tensor:  # a residual-stream output
        return t[self.order].clone()

    def cols(self, t: Tensor) -> Tensor:  # a residual-stream input
        return t[:, self.order].clone()

    def linear(self, name: str, weight: Tensor, bias: Tensor | None, into: bool,
               outof: bool) -> None:
        """A linear layer reading the residual stream (``into``) or writing it (``outof``)."""
        w = self.cols(weight) if into else weight.clone()
        self.out[f"{name}.weight"] = self.rows(w) if outof else w
        if bias is not None:
            self.out[f"{name}.bias"] = self.rows(bias) if outof else bias.clone()

    def attention(self, name: str, attn: MultiHeadAttention, d: int) -> None:
        """q, k and v (ours: fused, as qkv or q and kv) and the output projection."""
        if attn.cross:
            parts = [("q", attn.q_proj.weight, attn.q_proj.bias)] + [
                (n, attn.kv_proj.weight[k * d:(k + 1) * d], attn.kv_proj.bias[k * d:(k + 1) * d])
                for k, n in enumerate(("k", "v"))]
        else:
            parts = [(n, attn.qkv_proj.weight[k * d:(k + 1) * d],
                      attn.qkv_proj.bias[k * d:(k + 1) * d]) for k, n in enumerate("qkv")]
        for n, weight, bias in parts:
            self.linear(f"{name}.{n}_proj", weight, bias, into=True, outof=False)
        self.linear(f"{name}.out_proj", attn.out_proj.weight, attn.out_proj.bias, False, True)

    def norm(self, name: str, module: torch.nn.Module) -> None:
        assert isinstance(module, torch.nn.LayerNorm)
        self.out[f"{name}.weight"] = self.rows(module.weight)
        self.out[f"{name}.bias"] = self.rows(module.bias)

    def layer(self, p: str, layer: EncoderLayer | DecoderLayer, d: int) -> None:
        """One encoder or decoder layer: attention(s), feed-forward, their LayerNorms."""
        self.attention(f"{p}.self_attn", layer.self_attn, d)
        self.norm(f"{p}.self_attn_layer_norm", layer.norm1)
        ffn_norm = layer.norm2
        if isinstance(layer, DecoderLayer):
            self.attention(f"{p}.encoder_attn", layer.cross_attn, d)
            self.norm(f"{p}.encoder_attn_layer_norm", layer.norm2)
            ffn_norm = layer.norm3
        self.linear(f"{p}.fc1", layer.ffn.linear1.weight, layer.ffn.linear1.bias, True, False)
        self.linear(f"{p}.fc2", layer.ffn.linear2.weight, layer.ffn.linear2.bias, False, True)
        self.norm(f"{p}.final_layer_norm", ffn_norm)


def hf_state_dict(model: Transformer) -> dict[str, Tensor]:
    """Our weights under transformers' names, their ``d_model`` axis in transformers' order."""
    d = model.cfg.d_model
    w = _Weights(d)
    for side, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        w.out[f"model.{side}.embed_tokens.weight"] = w.cols(stack.embed.weight)
        layers = typing.cast("Sequence[EncoderLayer | DecoderLayer]", stack.layers)
        for i, layer in enumerate(layers):
            w.layer(f"model.{side}.layers.{i}", layer, d)
        if isinstance(stack.norm, torch.nn.LayerNorm):  # pre-norm: a LayerNorm after the stack
            w.norm(f"model.{side}.layer_norm", stack.norm)
    w.out["lm_head.weight"] = w.cols(model.decoder.project.weight)
    bias = torch.zeros(1, model.decoder.project.out_features)
    bias[0, [PAD_ID, BOS_ID]] = -torch.inf  # never produced, as in our search
    w.out["final_logits_bias"] = bias
    if model.encoder.embed is model.decoder.embed:  # one vocabulary: transformers' "shared"
        w.out["model.shared.weight"] = w.out["model.decoder.embed_tokens.weight"]
    return w.out


def _check_exportable(config: Config, ckpt: dict[str, Any]) -> tuple[bytes, bytes]:
    if config.data.tokenizer != "sentencepiece" or subword_models_of(ckpt) is None:
        raise MTError("transformers has no stock tokenizer for a word-level (spaCy) model; "
                      "train with data.tokenizer: sentencepiece to export to Hugging Face")
    if config.model.norm == "pre" and not config.data.shared_vocab:
        raise MTError("a pre-norm model becomes transformers' Pegasus, which has one "
                      "vocabulary for both sides: train with data.shared_vocab: true (or "
                      "model.norm: post, which becomes Marian and keeps two vocabularies)")
    if config.data.lowercase:
        raise MTError("transformers' Marian tokenizer does not lowercase its input; export a "
                      "model trained with data.lowercase: false")
    models = subword_models_of(ckpt)
    assert models is not None
    return models


def export_huggingface(checkpoint: str | Path, out_dir: str | Path,
                       overwrite: bool = False) -> Path:
    """Write ``checkpoint`` as a transformers model directory ``out_dir`` (see the module's
    docstring), with its tokenizer, decoding settings (``generation_config.json``) and a
    model card (README.md); made beside it and renamed into place only when complete."""
    out = check_export_target(checkpoint, out_dir, overwrite)
    ckpt = load_checkpoint(checkpoint)
    model, config, src_vocab, tgt_vocab = model_from_checkpoint(ckpt, checkpoint)
    models = _check_exportable(config, ckpt)
    transformers = imported("transformers", "mt export --format huggingface")
    hf = hf_config(config, src_vocab, tgt_vocab)
    cls = getattr(transformers, hf["architectures"][0])
    hf_model = cls(transformers.AutoConfig.for_model(**hf)).eval()
    missing, unexpected = hf_model.load_state_dict(hf_state_dict(model), strict=False)
    missing = [k for k in missing if "embed_positions" not in k and "embed_tokens" not in k
               and k != "lm_head.weight"]  # tied to the shared or decoder embedding
    if missing or unexpected:
        raise MTError(f"transformers {transformers.__version__} names this model's weights "
                      f"otherwise (missing {missing[:3]}, unexpected {unexpected[:3]}); "
                      "export with a transformers version of 4.45 to 5.x")

    def fill(tmp: Path) -> None:
        hf_model.save_pretrained(tmp)
        shared = config.data.shared_vocab
        for side, model_bytes in zip(("source", "target"), models, strict=True):
            atomic_write_bytes(tmp / f"{side}.spm", model_bytes)
        atomic_write_text(tmp / "vocab.json", _vocab_json(src_vocab))
        if not shared:
            atomic_write_text(tmp / "target_vocab.json", _vocab_json(tgt_vocab))
        tokenizer = {"tokenizer_class": "MarianTokenizer", "source_lang": config.data.src_lang,
                     "target_lang": config.data.tgt_lang, "separate_vocabs": not shared,
                     "unk_token": UNK, "eos_token": EOS, "pad_token": padding(config)[0],
                     "model_max_length": config.model.max_source_tokens}
        atomic_write_text(tmp / "tokenizer_config.json", json.dumps(tokenizer, indent=1))
        atomic_write_text(tmp / "special_tokens_map.json", json.dumps(
            {"unk_token": UNK, "eos_token": EOS, "pad_token": padding(config)[0],
             "bos_token": BOS}))
        atomic_write_text(tmp / "generation_config.json", json.dumps(
            generation_config(config), indent=1))
        atomic_write_text(tmp / "README.md", model_card(config, ckpt, hf["architectures"][0]))

    write_export(out, "huggingface", fill)
    log.info("exported %s to %s (transformers %s, %s)", checkpoint, out,
             transformers.__version__, hf["architectures"][0])
    return out


def _vocab_json(vocab: Vocab) -> str:
    return json.dumps({t: i for i, t in enumerate(vocab.itos)}, ensure_ascii=False)


def generation_config(config: Config) -> dict[str, Any]:
    """Our decoding settings as transformers' generation settings, as near as they go: beam
    size; the length penalty's exponent (ours divides by ((5 + len) / 6) ** alpha, theirs by
    len ** alpha); no output longer than the model's positions (ours: a * source + b)."""
    d = config.decode
    return {"decoder_start_token_id": BOS_ID, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
            "pad_token_id": padding(config)[1],
            "forced_eos_token_id": EOS_ID, "num_beams": d.beam_size,
            "length_penalty": d.alpha, "early_stopping": True,
            "no_repeat_ngram_size": d.no_repeat_ngram_size,
            "max_length": config.model.max_positions}


def model_card(config: Config, ckpt: dict[str, Any], architecture: str) -> str:
    """README.md: what the model is, how it was trained, what it scored, how to use it."""
    m, data, progress = config.model, config.data, ckpt.get("progress", {})
    scores = {k: v for k, v in progress.items() if "bleu" in k or "chrf" in k}
    corpora = "; ".join(c.describe() for c in data.training_corpora())
    return f"""---
license: # your choice: the training data's terms apply
language: [{data.src_lang}, {data.tgt_lang}]
library_name: transformers
pipeline_tag: translation
tags: [translation, transformer_mt]
---

# {config.name}: {data.src_lang} → {data.tgt_lang}

A Transformer trained from scratch with transformer_mt, exported with `mt export --format
huggingface` as a `{architecture}` ({m.norm}-norm; the same computation, checked within 1e-4).

- Data: {corpora}; SentencePiece {data.subword}, {data.vocab_size} pieces
  ({'one vocabulary for both sides' if data.shared_vocab else 'a vocabulary per side'}).
- Model: d_model {m.d_model}, {m.n_heads} heads, {m.n_encoder_layers}+{m.n_decoder_layers}
  layers, feed-forward {m.d_ff}, {m.activation}, up to {m.max_positions} positions.
- Training: step {progress.get("step", "?")}; {json.dumps(scores) if scores else "no scores"}
  recorded in the checkpoint.

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained("THIS_DIR")
model = AutoModelForSeq2SeqLM.from_pretrained("THIS_DIR")
batch = tokenizer(["..."], return_tensors="pt", padding=True)
print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))
```

Decoding here differs from `mt translate` where transformers has no equivalent: its
length penalty divides by `len ** alpha` (ours by `((5 + len) / 6) ** alpha`), and its output
length is capped by `max_length` (ours by `a * source length + b`). Greedy decoding gives the
same translations as `mt translate --beam-size 1` within those limits, and so does beam search
without a length penalty.
"""
