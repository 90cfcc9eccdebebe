"""A toy task (reverse a sequence of symbols) and a tiny model trained on it, for tests."""

from __future__ import annotations

from pathlib import Path

import torch

from transformer_mt.checkpoint import make_checkpoint, save_checkpoint
from transformer_mt.config import Config, ModelConfig
from transformer_mt.data.batch import Batch, source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, Vocab
from transformer_mt.decode.search import greedy
from transformer_mt.model.transformer import Transformer
from transformer_mt.training.schedule import learning_rate

N_SYMBOLS = 10  # ids 4 .. 13
VOCAB = 4 + N_SYMBOLS
SYMBOLS = [f"s{i}" for i in range(N_SYMBOLS)]  # the symbols as words: "s3 s1 s4" -> "s4 s1 s3"


def toy_pairs(n: int, gen: torch.Generator, min_len: int = 3, max_len: int = 8):
    """(source, reversed source) pairs: source ends in <eos>, target has <bos> and <eos>."""
    pairs = []
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=gen))
        seq = torch.randint(4, VOCAB, (length,), generator=gen)
        src = torch.cat([seq, torch.tensor([EOS_ID])])
        tgt = torch.cat([torch.tensor([BOS_ID]), seq.flip(0), torch.tensor([EOS_ID])])
        pairs.append((src, tgt))
    return pairs


def train_toy_model(steps: int = 500, seed: int = 0, layers: int = 2) -> Transformer:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cfg = ModelConfig(d_model=64, n_heads=4, n_encoder_layers=layers, n_decoder_layers=layers,
                      d_ff=128, dropout=0.0, max_positions=32)
    model = Transformer(cfg, VOCAB, VOCAB, PAD_ID)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    for step in range(1, steps + 1):
        pairs = toy_pairs(64, gen)
        batch = Batch.from_ids([p[0] for p in pairs], [p[1] for p in pairs])
        loss = model.loss(batch) / batch.n_tokens
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, 2e-3, 100)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return model.eval()


def toy_accuracy(model: Transformer, n: int = 200, seed: int = 123) -> float:
    """Token accuracy of greedy outputs against the reversed sources (position by position)."""
    pairs = toy_pairs(n, torch.Generator().manual_seed(seed))
    src = torch.nn.utils.rnn.pad_sequence([p[0] for p in pairs], batch_first=True,
                                          padding_value=PAD_ID)
    hyps = greedy(model, src, source_mask(src), 1.0, 2)
    correct = total = 0
    for (_, tgt), hyp in zip(pairs, hyps, strict=True):
        ref = tgt[1:-1].tolist()
        correct += sum(a == b for a, b in zip(hyp.tokens, ref, strict=False))  # lengths differ
        total += max(len(ref), len(hyp.tokens))
    return correct / total


def toy_sources(n: int = 24, seed: int = 7) -> torch.Tensor:
    pairs = toy_pairs(n, torch.Generator().manual_seed(seed))
    return torch.nn.utils.rnn.pad_sequence([p[0] for p in pairs], batch_first=True,
                                           padding_value=PAD_ID)


# a small model for the tests of its parts (not trained)
CFG = ModelConfig(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                  dropout=0.0, max_positions=64)


def make_model(**changes) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(**{**CFG.__dict__, **changes})
    return Transformer(cfg, 30, 25, PAD_ID).eval()


def lone_sources(n: int = 10) -> list[torch.Tensor]:
    """Sources one at a time (1, S), of different lengths, without their padding."""
    batch = toy_sources(n, seed=11)
    return [row[row != PAD_ID][None] for row in batch]


def save_toy_checkpoint(model: Transformer, path: Path, **decode: object) -> Path:
    """A toy model as a checkpoint that the CLI, the server and the exports read: both
    vocabularies :data:`SYMBOLS` (spaCy's words), ``decode`` its decoding settings."""
    vocab = Vocab([*SPECIALS, *SYMBOLS])
    ckpt = make_checkpoint(model, Config(model=model.cfg), vocab, vocab, {"step": 0})
    ckpt["config"]["decode"].update(decode)
    save_checkpoint(ckpt, path)
    return path
