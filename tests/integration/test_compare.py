"""mt evaluate with several systems (#24): BLEU, chrF and TER with sacreBLEU's paired bootstrap
resampling against the first, the same table as sacreBLEU's own command line."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import TOY_DE_EN, run_cli


@pytest.fixture(scope="module")
def systems(trained_run, tmp_path_factory):
    """100 test references and three systems' outputs: the tiny model's greedy translations,
    and two damaged copies of the references (every 3rd word dropped; every 5th word dropped
    and the first lowercased), which score like real systems."""
    tmp = tmp_path_factory.mktemp("compare")
    result = run_cli(["evaluate", "--checkpoint", str(trained_run[0] / "best.pt"),
                      "--max-sentences", "100", "--beam", "1", "--output",
                      str(tmp / "greedy.txt")])
    assert result.returncode == 0, result.stderr
    refs = (TOY_DE_EN / "test.en").read_text(encoding="utf-8").splitlines()[:100]
    (tmp / "ref.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")

    def damaged(every: int, lower: bool) -> str:
        lines = []
        for ref in refs:
            words = [w for i, w in enumerate(ref.split(), 1) if i % every]
            if lower and words:
                words[0] = words[0].lower()
            lines.append(" ".join(words))
        return "\n".join(lines) + "\n"

    (tmp / "a.txt").write_text(damaged(3, False), encoding="utf-8")
    (tmp / "b.txt").write_text(damaged(5, True), encoding="utf-8")
    return tmp


def _sacrebleu_cli(ref: Path, hyps: list[Path]) -> tuple[list[float], list[float]]:
    """The scores, means, intervals and p-values of sacreBLEU's own table, in order."""
    out = subprocess.run([sys.executable, "-m", "sacrebleu", str(ref), "-i", *map(str, hyps),
                          "-m", "bleu", "chrf", "ter", "--paired-bs", "-f", "text"],
                         capture_output=True,
                         text=True, check=True).stdout
    numbers = [float(x) for triple in re.findall(r"(\d+\.\d) \((\d+\.\d) ± (\d+\.\d)\)", out)
               for x in triple]
    return numbers, [float(p) for p in re.findall(r"p = (\d\.\d{4})", out)]


def test_the_comparison_is_sacrebleus_own(systems):
    files = [systems / "a.txt", systems / "b.txt"]
    result = run_cli(["evaluate", "--hyp", str(files[0]), "--hyp", str(files[1]), "--ref",
                      str(systems / "ref.txt"), "--json"])
    assert result.returncode == 0, result.stderr
    ours = json.loads(result.stdout)
    numbers, p_values = _sacrebleu_cli(systems / "ref.txt", files)
    mine = [round(x, 1) for s in ours["systems"] for m in ("BLEU", "chrF2", "TER")
            for x in (s[m]["score"], s[m]["mean"], s[m]["ci"])]
    assert mine == numbers and len(numbers) == 18
    assert [round(ours["systems"][1][m]["p_value"], 4) for m in ("BLEU", "chrF2", "TER")] \
        == p_values
    assert ours["baseline"] == str(files[0]) and ours["sentences"] == 100
    text = run_cli(["evaluate", "--hyp", str(files[0]), "--hyp", str(files[1]), "--ref",
                    str(systems / "ref.txt")])
    assert "paired bootstrap resampling (1000 samples)" in text.stdout
    assert f"p={p_values[0]:.4f}" in text.stdout


def test_checkpoints_and_files_compare_on_the_checkpoints_test_set(trained_run, systems):
    """Checkpoints translate the split, files are taken as they are: a checkpoint and its own
    greedy output are the same system (p = 1 or close to it, equal scores)."""
    result = run_cli(["evaluate", "--checkpoint", str(trained_run[0] / "best.pt"), "--beam",
                      "1", "--hyp", str(systems / "greedy.txt"), "--max-sentences", "100",
                      "--json"])
    assert result.returncode == 0, result.stderr
    a, b = json.loads(result.stdout)["systems"]
    assert a["BLEU"]["score"] == b["BLEU"]["score"] and a["TER"]["score"] == b["TER"]["score"]


def test_an_ensemble_is_scored_as_mt_translate_translates_with_its_checkpoints(trained_run,
                                                                             tmp_path):
    """``--ensemble``: the checkpoints are one system, which translates as ``mt translate``
    with the same checkpoints does (their probabilities averaged) and is scored as its
    translations are as a file; without it, the same checkpoints are two systems compared."""
    run_dir = trained_run[0]
    steps = [str(run_dir / "step_0000003.pt"), str(run_dir / "step_0000006.pt")]
    checkpoints = [arg for path in steps for arg in ("--checkpoint", path)]
    hyp, settings = tmp_path / "ensemble.txt", ["--beam", "2", "--max-sentences", "8"]
    result = run_cli(["evaluate", "--ensemble", *checkpoints, "--split", "val", *settings,
                      "--output", str(hyp), "--json"])
    assert result.returncode == 0, result.stderr
    ensemble = json.loads(result.stdout)
    assert ensemble["ensemble"] == steps and ensemble["sentences"] == 8
    sources, refs = tmp_path / "val.de", tmp_path / "val.en"
    for lang, path in (("de", sources), ("en", refs)):
        path.write_text("".join((TOY_DE_EN / f"valid.{lang}").read_text(encoding="utf-8")
                                .splitlines(True)[:8]), encoding="utf-8")
    translated = run_cli(["translate", *checkpoints, "--beam", "2", "--input", str(sources)])
    assert translated.stdout == hyp.read_text(encoding="utf-8")
    as_file = json.loads(run_cli(["evaluate", "--hyp", str(hyp), "--ref", str(refs),
                                  "--json"]).stdout)
    assert (as_file["bleu"], as_file["chrf"]) == (ensemble["bleu"], ensemble["chrf"])
    text = run_cli(["evaluate", "--ensemble", *checkpoints, "--split", "val", *settings])
    assert "beam 2, an ensemble of 2 models" in text.stdout
    compared = json.loads(run_cli(["evaluate", *checkpoints, "--split", "val", *settings,
                                   "--json"]).stdout)
    assert [s["name"] for s in compared["systems"]] == steps


@pytest.mark.parametrize("args, message", [
    (["--hyp", "A"], "pass --ref"),
    (["--hyp", "A", "--checkpoint", "C", "--output", "O", "--checkpoint", "C"],
     "--output writes the translations of one --checkpoint"),
    (["--hyp", "A", "--hyp", "A", "--ref", "R"], "same name"),
    (["--hyp", "A", "--hyp", "SHORT", "--ref", "R"], "every system must translate the same"),
    ([], "give --checkpoint"),
    (["--ensemble", "--checkpoint", "C"], "--ensemble averages the probabilities of two"),
])
def test_comparing_wrong_things_is_one_line(systems, tmp_path, args, message):
    """Each a one-line error: nothing is translated or written."""
    (tmp_path / "short.txt").write_text("one line\n")
    paths = {"A": systems / "a.txt", "R": systems / "ref.txt",
             "SHORT": tmp_path / "short.txt", "O": tmp_path / "out.txt",
             "C": systems / "missing.pt"}
    result = run_cli(["evaluate", *[str(paths.get(a, a)) for a in args]])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert message in result.stderr.strip().splitlines()[-1]


def test_identical_systems_are_not_significant_and_order_changes_no_score():
    """sacreBLEU's p-value calls a zero difference significant (p = 0.001, starred); a system
    compared with itself is not. A system's scores do not depend on its place in the list."""
    from transformer_mt.compare import System, compare_systems

    rng = __import__("random").Random(0)
    words = ["a", "man", "woman", "dog", "runs", "in", "the", "snow", "street", "red", "ball"]
    refs = [" ".join(rng.choices(words, k=8)) for _ in range(60)]
    a = [" ".join(rng.choices(words, k=8)) for _ in range(60)]
    b = [" ".join(rng.choices(words, k=7)) for _ in range(60)]
    same = compare_systems([System("a", a), System("copy of a", a)], refs)
    for metric in ("BLEU", "chrF2", "TER"):
        assert same.results[1][metric].p_value == 1.0
        assert same.results[1][metric].score == same.results[0][metric].score
    assert "*" not in same.table()
    forward = compare_systems([System("a", a), System("b", b)], refs).results
    backward = compare_systems([System("b", b), System("a", a)], refs).results
    for metric in ("BLEU", "chrF2", "TER"):
        assert forward[0][metric].score == backward[1][metric].score
        assert forward[1][metric].score == backward[0][metric].score


def test_each_system_is_scored_as_it_would_be_alone(tmp_path):
    """A lowercasing model's references are lowercased for it alone: the reference file itself,
    passed as --hyp beside such a checkpoint, scored BLEU 89.84 against lowercased references
    (100 alone); the table says which references each system was scored against."""
    from tests.helpers import train_toy

    run_dir, data = train_toy(tmp_path, "pair", lowercase=True)
    src = tmp_path / "src.txt"
    ref = tmp_path / "ref.txt"
    with gzip.open(data["valid"]["src"], "rt", encoding="utf-8") as f:
        src.write_text(f.read(), encoding="utf-8")
    with gzip.open(data["valid"]["tgt"], "rt", encoding="utf-8") as f:
        ref.write_text("".join(line[:1].upper() + line[1:] for line in f), encoding="utf-8")
    ckpt = str(run_dir / "best.pt")
    alone = {}
    for system in (["--checkpoint", ckpt, "--src", str(src)], ["--hyp", str(ref)]):
        result = run_cli(["evaluate", *system, "--ref", str(ref), "--json"])
        assert result.returncode == 0, result.stderr
        alone[system[0]] = json.loads(result.stdout)
    assert alone["--hyp"]["bleu"] == 100.0 and alone["--hyp"]["references"] == "as given"
    assert alone["--checkpoint"]["references"] == "lowercased"
    result = run_cli(["evaluate", "--checkpoint", ckpt, "--src", str(src), "--hyp", str(ref),
                      "--ref", str(ref), "--json"])
    assert result.returncode == 0, result.stderr
    model, reference = json.loads(result.stdout)["systems"]
    assert round(reference["BLEU"]["score"], 2) == 100.0 and reference["references"] == "as given"
    assert model["references"] == "lowercased"
    assert round(model["BLEU"]["score"], 2) == alone["--checkpoint"]["bleu"]
    assert round(model["chrF2"]["score"], 2) == alone["--checkpoint"]["chrf"]
    table = run_cli(["evaluate", "--checkpoint", ckpt, "--src", str(src), "--hyp", str(ref),
                     "--ref", str(ref)]).stdout
    assert "lowercased" in table and "as given" in table
