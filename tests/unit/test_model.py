from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.toy import CFG, make_model
from transformer_mt.config import ModelConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.model.attention import MultiHeadAttention, causal_mask, plain_attention
from transformer_mt.model.embedding import PositionalEncoding, TokenEmbedding
from transformer_mt.model.layers import DecoderLayer, EncoderLayer
from transformer_mt.model.transformer import AttentionWeights


def test_positional_encoding_equals_formula():
    d, n = 16, 50
    pe = PositionalEncoding(d, n, dropout=0.0)
    x = torch.zeros(1, n, d)
    out = pe(x)[0]
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / (10000 ** (2 * i / d))
            assert out[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert out[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)
    assert torch.equal(pe(x[:, :3], offset=5)[0], out[5:8])  # offsets continue the table


def test_embedding_is_scaled_by_sqrt_d_model():
    emb = TokenEmbedding(10, 16, PAD_ID)
    ids = torch.tensor([[4, 5]])
    assert torch.allclose(emb(ids), emb.embedding.weight[ids] * 4.0)






def test_forward_shapes_and_tied_projection():
    model = make_model()
    src = torch.randint(4, 30, (2, 9))
    tgt = torch.randint(4, 25, (2, 5))
    logits = model(src, tgt, source_mask(src))
    assert logits.shape == (2, 5, 25)
    assert model.decoder.project.weight is model.decoder.embed.weight
    untied = make_model(tie_embeddings=False)
    assert untied.decoder.project.weight is not untied.decoder.embed.weight


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_causal_mask_hides_the_future(norm):
    model = make_model(norm=norm)
    src = torch.randint(4, 30, (1, 6))
    tgt = torch.randint(4, 25, (1, 8))
    changed = tgt.clone()
    changed[0, 5] = (tgt[0, 5] + 1 - 4) % 21 + 4
    a = model(src, tgt, source_mask(src))
    b = model(src, changed, source_mask(src))
    assert torch.allclose(a[:, :5], b[:, :5], atol=1e-6)  # positions before 5: unchanged
    assert not torch.allclose(a[:, 5:], b[:, 5:], atol=1e-4)  # position 5 on: changed


def test_extra_source_padding_changes_nothing():
    model = make_model()
    src = torch.randint(4, 30, (1, 6))
    tgt = torch.randint(4, 25, (1, 5))
    padded = torch.cat([src, torch.full((1, 4), PAD_ID)], dim=1)
    a = model(src, tgt, source_mask(src))
    b = model(padded, tgt, source_mask(padded))
    assert torch.allclose(a, b, atol=1e-5)


def test_target_padding_does_not_change_real_positions():
    model = make_model()
    src = torch.randint(4, 30, (1, 6))
    tgt = torch.randint(4, 25, (1, 5))
    padded = torch.cat([tgt, torch.full((1, 3), PAD_ID)], dim=1)
    a = model(src, tgt, source_mask(src))
    b = model(src, padded, source_mask(src))
    assert torch.allclose(a, b[:, :5], atol=1e-5)


def test_attention_weights_are_returned_when_asked():
    model = make_model()
    src = torch.randint(4, 30, (2, 6))
    tgt = torch.randint(4, 25, (2, 4))
    att = AttentionWeights()
    logits = model(src, tgt, source_mask(src), attention=att)
    assert len(att.encoder) == 2 and len(att.cross) == 2
    assert att.cross[0].shape == (2, 4, 4, 6)
    assert torch.allclose(logits, model(src, tgt, source_mask(src)), atol=1e-5)


def test_causal_mask_is_lower_triangular_and_what_sdpa_applies():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False],
                                       [True, True, True]]
    torch.manual_seed(4)
    q, k, v = (torch.randn(2, 2, 5, 4) for _ in range(3))
    by_mask, _ = plain_attention(q, k, v, causal_mask(5))
    by_flag = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(by_mask, by_flag, atol=1e-6)


# ---- parity with torch's reference modules: the same weights give the same outputs ----------


def _copy_self_attention(ours: MultiHeadAttention, ref: torch.nn.MultiheadAttention) -> None:
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.qkv_proj.weight)
        ref.in_proj_bias.copy_(ours.qkv_proj.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)


def test_self_attention_equals_torch_multihead_attention():
    torch.manual_seed(5)
    ours = MultiHeadAttention(32, 4).eval()
    ref = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    _copy_self_attention(ours, ref)
    x = torch.randn(3, 7, 32)
    keep = torch.ones(3, 7, dtype=torch.bool)
    keep[1, 5:] = keep[2, 3:] = False  # padded keys
    for impl in ("sdpa", "plain"):
        ours.impl = impl
        out, weights = ours(x, mask=keep[:, None, None, :], need_weights=True)
        expected, ref_weights = ref(x, x, x, key_padding_mask=~keep, average_attn_weights=False)
        assert torch.allclose(out, expected, atol=1e-5)
        assert torch.allclose(weights, ref_weights, atol=1e-6)
    causal = ~causal_mask(7)  # torch's convention: True = may not attend
    expected, _ = ref(x, x, x, attn_mask=causal, need_weights=False)
    assert torch.allclose(ours(x, is_causal=True)[0], expected, atol=1e-5)


def test_cross_attention_equals_torch_multihead_attention():
    torch.manual_seed(6)
    ours = MultiHeadAttention(32, 4, cross=True).eval()
    ref = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    with torch.no_grad():  # torch's in_proj stacks q, k, v; ours has q and a fused kv
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.kv_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.kv_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    x, memory = torch.randn(2, 4, 32), torch.randn(2, 6, 32)
    keep = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    out, _ = ours(x, memory, mask=keep[:, None, None, :])
    expected, _ = ref(x, memory, memory, key_padding_mask=~keep, need_weights=False)
    assert torch.allclose(out, expected, atol=1e-5)


def _torch_layer(ours: EncoderLayer | DecoderLayer, cfg: ModelConfig) -> torch.nn.Module:
    """torch's reference layer of the same kind, holding ``ours``'s weights."""
    kind = (torch.nn.TransformerDecoderLayer if isinstance(ours, DecoderLayer)
            else torch.nn.TransformerEncoderLayer)
    ref = kind(cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=0.0, batch_first=True,
               norm_first=cfg.norm == "pre").eval()
    _copy_self_attention(ours.self_attn, ref.self_attn)
    with torch.no_grad():
        for name in ("linear1", "linear2"):
            getattr(ref, name).load_state_dict(getattr(ours.ffn, name).state_dict())
        for name in ("norm1", "norm2", "norm3"):
            if hasattr(ours, name):
                getattr(ref, name).load_state_dict(getattr(ours, name).state_dict())
        if isinstance(ours, DecoderLayer):  # torch stacks q, k, v; ours has q and a fused kv
            cross = ref.multihead_attn
            cross.in_proj_weight.copy_(torch.cat([ours.cross_attn.q_proj.weight,
                                                  ours.cross_attn.kv_proj.weight]))
            cross.in_proj_bias.copy_(torch.cat([ours.cross_attn.q_proj.bias,
                                                ours.cross_attn.kv_proj.bias]))
            cross.out_proj.load_state_dict(ours.cross_attn.out_proj.state_dict())
    return ref


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_encoder_layer_equals_torch_transformer_encoder_layer(norm):
    torch.manual_seed(7)
    cfg = ModelConfig(**{**CFG.__dict__, "norm": norm})
    ours = EncoderLayer(cfg).eval()
    ref = _torch_layer(ours, cfg)
    x = torch.randn(2, 6, cfg.d_model)
    keep = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    out, _ = ours(x, keep[:, None, None, :])
    expected = ref(x, src_key_padding_mask=~keep)
    assert torch.allclose(out[keep], expected[keep], atol=1e-5)  # torch may zero padded rows


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_layer_equals_torch_transformer_decoder_layer(norm):
    torch.manual_seed(8)
    cfg = ModelConfig(**{**CFG.__dict__, "norm": norm})
    ours = DecoderLayer(cfg).eval()
    ref = _torch_layer(ours, cfg)
    x, memory = torch.randn(2, 5, cfg.d_model), torch.randn(2, 6, cfg.d_model)
    keep = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    out, _, _ = ours(x, memory, keep[:, None, None, :])
    expected = ref(x, memory, tgt_mask=~causal_mask(5), memory_key_padding_mask=~keep)
    assert torch.allclose(out, expected, atol=1e-5)
