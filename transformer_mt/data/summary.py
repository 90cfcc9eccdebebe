"""``mt data``: what a config's corpora hold, before a training run reads them.

For each training corpus (and the validation corpus): its pairs, the lengths of each side in
tokens (percentiles), the tokens per side, how much of the text the vocabulary covers (words
that become ``<unk>``, or for subword units the characters spelt out as bytes), what the
configured filters remove (as training counts them: each pair against the first filter that
removes it) and what each filter would remove on its own (every on/off filter; the limits and
the language check where they are set). It prepares the data as ``mt train`` does (the token-id
cache is built or reused, so a later training starts at once) and reads the plain
segmentation, not sampled ones.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

import numpy as np

from transformer_mt.config import Config
from transformer_mt.config.data import FilterConfig
from transformer_mt.data.corpus import Corpus
from transformer_mt.data.filters import describe_removed, keep_pairs
from transformer_mt.data.pairs import ParallelData
from transformer_mt.data.prepare import corpus_of, languages_wrong, prepare_data, training_corpora
from transformer_mt.data.tmx import tmx_pairs
from transformer_mt.data.vocab import UNK_ID

PERCENTILES = (50, 90, 99)
BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")
# each filter alone: the setting that turns it on (limits only where the config sets them)
ALONE = {"empty": {"drop_empty": True}, "control": {"drop_control": True},
         "copy": {"drop_copies": True}, "duplicate": {"dedup": True}}


def summarize(cfg: Config, progress: bool = False) -> dict[str, Any]:
    """The summary of ``cfg``'s training and validation corpora (see the module docstring)."""
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(
        cfg.data, sampling=dataclasses.replace(cfg.data.sampling, alpha=None)))
    data = prepare_data(cfg, progress=progress)
    max_len = min(cfg.data.max_len, cfg.model.max_pair_tokens)
    corpora = []
    for c, corpus in zip(data.train.corpora, training_corpora(cfg.data), strict=True):
        wrong = (languages_wrong(cfg.data, corpus, progress) if cfg.data.filter.language
                 else None)
        corpora.append(_corpus(c.name, c.pairs, cfg.data.filter, max_len, cfg.data.max_pairs,
                               wrong) | {"weight": c.weight, "tag": c.tag} | _memory(corpus))
    valid = corpus_of(cfg.data, "valid")
    return {"train": corpora,
            "valid": _corpus(valid.describe(), data.valid, None, None,
                             cfg.data.valid_max_pairs) | _memory(valid),
            "tokenizer": cfg.data.tokenizer,
            "vocab": {"src": len(data.src_vocab), "tgt": len(data.tgt_vocab),
                      "shared": cfg.data.shared_vocab},
            "max_len": max_len,
            "output_limit": {"needed_a": round(data.train.output_ratio(cfg.decode.max_len_b), 2),
                             "max_len_a": cfg.decode.max_len_a,
                             "trained_a": data.fitted(cfg).decode.max_len_a,
                             "max_len_b": cfg.decode.max_len_b}}


def _memory(corpus: Corpus) -> dict[str, Any]:
    """A translation memory's units, and those passed over by why (``data/tmx.py``)."""
    if corpus.tmx is None:
        return {}
    counts: Counter[str] = Counter()
    for _ in tmx_pairs(corpus.paths[0], *corpus.tmx, f"{corpus.key}.tmx", counts):
        pass
    return {"units": counts.pop("units"), "passed_over": dict(counts)}


def _corpus(name: str, pairs: ParallelData, rules: FilterConfig | None, max_len: int | None,
            first: int | None, wrong_language: np.ndarray | None = None) -> dict[str, Any]:
    n = len(pairs.src) if first is None else min(first, len(pairs.src))
    lengths = np.stack([pairs.src.lengths()[:n], pairs.tgt.lengths()[:n]], axis=1)
    out: dict[str, Any] = {"name": name, "pairs": n, "kept": len(pairs),
                           "removed": dict(pairs.removed)}
    for i, side in enumerate(("src", "tgt")):
        encoded, lookup = (pairs.src, pairs.src_lookup) if side == "src" else (pairs.tgt,
                                                                                pairs.tgt_lookup)
        counts = np.bincount(encoded.ids[:encoded.offsets[n]], minlength=len(encoded.types))
        tokens = int(counts.sum())
        unk = int(counts[lookup == UNK_ID].sum())
        spelt = int(sum(c for t, c in zip(encoded.types, counts.tolist(), strict=True)
                        if c and BYTE_PIECE.fullmatch(t)))
        side_lengths = lengths[:, i]
        out[side] = {"tokens": tokens,
                     "length": {f"p{q}": int(np.percentile(side_lengths, q)) for q in PERCENTILES}
                     | {"mean": round(float(side_lengths.mean()), 2) if n else 0.0,
                        "max": int(side_lengths.max(initial=0))},
                     "types": int((counts > 0).sum()),
                     "unk": round(unk / max(tokens, 1), 5),
                     "bytes": round(spelt / max(tokens, 1), 5)}
    if rules is not None:
        alone = {}
        for name_, settings in ALONE.items():
            _, removed = keep_pairs(pairs.src, pairs.tgt, lengths, None, FilterConfig(**settings))
            alone[name_] = removed[name_]
        _, removed = keep_pairs(pairs.src, pairs.tgt, lengths, max_len, None)
        alone["too_long"] = removed["too_long"]
        for key, name_ in (("max_chars", "chars"), ("max_ratio", "ratio")):
            if getattr(rules, key) is not None:
                _, removed = keep_pairs(pairs.src, pairs.tgt, lengths, None,
                                        FilterConfig(**{key: getattr(rules, key)}))
                alone[name_] = removed[name_]
        if wrong_language is not None:
            alone["language"] = int(np.asarray(wrong_language[:n]).sum())
        out["alone"] = alone
    return out


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a few aligned lines per corpus."""
    lines = []
    for corpus in [*summary["train"], summary["valid"]]:
        role = "valid" if corpus is summary["valid"] else "train"
        extra = ""
        if corpus.get("weight", 1.0) != 1.0 or corpus.get("tag"):
            extra = f", weight {corpus['weight']:g}" + (f", tag {corpus['tag']}"
                                                        if corpus.get("tag") else "")
        lines.append(f"{role}: {corpus['name']}: {corpus['pairs']:,} pairs, {corpus['kept']:,} "
                     f"kept (removed: {describe_removed(corpus['removed'])}){extra}")
        if "units" in corpus:
            over = ", ".join(f"{why} {n:,}" for why, n in corpus["passed_over"].items())
            lines.append(f"  of {corpus['units']:,} translation units; passed over: "
                         f"{over or 'none'}")
        for side in ("src", "tgt"):
            s = corpus[side]
            length = ", ".join(f"{k} {v}" for k, v in s["length"].items())
            cover = (f"{s['unk']:.2%} <unk>" if summary["tokenizer"] == "spacy"
                     else f"{s['bytes']:.2%} spelt in bytes")
            lines.append(f"  {side}: {s['tokens']:,} tokens, {s['types']:,} types; length "
                         f"{length}; {cover}")
        if "alone" in corpus:
            alone = ", ".join(f"{k} {v:,}" for k, v in corpus["alone"].items())
            lines.append(f"  each filter alone would remove: {alone}")
    vocab = summary["vocab"]
    lines.append(f"vocabulary ({summary['tokenizer']}): " + (
        f"{vocab['src']:,} shared" if vocab["shared"] else
        f"{vocab['src']:,} source, {vocab['tgt']:,} target") +
        f"; too_long means over {summary['max_len']} tokens")
    limit = summary["output_limit"]
    lines.append(f"output limit: the targets need max_len_a {limit['needed_a']:g} (x source "
                 f"tokens + max_len_b {limit['max_len_b']}, all but the longest thousandth); "
                 + (f"the config's {limit['max_len_a']:g} holds them"
                    if limit["trained_a"] == limit["max_len_a"] else
                    f"mt train raises the config's {limit['max_len_a']:g} to "
                    f"{limit['trained_a']:g}"))
    return "\n".join(lines)
