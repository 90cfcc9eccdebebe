"""R-Drop (``train.rdrop_alpha``, training/loss.py): off, it is today's loss bit for bit; its
KL term is zero where dropout is, and the chunked computation (the two terms and their
gradients from each chunk's logits at once) equals a plain one
(the library's cross-entropy and KL of the whole logits), values and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.helpers import run_cli, tiny_train_args
from tests.toy import make_model
from transformer_mt.checkpoint import load_checkpoint
from transformer_mt.data.batch import Batch
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.training.loss import ModelLoss, label_smoothed_cross_entropy, rdrop_loss

EPS = 0.1


def _batch() -> Batch:
    gen = torch.Generator().manual_seed(3)
    src = [torch.randint(4, 30, (n,), generator=gen) for n in (5, 8, 3)]
    tgt = [torch.randint(4, 25, (n,), generator=gen) for n in (6, 2, 4)]
    return Batch.from_ids(src, tgt)


def _loss_and_grads(model, compute, seed: int = 5) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # the same dropout masks for each computation
    loss = compute()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_alpha_zero_is_the_loss_of_one_pass_bit_for_bit():
    model = make_model(dropout=0.3).train()
    b = _batch()
    one, one_grads = _loss_and_grads(model, lambda: ModelLoss(model)(
        b.src, b.tgt_in, b.src_mask, b.tgt_out, EPS))
    off, off_grads = _loss_and_grads(model, lambda: ModelLoss(model)(
        b.src, b.tgt_in, b.src_mask, b.tgt_out, EPS, 0.0))
    assert torch.equal(one, off)
    assert all(torch.equal(x, y) for x, y in zip(one_grads, off_grads, strict=True))


def test_the_kl_is_zero_without_dropout():
    model = make_model(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0).train()
    b = _batch()
    plain = ModelLoss(model)(b.src, b.tgt_in, b.src_mask, b.tgt_out, EPS)
    both = ModelLoss(model)(b.src, b.tgt_in, b.src_mask, b.tgt_out, EPS, 1.0)
    assert both.item() == pytest.approx(plain.item(), rel=1e-6)  # the same passes, twice
    h = torch.randn(7, 32)
    target = torch.tensor([5, 6, PAD_ID, 7, 8, PAD_ID, 9])
    weight = model.decoder.project.weight
    same = rdrop_loss(torch.cat([h, h]), weight, target, EPS, 5.0, PAD_ID, torch.float32, 12)
    assert same.item() == pytest.approx(label_smoothed_cross_entropy(
        h, weight, target, EPS, PAD_ID, torch.float32, 3).item(), rel=1e-6)  # no KL at all


@pytest.mark.parametrize(("chunk", "dtype"), [(2, None), (1024, None), (8, torch.bfloat16)])
def test_rdrop_equals_a_plain_computation(chunk, dtype, monkeypatch):
    """Two dropout passes side by side, the mean of their label-smoothed cross-entropies
    plus alpha x (KL(p1||p2) + KL(p2||p1)) / 2 over the real tokens, written with the
    library's calls on the whole logits; in fp32, and under bf16 autocast (the logits of bf16
    products, the loss in fp32, each gradient rounded to bf16 for its products)."""
    monkeypatch.setattr("transformer_mt.training.loss.loss_chunk_size", lambda *a: chunk)
    model = make_model(dropout=0.3, attention_dropout=0.1).train()
    b, alpha = _batch(), 0.7

    def plain() -> torch.Tensor:
        src, tgt_in, mask, tgt_out = (torch.cat([x, x]) for x in
                                      (b.src, b.tgt_in, b.src_mask, b.tgt_out))
        logits = model.decoder.project(model.decoder(tgt_in, model.encode(src, mask), mask))
        flat, target = logits.flatten(0, 1), tgt_out.flatten()  # (2N, V), (2N,)
        ce = F.cross_entropy(flat, target, ignore_index=PAD_ID, label_smoothing=EPS,
                             reduction="sum")
        log_p1, log_p2 = F.log_softmax(flat, dim=-1).chunk(2)  # (N, V) each
        keep = (target[:len(log_p1)] != PAD_ID)[:, None]
        kl = (F.kl_div(log_p2, log_p1, reduction="none", log_target=True)  # KL(p1 || p2)
              + F.kl_div(log_p1, log_p2, reduction="none", log_target=True)) * keep
        return ce / 2 + alpha * kl.sum() / 2

    def autocast(compute):
        def run() -> torch.Tensor:
            with torch.autocast("cpu", dtype or torch.float32, enabled=dtype is not None):
                return compute()
        return run

    ours, our_grads = _loss_and_grads(model, autocast(lambda: ModelLoss(model)(
        b.src, b.tgt_in, b.src_mask, b.tgt_out, EPS, alpha)))
    ref, ref_grads = _loss_and_grads(model, autocast(plain))
    if dtype is None:
        assert ours.item() == pytest.approx(ref.item(), rel=1e-5)
        for x, y in zip(our_grads, ref_grads, strict=True):  # fp32, summed in another order
            assert torch.allclose(x, y, rtol=1e-4, atol=1e-6)
    else:  # bf16's rounding, at other points (the plain gradient is rounded per product)
        assert ours.item() == pytest.approx(ref.item(), rel=1e-3)
        for x, y in zip(our_grads, ref_grads, strict=True):
            assert (x - y).abs().max() <= 0.02 * y.abs().max(), (x - y).abs().max()
    one = ModelLoss(model)(b.src, b.tgt_in, b.src_mask, b.tgt_out, EPS)
    model.eval()  # validation: one pass, no term, whatever alpha says
    assert ModelLoss(model)(b.src, b.tgt_in, b.src_mask, b.tgt_out, EPS, alpha).item() == \
        pytest.approx(ModelLoss(model)(b.src, b.tgt_in, b.src_mask, b.tgt_out, EPS).item())
    assert ours.item() != pytest.approx(one.item())  # the term counts in training


def test_a_run_with_rdrop_off_trains_the_same_weights(tmp_path):
    """A config that says ``rdrop_alpha: 0`` trains what one that does not say it trains;
    one with R-Drop on trains, to other weights; a negative alpha is refused in one line."""
    for name, extra in (("plain", ()), ("off", ("train.rdrop_alpha=0",)),
                        ("on", ("train.rdrop_alpha=1.0",))):
        result = run_cli(tiny_train_args(tmp_path / name, *extra))
        assert result.returncode == 0, result.stderr
    plain, off, on = (load_checkpoint(tmp_path / n / "last.pt")["model"]
                      for n in ("plain", "off", "on"))
    assert plain.keys() == off.keys() == on.keys()
    assert all(torch.equal(plain[k], off[k]) for k in plain)
    assert not all(torch.equal(plain[k], on[k]) for k in plain)
    bad = run_cli(tiny_train_args(tmp_path / "bad", "train.rdrop_alpha=-1"))
    assert bad.returncode == 2 and "train.rdrop_alpha" in bad.stderr.strip().splitlines()[-1]
