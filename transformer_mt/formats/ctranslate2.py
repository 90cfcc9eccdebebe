"""Export a checkpoint to CTranslate2, OpenNMT's C++ inference engine, and translate with it.

The model maps onto CTranslate2's ``TransformerSpec`` layer by layer: pre- or post-norm, ReLU or
GELU, embeddings scaled by sqrt(d_model), the checkpoint's own sinusoidal table as the position
encodings, the fused query/key/value projection of self-attention as ``linear[0]``, the query and
the fused key/value projections of cross-attention as ``linear[0]`` and ``linear[1]``, the
(tied) output projection, LayerNorm epsilon 1e-5, ``<bos>``/``<eos>``/``<unk>`` as the special
tokens, and ``<eos>`` appended to every source. ``tests/integration/test_export.py`` checks that
the engine scores translations with our log-probabilities and decodes greedily as we do.

Needs the optional ``ctranslate2`` package: ``pip install 'transformer_mt[ct2]'``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from transformer_mt.build import model_from_checkpoint
from transformer_mt.checkpoint import load_checkpoint, subword_models_of
from transformer_mt.data.vocab import BOS, BOS_ID, EOS, PAD_ID, UNK
from transformer_mt.errors import MTError
from transformer_mt.fileio import atomic_write_bytes, atomic_write_text, beside
from transformer_mt.manifest import Manifest
from transformer_mt.model.layers import DecoderLayer, EncoderLayer
from transformer_mt.model.transformer import Decoder, Encoder
from transformer_mt.packages import imported

log = logging.getLogger(__name__)

LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, which the model uses
CONFIG_NAME = "transformer_mt.json"  # our config, beside the engine's files


def require_ctranslate2() -> Any:
    return imported("ctranslate2", "CTranslate2 models")


EXPORT_KINDS = ("ctranslate2", "huggingface")  # the formats of mt export (manifests' kinds)
# what an export directory of a version without manifests holds (CTranslate2's files and ours);
# nothing else is ever replaced
EXPORT_FILES = frozenset({"model.bin", "config.json", "shared_vocabulary.json",
                          "source_vocabulary.json", "target_vocabulary.json", CONFIG_NAME,
                          "source.spm", "target.spm"})


def is_export(directory: Path) -> bool:
    """Whether ``directory`` holds an earlier export and nothing else: every entry a regular
    file its manifest lists (an export of a version without manifests: our file names, each a
    regular file)."""
    names = [p.name for p in directory.iterdir()]
    manifest = Manifest(directory, EXPORT_KINDS[0])
    if manifest.exists():  # an export of either format (else its manifest says what it is)
        found = manifest.kind_found()
        return not Manifest(directory, found if found in EXPORT_KINDS
                            else EXPORT_KINDS[0]).foreign(names)
    return ({"model.bin", CONFIG_NAME} <= set(names) <= EXPORT_FILES
            and all(stat.S_ISREG((directory / n).lstat().st_mode) for n in names))


def check_export_target(checkpoint: str | Path, out_dir: str | Path, overwrite: bool) -> Path:
    """``out_dir``, once it is known that writing it loses nothing: it does not exist, is an
    empty directory, or (with ``overwrite``) holds an earlier export and nothing else; and it
    does not hold the checkpoint."""
    out = Path(out_dir)
    where = Path(checkpoint).resolve()
    if where == out.resolve() or out.resolve() in where.parents:
        raise MTError(f"'{out}' holds the checkpoint '{checkpoint}'; export into a new directory, "
                      "e.g. mt export CKPT ct2-model")
    if out.resolve() == Path.cwd() or out.resolve() in Path.cwd().parents:
        raise MTError(f"'{out_dir}' is the current directory (or holds it); export into a new "
                      "directory, e.g. mt export CKPT ct2-model")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise MTError(f"'{out}' exists and is not a directory; export into a new directory")
    if out.is_dir() and any(out.iterdir()):
        if not is_export(out):
            raise MTError(f"'{out}' exists and holds files that are not an export "
                          f"({', '.join(sorted(p.name for p in out.iterdir())[:3])}, ...); "
                          "export into a new directory (nothing there is ever replaced)")
        if not overwrite:
            raise MTError(f"'{out}' holds an earlier export; pass --overwrite to replace it, or "
                          "export into a new directory")
    return out


def export_ctranslate2(checkpoint: str | Path, out_dir: str | Path,
                       quantization: str | None = None, overwrite: bool = False) -> Path:
    """Convert ``checkpoint`` into a CTranslate2 model directory ``out_dir``: written into a
    new directory beside it, renamed into place only when complete. A target that exists is
    replaced only if it is an earlier export and ``overwrite`` is given (or it is empty)."""
    out = check_export_target(checkpoint, out_dir, overwrite)
    ct2 = require_ctranslate2()
    from ctranslate2.converters import Converter
    from ctranslate2.specs import common_spec, transformer_spec

    ckpt = load_checkpoint(checkpoint)
    model, config, src_vocab, tgt_vocab = model_from_checkpoint(ckpt, checkpoint)
    cfg = config.model
    activation = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                  "silu": common_spec.Activation.SWISH}[cfg.activation]
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.n_encoder_layers, cfg.n_decoder_layers), cfg.n_heads,
        pre_norm=cfg.norm == "pre", activation=activation,
        alignment_heads=cfg.n_heads)  # return_attention: the last layer's heads averaged
    _set_stack(spec.encoder, model.encoder)
    _set_stack(spec.decoder, model.decoder)
    spec.decoder.projection.weight = _array(model.decoder.project.weight)
    # <pad> and <bos> are never produced, as in our search, by any caller (argos-translate too)
    bias = torch.zeros(model.decoder.project.out_features)
    bias[[PAD_ID, BOS_ID]] = -torch.inf
    spec.decoder.projection.bias = _array(bias)
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = UNK, BOS, EOS
    spec.config.decoder_start_token = BOS
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(list(src_vocab.itos))
    spec.register_target_vocabulary(list(tgt_vocab.itos))

    class _FromSpec(Converter):
        def _load(self) -> Any:
            return spec

    def fill(tmp: Path) -> None:
        _FromSpec().convert(str(tmp), quantization=quantization, force=True)  # our own dir
        # what translating needs besides the weights: tokenizer, languages, decoding settings
        atomic_write_text(tmp / CONFIG_NAME, json.dumps(config.to_dict(), indent=1) + "\n")
        models = subword_models_of(ckpt)
        for side, model_bytes in zip(("source", "target"), models, strict=True) if models else ():
            atomic_write_bytes(tmp / f"{side}.spm", model_bytes)

    write_export(out, "ctranslate2", fill)
    log.info("exported %s to %s (CTranslate2 %s)", checkpoint, out, ct2.__version__)
    return out


def write_export(out: Path, kind: str, fill: Callable[[Path], None]) -> None:
    """Make the export directory ``out`` of format ``kind`` (checked by
    :func:`check_export_target`): ``fill`` writes its files into a new directory beside it,
    which a manifest lists and which is renamed into place only when complete (removed if
    anything fails)."""
    with beside(out):
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        fill(tmp)
        Manifest(tmp, kind).record(p.name for p in tmp.iterdir())
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace_dir(new: Path, out: Path) -> None:
    """Put the complete directory ``new`` at ``out`` (an empty directory or an earlier export,
    checked, is moved aside first and removed once ``new`` is in place)."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.{os.getpid()}.old")
        os.replace(out, old)
    try:
        os.replace(new, out)
    except OSError:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _array(t: torch.Tensor) -> Any:
    return t.detach().float().cpu().numpy()


def _linear(spec: Any, linear: torch.nn.Linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def _norm(spec: Any, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _inputs(spec: Any, stack: Encoder | Decoder) -> None:
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _array(stack.embed.weight)
    spec.scale_embeddings = True
    spec.position_encodings.encodings = _array(stack.pos.table)


def _set_stack(spec: Any, stack: Encoder | Decoder) -> None:
    """One encoder or decoder: inputs, final norm, and per layer self-attention, (for the
    decoder) cross-attention, and the feed-forward network, each with its LayerNorm."""
    _inputs(spec, stack)
    if isinstance(stack.norm, torch.nn.LayerNorm):
        _norm(spec.layer_norm, stack.norm)
    layers = typing.cast("Sequence[EncoderLayer | DecoderLayer]", stack.layers)
    for layer_spec, layer in zip(spec.layer, layers, strict=True):
        _linear(layer_spec.self_attention.linear[0], layer.self_attn.qkv_proj)
        _linear(layer_spec.self_attention.linear[1], layer.self_attn.out_proj)
        _norm(layer_spec.self_attention.layer_norm, layer.norm1)
        ffn_norm = layer.norm2
        if isinstance(layer, DecoderLayer):
            _linear(layer_spec.attention.linear[0], layer.cross_attn.q_proj)
            _linear(layer_spec.attention.linear[1], layer.cross_attn.kv_proj)
            _linear(layer_spec.attention.linear[2], layer.cross_attn.out_proj)
            _norm(layer_spec.attention.layer_norm, layer.norm2)
            ffn_norm = layer.norm3
        _linear(layer_spec.ffn.linear_0, layer.ffn.linear1)
        _linear(layer_spec.ffn.linear_1, layer.ffn.linear2)
        _norm(layer_spec.ffn.layer_norm, ffn_norm)
