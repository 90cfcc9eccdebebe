"""The back-translation recipe of docs/usage.md ("Your own data"), on tiny data, command by
command: train the reverse model, translate target-language text with sampling, train on the
parallel corpus and the tagged synthetic one together."""

from __future__ import annotations

import gzip
import json

from tests.helpers import DATA_DIR, needs_data, run_cli, tiny_train_args

pytestmark = needs_data  # README's recipe, on Multi30k


def _lines(name: str, start: int, stop: int) -> list[str]:
    with gzip.open(DATA_DIR / name, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][start:stop]


def _write(path, lines: list[str]) -> str:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return str(path)


def test_back_translation_from_monolingual_text_to_a_tagged_corpus(tmp_path):
    par_de = _write(tmp_path / "par.de", _lines("train.de.gz", 0, 300))
    par_en = _write(tmp_path / "par.en", _lines("train.en.gz", 0, 300))
    mono_en = _write(tmp_path / "mono.en", _lines("train.en.gz", 300, 400))  # English only
    val_de = _write(tmp_path / "val.de", _lines("val.de.gz", 0, 20))
    val_en = _write(tmp_path / "val.en", _lines("val.en.gz", 0, 20))

    # 1. the reverse model: English -> German, on the parallel corpus
    reverse = tmp_path / "en-de"
    result = run_cli(tiny_train_args(
        reverse, "data.src_lang=en", "data.tgt_lang=de",
        f"data.train={{src: {par_en}, tgt: {par_de}}}",
        f"data.valid={{src: {val_en}, tgt: {val_de}}}"))
    assert result.returncode == 0, result.stderr

    # 2. the monolingual English, back-translated with sampling (seeded: the same twice)
    synthetic = tmp_path / "mono.bt.de"
    sample = ["translate", "--checkpoint", str(reverse / "last.pt"), "--input", mono_en,
              "--sample-topk", "10", "--seed", "3"]
    assert run_cli([*sample, "--output", str(synthetic)]).returncode == 0
    again = run_cli(sample)
    lines = synthetic.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 100 and again.stdout.splitlines() == lines
    greedy = run_cli(["translate", "--checkpoint", str(reverse / "last.pt"), "--input", mono_en,
                      "--beam", "1"])
    assert greedy.stdout.splitlines() != lines  # sampled, not searched

    # 3. the forward model on both: the synthetic pairs tagged <bt>, seen twice an epoch
    forward = tmp_path / "de-en"
    train = (f"data.train=[{{src: {par_de}, tgt: {par_en}}}, "
             f"{{src: {synthetic}, tgt: {mono_en}, tag: '<bt>', weight: 2}}]")
    result = run_cli(tiny_train_args(forward, train,
                                     f"data.valid={{src: {val_de}, tgt: {val_en}}}"))
    assert result.returncode == 0, result.stderr
    assert "weight 2, tag <bt>" in result.stderr
    info = json.loads(run_cli(["info", str(forward / "last.pt"), "--json"]).stdout)
    corpora = info["training_corpora"]
    assert [c["tag"] for c in corpora] == [None, "<bt>"]
    assert [c["weight"] for c in corpora] == [1.0, 2.0]
    assert corpora[1]["pairs"] == 100 - sum(corpora[1]["removed"].values())
    assert "<bt>" in json.loads((forward / "src_vocab.json").read_text(encoding="utf-8"))
