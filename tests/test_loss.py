"""The model's loss: the chunked projection + label-smoothed cross-entropy, and bf16 training."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.test_model import make_model
from transformer_mt.data.batch import Batch, source_mask
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.model.loss import label_smoothed_cross_entropy


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
            loss = model(src, tgt_in, source_mask(src), tgt_out, 0.1)
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters()]

    loss32, grads32 = step(None)
    loss16, grads16 = step(torch.bfloat16)
    assert loss16 == pytest.approx(loss32, rel=1e-2)
    cosines = [F.cosine_similarity(g16.flatten(), g32.flatten(), dim=0).item()
               for g32, g16 in zip(grads32, grads16)]
    assert min(cosines) > 0.99, cosines


def test_model_loss_equals_cross_entropy_of_its_logits():
    """``model.loss(batch)`` is the library's cross-entropy of ``model(...)``'s logits."""
    model = make_model()
    src = [torch.randint(4, 30, (n,)) for n in (5, 8, 3)]
    tgt = [torch.randint(4, 25, (n,)) for n in (6, 2, 4)]
    batch = Batch.from_ids(src, tgt)
    logits = model(batch.src, batch.tgt_in, batch.src_mask)  # (B, T, V)
    for eps in (0.0, 0.1):
        ref = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(),
                              ignore_index=PAD_ID, label_smoothing=eps, reduction="sum")
        assert model.loss(batch, eps).item() == pytest.approx(ref.item(), rel=1e-5)
