from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_mt.config import ModelConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.model.attention import MultiHeadAttention, plain_attention
from transformer_mt.model.embedding import PositionalEncoding, TokenEmbedding
from transformer_mt.model.transformer import Attention, Transformer
from transformer_mt.train.loss import label_smoothed_cross_entropy

CFG = ModelConfig(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                  dropout=0.0, max_positions=64)


def make_model(**changes) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**CFG.__dict__, **changes})
    return Transformer(cfg, 30, 25).eval()


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


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_equals_plain_math(causal):
    torch.manual_seed(1)
    q, k, v = (torch.randn(3, 4, 6, 8) for _ in range(3))
    mask = None if causal else torch.rand(3, 1, 1, 6) > 0.3
    if mask is not None:
        mask[..., 0] = True  # every query sees at least one key
    ref, weights = plain_attention(q, k, v, mask, causal)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    assert torch.allclose(out, ref, atol=1e-5)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 4, 6))
    if causal:
        assert (weights.triu(1) == 0).all()


def test_multihead_attention_paths_agree():
    torch.manual_seed(2)
    sdpa = MultiHeadAttention(32, 4)
    plain = MultiHeadAttention(32, 4, impl="plain")
    plain.load_state_dict(sdpa.state_dict())
    x = torch.randn(2, 7, 32)
    a, _ = sdpa(x, is_causal=True)
    b, w = plain(x, is_causal=True, need_weights=True)
    assert torch.allclose(a, b, atol=1e-5)
    assert w.shape == (2, 4, 7, 7)


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
    att = Attention()
    logits = model(src, tgt, source_mask(src), attention=att)
    assert len(att.encoder) == 2 and len(att.cross) == 2
    assert att.cross[0].shape == (2, 4, 4, 6)
    assert torch.allclose(logits, model(src, tgt, source_mask(src)), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk_size", [1024, 7])
def test_label_smoothed_loss_equals_library_call(dtype, chunk_size):
    """The chunked projection + loss equals F.cross_entropy on full logits: value and gradients."""
    torch.manual_seed(3)
    hidden = torch.randn(40, 8)
    weight = torch.randn(17, 8)
    target = torch.randint(0, 17, (40,))
    target[::7] = PAD_ID
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    ours = label_smoothed_cross_entropy(h, w, target, 0.1, PAD_ID, dtype, chunk_size)
    h_ref, w_ref = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    ref = F.cross_entropy(h_ref @ w_ref.T, target, ignore_index=PAD_ID, label_smoothing=0.1,
                          reduction="sum")
    (ours * 0.5).backward()
    (ref * 0.5).backward()
    rel, tol = (1e-5, 1e-4) if dtype == torch.float32 else (1e-2, 5e-2)
    assert ours.dtype == torch.float32
    assert ours.item() == pytest.approx(ref.item(), rel=rel)
    assert h.grad.dtype == w.grad.dtype == torch.float32
    assert torch.allclose(h.grad, h_ref.grad, atol=tol)
    assert torch.allclose(w.grad, w_ref.grad, atol=tol)
    assert h.grad[::7].abs().max() == 0  # padded positions get no gradient


def test_label_smoothed_loss_without_gradients():
    hidden, weight = torch.randn(5, 4), torch.randn(9, 4)
    target = torch.tensor([1, 2, PAD_ID, 3, 4])
    with torch.no_grad():
        value = label_smoothed_cross_entropy(hidden, weight, target, 0.0, PAD_ID)
    ref = F.cross_entropy(hidden @ weight.T, target, ignore_index=PAD_ID, reduction="sum")
    assert value.item() == pytest.approx(ref.item(), rel=1e-5)




def test_bf16_training_step_matches_fp32():
    """Under bf16 autocast on the CPU (attention in fp32, recomputed in the backward, and the
    chunked loss) loss and gradients stay close to an fp32 step."""
    model = make_model(dropout=0.0)
    model.train()
    src = torch.randint(4, 30, (6, 9))
    tgt_in, tgt_out = torch.randint(4, 25, (6, 7)), torch.randint(4, 25, (6, 7))
    tgt_out[0, 5:] = PAD_ID

    def step(dtype):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
            hidden = model(src, tgt_in, source_mask(src), project=False)
        loss = label_smoothed_cross_entropy(hidden.flatten(0, 1), model.decoder.project.weight,
                                            tgt_out.flatten(), 0.1, PAD_ID, dtype, chunk_size=16)
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters()]

    loss32, grads32 = step(None)
    loss16, grads16 = step(torch.bfloat16)
    assert loss16 == pytest.approx(loss32, rel=1e-2)
    cosines = [F.cosine_similarity(g16.flatten(), g32.flatten(), dim=0).item()
               for g32, g16 in zip(grads32, grads16)]
    assert min(cosines) > 0.99, cosines


def test_bf16_weight_copy_computes_what_autocast_computes():
    """Decoding casts the linear weights to bf16 once; under autocast that changes nothing."""
    from transformer_mt.translate import with_bf16_linears

    model = make_model()
    fast = with_bf16_linears(model)
    assert with_bf16_linears(fast) is fast  # converting again is a no-op
    assert fast.decoder.project.weight.dtype == torch.bfloat16
    assert model.decoder.project.weight.dtype == torch.float32  # the original is untouched
    assert fast.decoder.embed.embedding.weight.dtype == torch.float32  # untied in the copy
    src, tgt = torch.randint(4, 30, (3, 8)), torch.randint(4, 25, (3, 6))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(fast(src, tgt, source_mask(src)), model(src, tgt, source_mask(src)))
