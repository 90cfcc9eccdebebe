"""The way back from Hugging Face transformers (``mt import``): a Marian or Pegasus model with
its MarianTokenizer files, such as an OPUS-MT model, as a checkpoint of ours: our specials
first in each vocabulary, the ``d_model`` axis back in our interleaved sinusoid order
(``huggingface.py``, whose export this undoes), the SentencePiece models carried inside."""

from __future__ import annotations

import json
import logging
import typing
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from transformer_mt.config import Config
from transformer_mt.data.vocab import BOS, EOS, PAD, UNK, Vocab
from transformer_mt.errors import MTError
from transformer_mt.formats.huggingface import sinusoid_order
from transformer_mt.packages import imported

log = logging.getLogger(__name__)

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}


def import_huggingface(directory: str | Path, out: str | Path, src_lang: str | None = None,
                       tgt_lang: str | None = None, overwrite: bool = False) -> Path:
    """A transformers Marian or Pegasus model with its MarianTokenizer files (an OPUS-MT model,
    say) as a checkpoint of ours, which ``mt translate``, ``mt serve``, ``mt evaluate`` and
    fine-tuning (``train.init_from``) take. The vocabularies are reordered so that our specials
    come first (``<unk> <pad> <bos> <eos>``; the decoder's start token is our ``<bos>``), and
    the ``d_model`` axis goes back to our interleaved sinusoid."""
    src, out = Path(directory), Path(out)
    for path in (out, out.with_suffix(".finetune.yaml")):  # both are written
        if path.exists() and not overwrite:
            raise MTError(f"'{path}' exists; pass --overwrite to replace it, or name a new "
                          "checkpoint")
    transformers = imported("transformers", "mt import")
    hf, files = _read_hf(src, transformers)
    if out.resolve().parent == src.resolve():
        raise MTError(f"'{out}' is in the model directory mt import reads; write the "
                      "checkpoint elsewhere")
    config = _our_config(hf, files["tokenizer"], src_lang, tgt_lang)
    generation = files["generation"]  # the model's beam and length penalty, as near as they go
    beams = generation.get("num_beams")
    if isinstance(beams, int) and 1 <= beams <= 1000:  # decode.beam_size's range
        config.decode.beam_size = beams
    if isinstance(generation.get("length_penalty"), (int, float)):
        config.decode.alpha = min(max(float(generation["length_penalty"]), 0.0), 10.0)
    model_hf, loading = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        src, output_loading_info=True)
    missing = [k for k in loading["missing_keys"] if k != "final_logits_bias"]
    if missing:  # transformers would have filled them at random
        raise MTError(f"'{src}' lacks {len(missing)} of the model's weights ({missing[0]}, ...): "
                      "its weights file is not of this config.json")
    model_hf.eval()
    state = {k: v.detach().float() for k, v in model_hf.state_dict().items()}
    bias = state.pop("final_logits_bias", torch.zeros(1))[0]
    for name, size in (("vocab", "vocab_size"), ("target_vocab", "decoder_vocab_size")):
        expected = hf.get(size) or hf["vocab_size"]
        if files[name] is not None and len(files[name]) != expected:
            raise MTError(f"'{src}' has {len(files[name]):,} tokens in its {name}.json but "
                          f"{expected:,} in the model (config.json's {size})")
    src_order, src_itos = _our_order(files["vocab"], hf)
    tgt_order, tgt_itos = (_our_order(files["target_vocab"], hf) if files["target_vocab"]
                           else (src_order, src_itos))
    barred = bias[tgt_order][4:]
    if bool((barred != 0).any()):
        raise MTError(f"'{src}' biases its output logits (final_logits_bias), which our model "
                      "has no place for; only -inf on special tokens can be imported")
    from transformer_mt.build import build_model
    from transformer_mt.checkpoint import make_checkpoint, save_checkpoint

    src_vocab, tgt_vocab = Vocab(src_itos), Vocab(tgt_itos)
    ours = build_model(config, src_vocab, tgt_vocab)
    ours.load_state_dict(_our_state(state, config, src_order, tgt_order))
    models = (files["source.spm"], files["target.spm"])
    ckpt = make_checkpoint(ours, config, src_vocab, tgt_vocab,
                           {"step": 0, "imported_from": str(src)}, subword_models=models)
    save_checkpoint(ckpt, out)
    log.info("imported %s (%s) into %s", src, hf["model_type"], out)
    return out


def _read_hf(directory: Path, transformers: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """transformers' config (a dict) and the tokenizer's files, checked."""
    return _read_config(directory, transformers), _read_tokenizer(directory)


def _read_config(directory: Path, transformers: Any) -> dict[str, Any]:
    """``config.json`` as transformers reads it, once it says it is a model mt import takes."""
    if not (directory / "config.json").is_file():
        hub = not directory.exists() and len(directory.parts) == 2  # a model's name there
        raise MTError(f"'{directory}' is not a transformers model directory (no config.json)" + (
            f"; mt import reads a downloaded one: hf download {directory} "
            f"--local-dir {directory.name}, then mt import {directory.name} ..." if hub else ""))
    try:  # what it says it is, before transformers reads it (a CTranslate2 model says none)
        kind = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise MTError(f"'{directory / 'config.json'}' is not JSON") from None
    if not isinstance(kind, dict) or kind.get("model_type") not in ("marian", "pegasus"):
        what = kind.get("model_type") if isinstance(kind, dict) else None
        raise MTError(f"'{directory}' holds {f'a {what!r}' if what else 'no transformers'} "
                      "model; mt import takes Marian (OPUS-MT) and Pegasus translation models")
    if "decoder_start_token_id" in kind and kind["decoder_start_token_id"] is None:
        raise MTError(f"'{directory}/config.json' says no decoder_start_token_id: which token "
                      "the decoder starts from is unknown; set it (Marian: pad_token_id)")
    try:
        hf = transformers.AutoConfig.from_pretrained(directory).to_dict()
    except (ValueError, TypeError) as exc:
        raise MTError(f"transformers cannot read '{directory}/config.json': "
                      f"{str(exc).strip().splitlines()[-1]}") from None
    return hf


def _read_tokenizer(directory: Path) -> dict[str, Any]:
    """MarianTokenizer's files (and generation_config.json), read and checked."""
    files: dict[str, Any] = {"tokenizer": {}, "target_vocab": None, "generation": {}}
    for key, name in (("tokenizer", "tokenizer_config.json"),
                      ("generation", "generation_config.json")):
        if (directory / name).is_file():
            files[key] = json.loads((directory / name).read_text(encoding="utf-8"))
    for name in ("source.spm", "target.spm", "vocab.json"):
        if not (directory / name).is_file():
            raise MTError(f"'{directory}' has no {name}: mt import takes models with "
                          "transformers' MarianTokenizer (source.spm, target.spm, vocab.json)")
        files[name] = (directory / name).read_bytes()
    files["vocab"] = json.loads(files["vocab.json"])
    if files["tokenizer"].get("separate_vocabs"):
        if not (directory / "target_vocab.json").is_file():
            raise MTError(f"'{directory}' has separate vocabularies (tokenizer_config.json) "
                          "but no target_vocab.json")
        files["target_vocab"] = json.loads((directory / "target_vocab.json").read_text(
            encoding="utf-8"))
    return files


def _our_config(hf: dict[str, Any], tokenizer: dict[str, Any], src_lang: str | None,
                tgt_lang: str | None) -> Config:
    """Our config of the model: its sizes, and SentencePiece for both sides."""
    from transformer_mt.config.data import CorpusConfig

    if hf["encoder_attention_heads"] != hf["decoder_attention_heads"] or \
            hf["encoder_ffn_dim"] != hf["decoder_ffn_dim"]:
        raise MTError("the encoder and decoder differ in heads or feed-forward size; our "
                      "model has one of each")
    if not hf.get("scale_embedding") or hf["activation_function"] not in ACTIVATIONS:
        raise MTError(f"the model's embeddings are not scaled by sqrt(d_model), or its "
                      f"activation ({hf['activation_function']}) is not relu, gelu or swish: "
                      "our model has no equivalent")
    src_lang = src_lang or tokenizer.get("source_lang")
    tgt_lang = tgt_lang or tokenizer.get("target_lang")
    if not src_lang or not tgt_lang:
        raise MTError("the model does not say its languages: pass --src-lang and --tgt-lang")
    config = Config(name="imported")
    m, d = config.model, config.data
    m.d_model, m.n_heads, m.d_ff = hf["d_model"], hf["encoder_attention_heads"], hf[
        "encoder_ffn_dim"]
    m.n_encoder_layers, m.n_decoder_layers = hf["encoder_layers"], hf["decoder_layers"]
    m.activation = typing.cast(typing.Any, ACTIVATIONS[hf["activation_function"]])
    m.norm = "post" if hf["model_type"] == "marian" else "pre"
    m.max_positions = hf["max_position_embeddings"]
    m.tie_embeddings = bool(hf.get("tie_word_embeddings", True))
    m.dropout, m.attention_dropout = hf.get("dropout", 0.1), hf.get("attention_dropout", 0.0)
    m.activation_dropout = hf.get("activation_dropout", 0.0)
    d.src_lang, d.tgt_lang, d.tokenizer = src_lang[:2], tgt_lang[:2], "sentencepiece"
    d.shared_vocab = not tokenizer.get("separate_vocabs") and hf.get(
        "share_encoder_decoder_embeddings", True)
    unrecorded = "(imported: the training data is not recorded)"
    d.train, d.valid = CorpusConfig(tsv=unrecorded), CorpusConfig(tsv=unrecorded)
    config.validate()
    return config


def _our_order(vocab: dict[str, int], hf: dict[str, Any]) -> tuple[Tensor, list[str]]:
    """Their ids in our order (``(V,)``: ours ``i`` is theirs ``order[i]``) and our tokens:
    our specials first (``<bos>`` is their decoder's start token), then the rest in their
    order."""
    # <pad> by name where the vocabulary has it (our Pegasus export pads with <bos>)
    unk, pad, eos = vocab.get(UNK, 1), vocab.get(PAD, hf["pad_token_id"]), hf["eos_token_id"]
    start = hf.get("decoder_start_token_id", pad)
    if start is None or start not in vocab.values():
        start = pad
    specials = [unk, pad, start, eos]
    rest = sorted((i, t) for t, i in vocab.items() if i not in specials)
    order = torch.tensor(specials + [i for i, _ in rest])
    return order, [UNK, PAD, BOS, EOS] + [t for _, t in rest]


def _our_state(hf: dict[str, Tensor], config: Config, src_order: Tensor,
               tgt_order: Tensor) -> dict[str, Tensor]:
    """Our state dict from transformers' (see :func:`hf_state_dict`, which this undoes)."""
    d = config.model.d_model
    inv = torch.argsort(sinusoid_order(d))
    out: dict[str, Tensor] = {}

    def linear(ours: str, theirs: list[str], into: bool, outof: bool) -> None:
        w = torch.cat([hf[f"{n}.weight"] for n in theirs])
        b = torch.cat([hf[f"{n}.bias"] for n in theirs])
        w = w[:, inv] if into else w
        out[f"{ours}.weight"], out[f"{ours}.bias"] = (w[inv], b[inv]) if outof else (w, b)

    def norm(ours: str, theirs: str) -> None:
        out[f"{ours}.weight"], out[f"{ours}.bias"] = hf[f"{theirs}.weight"][inv], hf[
            f"{theirs}.bias"][inv]

    for side, n, order in (("encoder", config.model.n_encoder_layers, src_order),
                           ("decoder", config.model.n_decoder_layers, tgt_order)):
        out[f"{side}.embed.embedding.weight"] = hf[f"model.{side}.embed_tokens.weight"][
            order][:, inv]
        for i in range(n):
            ours, theirs = f"{side}.layers.{i}", f"model.{side}.layers.{i}"
            linear(f"{ours}.self_attn.qkv_proj", [f"{theirs}.self_attn.{x}_proj" for x in "qkv"],
                   True, False)
            linear(f"{ours}.self_attn.out_proj", [f"{theirs}.self_attn.out_proj"], False, True)
            norm(f"{ours}.norm1", f"{theirs}.self_attn_layer_norm")
            last = "norm2"
            if side == "decoder":
                cross = f"{theirs}.encoder_attn"
                linear(f"{ours}.cross_attn.q_proj", [f"{cross}.q_proj"], True, False)
                linear(f"{ours}.cross_attn.kv_proj", [f"{cross}.k_proj", f"{cross}.v_proj"],
                       True, False)
                linear(f"{ours}.cross_attn.out_proj", [f"{cross}.out_proj"], False, True)
                norm(f"{ours}.norm2", f"{cross}_layer_norm")
                last = "norm3"
            linear(f"{ours}.ffn.linear1", [f"{theirs}.fc1"], True, False)
            linear(f"{ours}.ffn.linear2", [f"{theirs}.fc2"], False, True)
            norm(f"{ours}.{last}", f"{theirs}.final_layer_norm")
        if config.model.norm == "pre":
            norm(f"{side}.norm", f"model.{side}.layer_norm")
    out["decoder.project.weight"] = hf["lm_head.weight"][tgt_order][:, inv]
    if config.model.tie_embeddings and not torch.equal(out["decoder.project.weight"],
                                                       out["decoder.embed.embedding.weight"]):
        raise MTError("the model ties its output projection to the target embedding, but "
                      "their weights differ; it cannot be imported as tied")
    return out
