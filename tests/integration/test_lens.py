"""Looking inside the decoder (transformer_mt/inside/lens.py): the logit lens and parts
switched off, on the trained toy model (it reverses sequences), and through ``mt trace``."""

from __future__ import annotations

import itertools

import pytest
import torch

from tests.helpers import run_cli, tiny_train_args
from tests.toy import toy_sources
from transformer_mt.data.batch import source_mask
from transformer_mt.decode.search import greedy, next_token_logprobs
from transformer_mt.errors import MTError
from transformer_mt.inside.lens import PARTS, Switch, lens_log_probs, switched
from transformer_mt.model.layers import residual


def _outputs(model, src):
    return [[2, *h.tokens] for h in greedy(model, src, source_mask(src))]  # <bos> + output


def test_the_last_layer_s_lens_is_the_model_s_distribution_and_the_layers_climb(toy_model):
    src = toy_sources(12)
    written, last_equal = [], []
    for row, out in zip(src, _outputs(toy_model, src), strict=True):
        s, tgt_in = row[None, row != 0], torch.tensor([out])  # (1, S), (1, T)
        lens = lens_log_probs(toy_model, s, tgt_in)  # (L + 1, T, V)
        own = next_token_logprobs(toy_model(s, tgt_in, source_mask(s))[0])  # (T, V)
        last_equal.append(torch.equal(lens[-1], own))  # exactly: the same computation
        target = torch.tensor([*out[1:], 3])  # what was written, then <eos>
        written.append(lens.exp()[:, torch.arange(len(target)), target])  # (L + 1, T)
    assert all(last_equal)
    mean = torch.cat(written, dim=1).mean(dim=1)  # (L + 1,) over every position
    assert len(mean) == toy_model.cfg.n_decoder_layers + 1
    assert all(a < b for a, b in itertools.pairwise(mean)), mean  # rises layer by layer
    assert mean[-1] > 0.9  # the trained model writes what it is sure of


def test_a_scale_of_one_changes_nothing_bit_for_bit(toy_model):
    src = toy_sources(8)
    every = [Switch(part, 1, None if part.endswith("ffn") else 2, 1.0) for part in PARTS]
    tgt_in = torch.tensor([_outputs(toy_model, src[:1])[0]])
    plain = toy_model(src[:1], tgt_in, source_mask(src[:1]))
    plain_hyps = greedy(toy_model, src, source_mask(src))
    with switched(toy_model, every):
        assert torch.equal(toy_model(src[:1], tgt_in, source_mask(src[:1])), plain)
        hyps = greedy(toy_model, src, source_mask(src))
    assert [(h.tokens, h.score) for h in hyps] == [(h.tokens, h.score) for h in plain_hyps]
    # and the hooks are gone after the block: a switch that does change things, undone
    with switched(toy_model, [Switch("cross", 1, 1, 0.0)]):
        assert not torch.equal(toy_model(src[:1], tgt_in, source_mask(src[:1])), plain)
    assert torch.equal(toy_model(src[:1], tgt_in, source_mask(src[:1])), plain)


def test_a_head_switched_off_contributes_nothing(toy_model):
    """Cross-attention with head 3 off is the output projection of the heads' outputs with
    head 3's zeroed, written out; a feed-forward block off leaves its residual unchanged."""
    attn = toy_model.decoder.layers[1].cross_attn
    x, memory = torch.randn(2, 5, 64), torch.randn(2, 7, 64)
    with torch.no_grad(), switched(toy_model, [Switch("cross", 2, 3)]):
        ours, _ = attn(x, memory)
    (q,) = attn.split_heads(attn.q_proj(x), 1)
    k, v = attn.split_heads(attn.kv_proj(memory), 2)
    heads = torch.softmax(q @ k.transpose(-2, -1) / 16 ** 0.5, dim=-1) @ v  # (B, H, T, Dh)
    heads[:, 2] = 0.0
    plain = attn.out_proj(heads.transpose(1, 2).reshape(2, 5, 64))
    assert torch.allclose(ours, plain, atol=1e-6)  # (SDPA against the formula: rounding)
    with torch.no_grad():
        full, _ = attn(x, memory)
    assert not torch.allclose(full, plain, atol=1e-3)  # the head mattered

    layer = toy_model.decoder.layers[0]
    with torch.no_grad(), switched(toy_model, [Switch("decoder-ffn", 1)]):
        out, _ = residual(x, layer.ffn, layer.norm3, layer.dropout, layer.pre_norm)
    assert torch.equal(out, x)


@pytest.mark.parametrize("spec, message", [
    ("cross:2", "name its head"),
    ("decoder-ffn:1:2", "a feed-forward block has no heads"),
    ("attention:1:1", "PART one of encoder-self"),
    ("cross:1:1=x", "cannot read the switch"),
])
def test_a_switch_that_cannot_be_read_is_refused_in_one_line(spec, message):
    with pytest.raises(MTError, match=message):
        Switch.parse(spec)


def test_mt_trace_shows_the_lens_and_a_switched_translation(trained_run):
    run_dir = trained_run[0]
    result = run_cli(["trace", "--checkpoint", str(run_dir / "best.pt"), "--lens", "--switch",
                      "cross:1:1", "--switch", "encoder-ffn:1=0.5", "Ein Hund läuft."])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Logit lens" in out and "embedding | layer 1" in out
    assert "Switched: cross layer 1 head 1 x 0, encoder-ffn layer 1 x 0.5" in out
    assert "as trained:" in out and "scored by the switched model" in out
    for bad, says in (("cross:9:1", "names layer 9; the model has layers 1-"),
                      ("cross:1:99", "names head 99; the model has heads 1-")):
        result = run_cli(["trace", "--checkpoint", str(run_dir / "best.pt"), "--switch", bad,
                          "Ein Hund."])
        assert result.returncode == 2 and says in result.stderr.strip().splitlines()[-1]
        assert "Traceback" not in result.stderr


def test_one_sentence_across_the_training_run(tmp_path):
    """``train.keep_steps`` keeps early checkpoints for good (beside, not among, the
    ``step_*.pt`` that averaging reads); ``mt trace --run-dir`` translates the sentence with
    each kept checkpoint, in the order of their steps."""
    run = tmp_path / "run"
    result = run_cli(tiny_train_args(run, "train.max_steps=8", "train.save_every=8",
                                     "train.eval_every=8", "train.keep_last=1",
                                     "train.keep_steps=[2, 5]"))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in run.glob("*.pt")) == [
        "best.pt", "kept_0000002.pt", "kept_0000005.pt", "last.pt", "step_0000008.pt"]
    result = run_cli(["trace", "--run-dir", str(run), "Ein Hund läuft."])
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines()[1:]]
    assert [(w[1], w[2]) for w in lines] == [("2", "kept_0000002.pt"), ("5", "kept_0000005.pt"),
                                             ("8", "best.pt"), ("8", "step_0000008.pt")]
    assert all("|||" in line for line in result.stdout.splitlines()[1:])
    empty = run_cli(["trace", "--run-dir", str(tmp_path), "Ein Hund."])
    assert empty.returncode == 2 and "holds no checkpoints" in empty.stderr
    bad = run_cli(tiny_train_args(tmp_path / "bad", "train.keep_steps=[0]"))
    assert bad.returncode == 2 and "train.keep_steps" in bad.stderr.strip().splitlines()[-1]
    # two of its checkpoints side by side: each one's translation, and its score of its own and
    # of the other's translation, as mt score computes them (<eos> included: a translation cut
    # at the length limit scores lower than search's running score)
    from transformer_mt.inside.lens import side_by_side
    from transformer_mt.translate import Translator

    early, late = (Translator.load(run / name) for name in ("kept_0000002.pt", "best.pt"))
    sides = side_by_side([early, late], "Ein Hund läuft.")
    for model, side, other in ((early, sides[0], sides[1]), (late, sides[1], sides[0])):
        own = model.translate(["Ein Hund läuft."], nbest=1, beam_size=1)[0][0]
        assert side.text == own.text and side.log_prob == pytest.approx(
            model.score(["Ein Hund läuft."], [own.text])[0].log_prob)
        assert side.of_other == pytest.approx(
            model.score(["Ein Hund läuft."], [other.text])[0].log_prob)
        assert side.links and all(":" in word for word in side.links)
    shown = run_cli(["trace", "--checkpoint", str(run / "kept_0000002.pt"), "--checkpoint",
                     str(run / "best.pt"), "Ein Hund läuft."])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("log-probability") == 2 and "source word -> output words" in \
        shown.stdout
