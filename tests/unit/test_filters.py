"""Cleaning the training pairs (#24, data.filter): each filter removes exactly the pairs it is
for, is counted, and is off unless asked for."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from transformer_mt.config.file import config_from_dict
from transformer_mt.data.prepare import prepare_data

# (source, target, the filter that must remove the pair, or None: kept)
PAIRS = [
    ("Ein Hund läuft.", "A dog runs.", None),
    ("", "An empty source.", "empty"),
    ("Ein sehr langer Satz " * 12, "A very long sentence.", "too_long"),
    ("Kurz.", "Short " + "x" * 150 + ".", "chars"),
    ("Eins zwei drei vier fünf sechs sieben acht neun.", "One.", "ratio"),
    ("Ein\x07Hund schläft.", "A dog sleeps.", "control"),
    ("Berlin.", "Berlin.", "copy"),
    ("Ein Hund läuft.", "A dog runs.", "duplicate"),
    ("Zwei Katzen spielen.", "Two cats play.", None),
    ("   ", "Whitespace only.", "empty"),
    # the first pair typed with a combining diaeresis (NFD): the same text, so a duplicate
    (unicodedata.normalize("NFD", "Ein Hund läuft."), "A dog runs.", "duplicate"),
]
ALL_ON = ["data.filter.drop_empty=true", "data.filter.max_chars=100",
          "data.filter.max_ratio=3", "data.filter.drop_control=true",
          "data.filter.drop_copies=true", "data.filter.dedup=true"]


def _config(tmp_path, *overrides: str):
    files = {}
    for side, column in (("de", 0), ("en", 1)):
        path = tmp_path / f"train.{side}"
        path.write_text("".join(p[column] + "\n" for p in PAIRS), encoding="utf-8")
        files[side] = str(path)
    return config_from_dict({"data": {"train": {"src": files["de"], "tgt": files["en"]},
                                      "valid": {"src": files["de"], "tgt": files["en"]},
                                      "test": {}, "min_freq": 1, "max_len": 20}},
                            list(overrides))


def test_each_filter_removes_its_pair_and_is_counted(tmp_path):
    data = prepare_data(_config(tmp_path, *ALL_ON)).train.corpora[0].pairs
    kept = [i for i, p in enumerate(PAIRS) if p[2] is None]
    assert data.index.tolist() == kept
    expected = {name: sum(p[2] == name for p in PAIRS) for name in
                ("empty", "too_long", "chars", "ratio", "control", "copy", "duplicate")}
    assert data.removed == expected
    assert data.n_dropped == len(PAIRS) - len(kept)


def test_filters_are_off_unless_asked_for(tmp_path):
    data = prepare_data(_config(tmp_path)).train.corpora[0].pairs
    assert data.removed == {"too_long": 1}  # data.max_len is always on
    assert len(data) == len(PAIRS) - 1


@pytest.mark.parametrize("rule, name", [
    ("data.filter.drop_empty=true", "empty"), ("data.filter.max_chars=100", "chars"),
    ("data.filter.max_ratio=3", "ratio"), ("data.filter.drop_control=true", "control"),
    ("data.filter.drop_copies=true", "copy"), ("data.filter.dedup=true", "duplicate"),
])
def test_one_filter_alone_removes_only_its_pairs(tmp_path, rule, name):
    data = prepare_data(_config(tmp_path, rule)).train.corpora[0].pairs
    gone = sorted(set(range(len(PAIRS))) - set(data.index.tolist()))
    # alone, the ratio filter also takes the empty source against 4 target tokens (its own
    # filter, earlier in the order, takes it when both are on)
    also = [1] if name == "ratio" else []
    assert gone == sorted([*also, *(i for i, p in enumerate(PAIRS) if p[2] in (name,
                                                                              "too_long"))])
    assert data.removed[name] == sum(p[2] == name for p in PAIRS) + len(also)


def test_the_cache_keeps_each_lines_facts(tmp_path):
    from transformer_mt.data.id_cache import line_hash

    data = prepare_data(_config(tmp_path)).train.corpora[0].pairs
    src = data.src
    # the facts of what is read (NFC, no control characters), but whether it held one
    text = [unicodedata.normalize("NFC", p[0]).replace("\x07", "") for p in PAIRS]
    assert src.chars.tolist() == [len(t) for t in text]
    assert src.control.tolist() == ["\x07" in p[0] for p in PAIRS]
    assert src.hashes.tolist() == [line_hash(t) for t in text]
    assert src.hashes[0] == src.hashes[7] == src.hashes[10]
    assert data.tgt.hashes[6] == src.hashes[6]


def test_filter_settings_are_checked(tmp_path):
    from transformer_mt.errors import ConfigError

    with pytest.raises(ConfigError, match=r"data\.filter\.max_ratio' must be at least 1"):
        _config(tmp_path, "data.filter.max_ratio=0.5")
    with pytest.raises(ConfigError, match=r"data\.filter\.max_chars' must be positive"):
        _config(tmp_path, "data.filter.max_chars=0")


LANGUAGE_PAIRS = [  # (German, English, wrong side or None)
    ("Ein Mann fährt mit seinem Fahrrad die lange Straße hinunter.",
     "A man rides his bicycle down the long street.", None),
    ("A woman is reading a book in the park near the lake.",
     "A woman is reading a book in the park near the lake, quietly.", "src"),
    ("Zwei Kinder spielen im Garten mit einem großen roten Ball.",
     "Two children are playing in the garden with a big red ball.", None),
    ("Eine Frau sitzt auf einer Bank und liest die Zeitung.",
     "Une femme est assise sur un banc et lit le journal.", "tgt"),
    ("Ein schwarzer Hund rennt über die grüne Wiese am Fluss.",
     "A black dog runs across the green meadow by the river.", None),
]


def test_the_language_filter_removes_pairs_with_a_side_in_another_language(tmp_path):
    pytest.importorskip("py3langid")
    files = {}
    for side, column in (("de", 0), ("en", 1)):
        path = tmp_path / f"lang.{side}"
        path.write_text("".join(p[column] + "\n" for p in LANGUAGE_PAIRS), encoding="utf-8")
        files[side] = str(path)
    cfg = config_from_dict({"data": {"train": {"src": files["de"], "tgt": files["en"]},
                                     "valid": {"src": files["de"], "tgt": files["en"]},
                                     "test": {}, "min_freq": 1,
                                     "filter": {"language": True}}})
    data = prepare_data(cfg).train.corpora[0].pairs
    assert data.index.tolist() == [i for i, p in enumerate(LANGUAGE_PAIRS) if p[2] is None]
    assert data.removed == {"too_long": 0, "language": 2}
    cfg.data.filter.language = False
    assert len(prepare_data(cfg).train) == len(LANGUAGE_PAIRS)  # off unless asked for


@pytest.mark.parametrize("damage", ["relabelled", "truncated", "bit_flipped"])
def test_damaged_language_labels_are_made_again_never_used(tmp_path, monkeypatch, caplog,
                                                           damage):
    """The labels' cache entry is checked like every entry: relabelled lines (the filter would
    remove nothing) or a damaged file (a traceback before) are noticed and identified again."""
    pytest.importorskip("py3langid")
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))
    test_the_language_filter_removes_pairs_with_a_side_in_another_language(tmp_path)
    entries = sorted((tmp_path / "cache" / "langid").glob("*/labels.npy"))
    assert len(entries) == 2  # one a side
    for labels in entries:
        raw = bytearray(labels.read_bytes())
        if damage == "relabelled":
            stored = np.load(labels)
            np.save(labels, np.full_like(stored, stored[0]))
        elif damage == "truncated":
            labels.write_bytes(raw[: len(raw) // 2])
        else:
            raw[-1] ^= 0x40
            labels.write_bytes(bytes(raw))
    with caplog.at_level("WARNING"):
        test_the_language_filter_removes_pairs_with_a_side_in_another_language(tmp_path)
    assert caplog.text.count("is damaged") == 2


def test_the_language_filter_without_its_package_says_how_to_install_it(tmp_path, monkeypatch):
    from transformer_mt import packages

    real = packages.installed
    monkeypatch.setattr(packages, "installed", lambda m: m != "py3langid" and real(m))
    cfg = _config(tmp_path, "data.filter.language=true")
    with pytest.raises(packages.MissingPackageError, match=r"transformer_mt\[langid\]"):
        packages.require(packages.training_packages(cfg))
