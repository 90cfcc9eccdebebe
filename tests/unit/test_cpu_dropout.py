"""Dropout in CPU training with its random bits drawn by NumPy (``training/cpu_dropout.py``):
the distribution of ``nn.Dropout``'s masks (each element dropped with probability ``p``, alone,
the others scaled to keep the expectation), governed by torch's generator as ``nn.Dropout`` is,
and ``nn.Dropout`` itself wherever it does not draw a mask."""

from __future__ import annotations

import copy
import logging
import math
import warnings

import pytest
import torch
from torch import nn

from tests.toy import make_model
from transformer_mt.training.cpu_dropout import LEVELS, CPUDropout, draw_bits_with_numpy
from transformer_mt.training.distributed import DistInfo, wrap_for_training
from transformer_mt.training.loss import ModelLoss

SHAPE = (4096, 256)  # a training pass's tokens by d_model


def _dropped(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return layer(x) == 0


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_each_element_is_dropped_with_probability_p_alone(p):
    """Over 1M elements: the fraction dropped is p (within 5 standard deviations), as torch's
    own masks' is; rows and columns alike (no pattern from the 64-bit draws cut in four);
    neighbours and successive calls independent (both dropped: p squared)."""
    torch.manual_seed(0)
    x = torch.ones(SHAPE)
    ours, theirs = _dropped(CPUDropout(p), x), _dropped(nn.Dropout(p), x)
    n = x.numel()
    for mask in (ours, theirs):
        assert abs(mask.float().mean().item() - p) < 5 * math.sqrt(p * (1 - p) / n)
    # each of the 4 elements a 64-bit draw gives, and each column: dropped at rate p
    for lane in ours.view(-1, 4).float().mean(0).tolist():
        assert abs(lane - p) < 5 * math.sqrt(p * (1 - p) / (n / 4))
    columns = ours.float().mean(0)  # (256,): the spread of binomial fractions, no more
    assert columns.var().item() < 1.5 * p * (1 - p) / SHAPE[0]
    again = _dropped(CPUDropout(p), x)
    for both in (ours[:, 1:] & ours[:, :-1], ours & again):
        assert abs(both.float().mean().item() - p * p) < 6 * math.sqrt(p * p / n)


def test_kept_elements_are_scaled_to_keep_the_expectation_and_gradients_follow_the_mask():
    torch.manual_seed(1)
    x = torch.randn(SHAPE, requires_grad=True)
    out = CPUDropout(0.1)(x)
    cut = round(0.1 * LEVELS)
    scale = LEVELS / (LEVELS - cut)
    kept = out != 0
    assert torch.equal(out[kept], x.detach()[kept] * scale)
    assert (1 - cut / LEVELS) * scale == pytest.approx(1.0, abs=1e-12)  # E[out] = x
    grad = torch.randn(SHAPE)
    out.backward(grad)
    assert x.grad is not None
    assert torch.equal(x.grad, torch.where(kept, grad * scale, 0))


def test_torchs_generator_governs_the_masks():
    """The same seed draws the same masks; each call draws new ones (two layers of one step,
    R-Drop's two passes); the generator's state after a call is where the next one starts, so a
    run's saved random state resumes it exactly."""
    layer, x = CPUDropout(0.2), torch.ones(64, 32)
    torch.manual_seed(7)
    first, second = layer(x), layer(x)
    state = torch.get_rng_state()
    third = layer(x)
    torch.manual_seed(7)
    assert torch.equal(layer(x), first) and torch.equal(layer(x), second)
    assert not torch.equal(first, second)
    torch.set_rng_state(state)
    assert torch.equal(layer(x), third)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_where_no_mask_is_drawn_it_is_nn_dropout(dtype):
    """In eval mode the input itself; at p 0 the input, at p 1 zeros (torch's); a bf16 input
    stays bf16, its kept elements scaled in bf16."""
    x = torch.randn(8, 16).to(dtype)
    assert CPUDropout(0.1).eval()(x) is x
    assert torch.equal(CPUDropout(0.0)(x), x)
    assert torch.equal(CPUDropout(1.0)(x), torch.zeros_like(x))
    out = CPUDropout(0.5)(x)
    kept = out != 0
    assert out.dtype == dtype and torch.equal(out[kept], x[kept] * 2.0)


def test_eager_cpu_training_draws_its_masks_with_numpy_and_keeps_the_model_as_it_was():
    """``wrap_for_training`` (eager, CPU) turns every dropout of the model into a
    :class:`CPUDropout` (the embeddings', each sublayer's, the feed-forward's), with the same
    ``p`` and the same state dict; the reference model, built afresh, keeps ``nn.Dropout``."""
    model = make_model(dropout=0.3, activation_dropout=0.1)
    state = copy.deepcopy(model.state_dict())
    dropouts = [(name, m.p) for name, m in model.named_modules() if type(m) is nn.Dropout]
    loss = ModelLoss(model)
    wrap_for_training(loss, DistInfo(), torch.device("cpu"), "fp32", compile_it=False)
    assert [(name, m.p) for name, m in model.named_modules()
            if isinstance(m, CPUDropout)] == dropouts
    assert not any(type(m) is nn.Dropout for m in model.modules())
    assert model.state_dict().keys() == state.keys()
    assert all(torch.equal(t, state[k]) for k, t in model.state_dict().items())
    assert any(type(m) is nn.Dropout for m in make_model(dropout=0.3).modules())
    assert draw_bits_with_numpy(model) == 0  # already done


def test_compiled_cpu_training_keeps_torchs_dropout_and_says_it_is_slower(caplog):
    """``train.compile`` on the CPU compiles the model as it is (``nn.Dropout``, torch's own,
    which inductor fuses) and warns once that it is slower there than eager training; eager
    CPU training does not warn."""
    model = make_model(dropout=0.3)
    with caplog.at_level(logging.WARNING, logger="transformer_mt.training.distributed"):
        wrap_for_training(ModelLoss(make_model()), DistInfo(), torch.device("cpu"), "fp32",
                          compile_it=False)
        assert not caplog.records
        loss = ModelLoss(model)
        with warnings.catch_warnings():  # (torch 2.13's own, importing torch._dynamo)
            warnings.simplefilter("ignore", DeprecationWarning)
            wrapped, ddp = wrap_for_training(loss, DistInfo(), torch.device("cpu"), "fp32",
                                             compile_it=True)
    assert ddp is None and wrapped is not loss and wrapped._orig_mod is loss  # torch.compile's
    assert any(type(m) is nn.Dropout for m in model.modules())
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "train.compile on the CPU"]
