"""The contract between the reference and its fast paths: each fast path computes what the
reference computes (the library's primitives included), so a reader may trust the reference.
Here the model's and training's (test_decoding_equivalence.py: decoding's):

- attention: the written-out formula equals ``F.scaled_dot_product_attention``;
- the loss training calls (``training/loss.py``: chunked, fused with the projection) equals
  ``F.cross_entropy`` of the reference's logits, values and gradients, and under bf16.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.toy import make_model
from transformer_mt.data.batch import Batch, source_mask
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.model.attention import MultiHeadAttention, plain_attention
from transformer_mt.precision import use_precision_policy
from transformer_mt.training.loss import ModelLoss, label_smoothed_cross_entropy


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
    model = use_precision_policy(make_model(dropout=0.0))
    training_loss = ModelLoss(model)
    model.train()
    src = torch.randint(4, 30, (6, 9))
    tgt_in, tgt_out = torch.randint(4, 25, (6, 7)), torch.randint(4, 25, (6, 7))
    tgt_out[0, 5:] = PAD_ID

    def step(dtype):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
            loss = training_loss(src, tgt_in, source_mask(src), tgt_out, 0.1)
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters()]

    loss32, grads32 = step(None)
    loss16, grads16 = step(torch.bfloat16)
    assert loss16 == pytest.approx(loss32, rel=1e-2)
    cosines = [F.cosine_similarity(g16.flatten(), g32.flatten(), dim=0).item()
               for g32, g16 in zip(grads32, grads16, strict=True)]
    assert min(cosines) > 0.99, cosines


def test_the_precision_policy_wraps_the_reference_attention_from_outside():
    """The reference attention calls the library's SDPA as written; the policy makes each
    module of a built model a PolicyAttention, whose bf16 CPU attention is computed in fp32."""
    from transformer_mt.model.attention import MultiHeadAttention
    from transformer_mt.precision import PolicyAttention

    model = make_model(dropout=0.0)
    assert {type(m) for m in model.modules() if isinstance(m, MultiHeadAttention)} == {
        MultiHeadAttention}
    use_precision_policy(model)
    attention = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert len(attention) == 6 and all(type(m) is PolicyAttention for m in attention)
    q, k, v = (torch.randn(2, 4, 5, 8).bfloat16() for _ in range(3))
    out, _ = attention[0].attend(q, k, v, None, False, False)
    fp32 = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert out.dtype == torch.bfloat16 and torch.equal(out, fp32.bfloat16())
    plain, weights = attention[0].attend(q, k, v, None, False, True)  # the weights: reference
    assert weights is not None and torch.allclose(plain.float(), fp32, atol=2e-2)


def test_training_loss_equals_the_reference_loss():
    """What training calls (:class:`ModelLoss`, the chunked loss) equals the reference
    ``model.loss(batch)``, the library's cross-entropy of ``model(...)``'s logits."""
    model = make_model()
    src = [torch.randint(4, 30, (n,)) for n in (5, 8, 3)]
    tgt = [torch.randint(4, 25, (n,)) for n in (6, 2, 4)]
    batch = Batch.from_ids(src, tgt)
    logits = model(batch.src, batch.tgt_in, batch.src_mask)  # (B, T, V)
    for eps in (0.0, 0.1):
        ref = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(),
                              ignore_index=PAD_ID, label_smoothing=eps, reduction="sum")
        assert model.loss(batch, eps).item() == pytest.approx(ref.item(), rel=1e-6)
        fast = ModelLoss(model)(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out, eps)
        assert fast.item() == pytest.approx(ref.item(), rel=1e-5)


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
