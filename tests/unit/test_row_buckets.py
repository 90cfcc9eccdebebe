"""Training on the CPU in bf16 pads each linear layer's rows, and the loss's tokens, to a few
shapes (``training/row_buckets.py``): the model computes what the reference computes, with the
same dropout masks, losses and gradients; in eval mode it is the reference itself."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.toy import make_model
from transformer_mt.data.batch import Batch
from transformer_mt.training.loss import ModelLoss
from transformer_mt.training.row_buckets import LOSS_ROWS, ROWS, RowBucketedLinear, bucket_rows

EPS = 0.1


def _batch(lengths: tuple[int, ...] = (5, 8, 3, 9)) -> Batch:
    gen = torch.Generator().manual_seed(3)
    src = [torch.randint(4, 30, (n,), generator=gen) for n in lengths]
    tgt = [torch.randint(4, 25, (n + 1,), generator=gen) for n in lengths]
    return Batch.from_ids(src, tgt)


def _step(loss: ModelLoss, batch: Batch, alpha: float, dtype: torch.dtype | None):
    """One training step's loss and gradients, with the dropout masks of seed 5."""
    loss.model.zero_grad(set_to_none=True)
    torch.manual_seed(5)
    with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
        value = loss(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out, EPS, alpha)
    value.backward()
    return value.detach(), {n: p.grad.clone() for n, p in loss.model.named_parameters()
                            if p.grad is not None}


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
@pytest.mark.parametrize("alpha", [0.0, 2.5])
def test_a_training_step_computes_what_the_reference_computes(dtype, alpha):
    """The same loss and gradients as the plain model's, with dropout on (the same masks: they
    are drawn for the real rows only), plain and R-Drop, fp32 and under bf16 autocast."""
    model = make_model(dropout=0.3, attention_dropout=0.1, activation_dropout=0.1).train()
    plain = ModelLoss(model)
    bucketed = ModelLoss(copy.deepcopy(model))
    assert bucket_rows(bucketed) == sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert bucketed.row_multiple == LOSS_ROWS
    batch = _batch()
    assert batch.tgt_out.numel() % LOSS_ROWS and batch.src.numel() % ROWS  # both are padded
    ours, our_grads = _step(bucketed, batch, alpha, dtype)
    ref, ref_grads = _step(plain, batch, alpha, dtype)
    tol = 1e-5 if dtype is None else 2e-2  # bf16: products of other shapes round otherwise
    assert ours.item() == pytest.approx(ref.item(), rel=tol)
    assert our_grads.keys() == ref_grads.keys()
    for name, grad in our_grads.items():
        scale = ref_grads[name].abs().max().item() + 1e-6
        assert (grad - ref_grads[name]).abs().max().item() <= tol * 5 * scale, name


def test_the_layer_pads_in_training_only_and_keeps_its_parameters():
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 4)
    state = copy.deepcopy(layer.state_dict())
    ref = copy.deepcopy(layer)
    layer.__class__ = RowBucketedLinear
    assert layer.state_dict().keys() == state.keys()
    x = torch.randn(3, 7, 6)  # 21 rows: padded to ROWS in training
    seen = []
    handle = torch.nn.functional.linear  # what the layer multiplies
    try:
        torch.nn.functional.linear = lambda a, *args: seen.append(a.shape) or handle(a, *args)
        layer.train()
        out = layer(x)
        layer.eval()
        again = layer(x)
    finally:
        torch.nn.functional.linear = handle
    assert seen == [(ROWS, 6), (3, 7, 6)]
    assert out.shape == again.shape == (3, 7, 4)
    assert torch.allclose(out, ref(x), atol=1e-6)
    assert torch.equal(again, ref(x))  # eval mode: the reference's own call
