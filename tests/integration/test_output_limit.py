"""Decoding's output limit (``decode.max_len_a * source tokens + max_len_b``): ``mt train``
raises ``max_len_a`` to what its training pairs need, so that a target language written in
more tokens than the source is not cut (in validation either); a translation that reaches the
limit is said to have."""

from __future__ import annotations

import logging

from tests.helpers import TINY
from transformer_mt import Translator, train
from transformer_mt.config import Config
from transformer_mt.config.file import config_from_dict
from transformer_mt.data.summary import format_summary, summarize
from transformer_mt.translate.engines import output_limits

WORDS = ["rouge", "vert", "bleu", "noir", "blanc", "gris", "jaune", "rose", "brun", "violet",
         "orange", "beige"]


def _corpus(tmp_path, times: int) -> dict:
    """Sentences of 3 to 20 words, each word written ``times`` times on the target side (once:
    and a pair out of line, one word against 60)."""
    pairs = [] if times > 1 else [("rouge", " ".join(["rouge"] * 60))]
    for n in range(3, 21):
        for start in range(len(WORDS)):
            words = [WORDS[(start + i * 5) % len(WORDS)] for i in range(n)]
            pairs.append((" ".join(words), " ".join(w for w in words for _ in range(times))))
    for lang, column in (("fr", 0), ("es", 1)):
        for name, rows in (("train", pairs), ("valid", pairs[::20])):
            (tmp_path / f"{name}.{lang}").write_text("".join(r[column] + "\n" for r in rows),
                                                     encoding="utf-8")
    return {"src_lang": "fr", "tgt_lang": "es", "min_freq": 1, "max_len": 62,
            "train": {"src": str(tmp_path / "train.fr"), "tgt": str(tmp_path / "train.es")},
            "valid": {"src": str(tmp_path / "valid.fr"), "tgt": str(tmp_path / "valid.es")}}


def _config(tmp_path, times: int, steps: int = 4) -> Config:
    return config_from_dict({"name": "limit", "data": _corpus(tmp_path, times), **TINY, "train": {
        **TINY["train"], "max_steps": steps, "eval_every": steps, "save_every": steps}})


def _trained(tmp_path, times: int, caplog, steps: int = 4) -> Translator:
    with caplog.at_level(logging.INFO, logger="transformer_mt"):
        train(_config(tmp_path, times, steps), tmp_path / "run")
    return Translator.load(tmp_path / "run" / "best.pt", "cpu")


def _least_a(sources: list[int], targets: list[int], b: int) -> float:
    """The least tenth ``a`` with ``floor(a * source) + b >= target`` for every pair."""
    a = 0.0
    while any(int(a * s) + b < t for s, t in zip(sources, targets, strict=True)):
        a = round(a + 0.1, 1)
    return a


def test_training_raises_max_len_a_to_what_its_targets_need(tmp_path, caplog):
    translator = _trained(tmp_path, 3, caplog)
    sources = (tmp_path / "train.fr").read_text(encoding="utf-8").splitlines()
    ids = translator.encode(sources)  # each ends in <eos>, which the limit counts
    targets = [3 * len(s.split()) for s in sources]  # word tokens, <eos> not counted
    a = translator.config.decode.max_len_a
    assert a == _least_a([len(i) for i in ids], targets, 10) > 1.5
    assert any(f"decode.max_len_a 1.5 -> {a:g}" in r.getMessage() for r in caplog.records)
    limits = output_limits(ids, translator.settings(), translator.config.model.max_output_tokens)
    assert all(n >= t for n, t in zip(limits, targets, strict=True))
    summary = summarize(_config(tmp_path, 3))  # mt data says so before training
    assert summary["output_limit"]["trained_a"] == a
    assert format_summary(summary).endswith(f"mt train raises the config's 1.5 to {a:g}")


def test_targets_no_longer_than_the_limit_allows_leave_the_config_as_it_is(tmp_path, caplog):
    translator = _trained(tmp_path, 1, caplog, steps=150)  # learns to copy its sources
    assert translator.config.decode.max_len_a == 1.5  # (the pair out of line left out)
    assert not any("decode.max_len_a" in r.getMessage() for r in caplog.records)
    sentences = ["rouge gris orange", "vert jaune beige blanc violet", ""]  # as it learnt them
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="transformer_mt"):
        assert translator.translate(sentences) == sentences
        assert not any("output limit" in r.getMessage() for r in caplog.records)
        short = translator.translate(sentences, max_len_a=0, max_len_b=2)
    assert short == ["rouge gris", "vert jaune", ""]
    said = [r.getMessage() for r in caplog.records if "output limit" in r.getMessage()]
    assert said == ["2 of 2 translations reached the output limit (max_len_a 0 x source tokens"
                    " + max_len_b 2) and end there: a model repeating itself "
                    "(no_repeat_ngram_size 3 cuts its loops), or a limit too low for these "
                    "languages"]
