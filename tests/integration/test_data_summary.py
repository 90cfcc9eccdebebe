"""``mt data``: the summary of a config's corpora, checked against counts made by hand."""

from __future__ import annotations

import collections
import json

import numpy as np
import yaml

from tests.helpers import run_cli

NUMBERS = ("eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn "
           "fünfzehn sechzehn siebzehn achtzehn neunzehn zwanzig")
NORMAL = [(f"der hund {w} läuft {'schnell ' * (i % 5)}".strip(),
           f"the dog {w} runs {'fast ' * (i % 5)}".strip())
          for i, w in enumerate(NUMBERS.split(" "))]
PAIRS = [*NORMAL,
         NORMAL[0], NORMAL[0],  # two duplicates of the first pair
         ("same text here", "same text here"),  # a copy
         ("der hund", ""),  # an empty side
         ("der \x07hund", "the dog")]  # a control character


def _write(tmp_path, rules: dict) -> str:
    for lang, column in (("de", 0), ("en", 1)):
        (tmp_path / f"train.{lang}").write_text("".join(p[column] + "\n" for p in PAIRS),
                                               encoding="utf-8")
        (tmp_path / f"valid.{lang}").write_text("".join(p[column] + "\n" for p in NORMAL[:4]),
                                               encoding="utf-8")
    data = {"train": {"src": str(tmp_path / "train.de"), "tgt": str(tmp_path / "train.en")},
            "valid": {"src": str(tmp_path / "valid.de"), "tgt": str(tmp_path / "valid.en")},
            "tokenizer": "spacy", "min_freq": 2, "filter": rules}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"name": "summary", "data": data}), encoding="utf-8")
    return str(path)


def test_the_summary_counts_what_each_filter_removes_and_what_the_vocabulary_covers(tmp_path):
    config = _write(tmp_path, {"drop_empty": True, "dedup": True})
    result = run_cli(["data", "--config", config, "--json"],
                     env={"MT_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    train = summary["train"][0]
    assert train["pairs"] == len(PAIRS) and train["kept"] == len(PAIRS) - 3
    assert train["removed"] == {"empty": 1, "too_long": 0, "duplicate": 2}  # as training counts
    assert train["alone"] == {"empty": 1, "control": 1, "copy": 1, "duplicate": 2, "too_long": 0}
    # spaCy splits these at spaces; a control character is not read
    words = [[p[i].replace("\x07", "").split() for p in PAIRS] for i in (0, 1)]
    for side, sentences in zip(("src", "tgt"), words, strict=True):
        lengths = [len(s) for s in sentences]
        assert train[side]["tokens"] == sum(lengths)
        assert train[side]["length"]["max"] == max(lengths)
        assert train[side]["length"]["p50"] == int(np.percentile(lengths, 50))
        counts = collections.Counter(w for s in sentences for w in s)
        rare = sum(c for c in counts.values() if c < 2)  # min_freq 2: these become <unk>
        assert train[side]["unk"] == round(rare / sum(lengths), 5)
        assert train[side]["types"] == len(counts)
    assert summary["valid"]["pairs"] == 4 and "alone" not in summary["valid"]
    text = run_cli(["data", "--config", config], env={"MT_CACHE_DIR": str(tmp_path / "cache")})
    assert "each filter alone would remove: empty 1, control 1, copy 1, duplicate 2" in text.stdout


def test_a_limit_is_reported_where_it_is_set(tmp_path):
    config = _write(tmp_path, {"max_ratio": 1.5})
    result = run_cli(["data", "--config", config, "--json", "--set", "data.filter.max_chars=20"],
                     env={"MT_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    train = json.loads(result.stdout)["train"][0]
    too_long_chars = sum(max(len(a), len(b)) > 20 for a, b in PAIRS)
    # ratio: tokens of the longer side over the shorter (an empty side counts as 1)
    ratio = sum(max(len(a.split()), len(b.split())) / max(min(len(a.split()), len(b.split())), 1)
                > 1.5 for a, b in PAIRS)
    assert train["alone"]["chars"] == too_long_chars and train["alone"]["ratio"] == ratio
    assert ratio > 0 and too_long_chars > 0
