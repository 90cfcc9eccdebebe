"""mt score: the log-probability of given translations, token by token; the same through our
engine and through CTranslate2's score_batch on the exported model; bad input in one line."""

from __future__ import annotations

import json

import pytest

from tests.helpers import TOY_DE_EN, run_cli
from transformer_mt.translate import Translator


def _files(tmp_path, sources, translations):
    (tmp_path / "src.txt").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    (tmp_path / "hyp.txt").write_text("".join(t + "\n" for t in translations), encoding="utf-8")
    return str(tmp_path / "src.txt"), str(tmp_path / "hyp.txt")


def test_scores_are_what_beam_search_gives_and_ctranslate2_agrees(trained_run, tmp_path):
    ckpt = str(trained_run[0] / "best.pt")
    translator = Translator.load(ckpt, "cpu")
    sources = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:12]
    best = translator.translate(sources, nbest=1, beam_size=3, precision="fp32")
    translations = [h[0].text for h in best]
    src, hyp = _files(tmp_path, sources, translations)
    result = run_cli(["score", "--checkpoint", ckpt, "--src", src, "--hyp", hyp, "--json",
                      "--precision", "fp32"])
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == len(sources)
    compared = 0
    for record, hyps, ids in zip(records, best, translator.encode(sources), strict=True):
        assert record["tokens"][-1] == "<eos>" and len(record["token_log_probs"]) == len(
            record["tokens"])
        assert record["log_prob"] == pytest.approx(sum(record["token_log_probs"]), abs=1e-3)
        cut = len(hyps[0].tokens) >= int(1.5 * len(ids)) + 10  # <eos> forced by search
        if record["tokens"][:-1] == hyps[0].tokens and not cut:  # the text gives them back
            assert record["score"] == pytest.approx(hyps[0].score, abs=1e-3)
            compared += 1
    assert compared >= 3
    plain = run_cli(["score", "--checkpoint", ckpt, "--src", src, "--hyp", hyp, "--precision",
                     "fp32"])
    assert [float(line.split("\t")[0]) for line in plain.stdout.splitlines()] == \
        pytest.approx([r["score"] for r in records], abs=1e-3)

    pytest.importorskip("ctranslate2")
    exported = tmp_path / "ct2"
    assert run_cli(["export", str(ckpt), str(exported)]).returncode == 0
    theirs = run_cli(["score", "--engine", "ctranslate2", "--checkpoint", str(exported),
                      "--src", src, "--hyp", hyp, "--json"])
    assert theirs.returncode == 0, theirs.stderr
    for ours, other in zip(records, map(json.loads, theirs.stdout.splitlines()), strict=True):
        assert other["tokens"] == ours["tokens"]
        assert other["token_log_probs"] == pytest.approx(ours["token_log_probs"], abs=1e-3)


def test_checkpoint_repeated_scores_with_the_ensemble(trained_run, tmp_path):
    """``--checkpoint`` repeated scores as the ensemble of those models scores in Python (its
    mean probability: tests/unit/test_decoding_equivalence.py), which neither model alone gives."""
    steps = [str(trained_run[0] / f"step_000000{s}.pt") for s in (3, 6)]
    sources, translations = ["Ein Mädchen läuft in der Stadt.", "Zwei Männer stehen im "
                             "Schnee."], ["A girl runs in the city.", "Two men in the snow."]
    src, hyp = _files(tmp_path, sources, translations)
    result = run_cli(["score", "--checkpoint", steps[0], "--checkpoint", steps[1], "--src", src,
                      "--hyp", hyp, "--json"])
    assert result.returncode == 0, result.stderr
    together = [json.loads(line)["token_log_probs"] for line in result.stdout.splitlines()]
    ensemble = Translator.load(steps, "cpu").score(sources, translations)
    assert together == [pytest.approx(s.log_probs, abs=1e-4) for s in ensemble]
    for step in steps:
        alone = Translator.load(step, "cpu").score(sources, translations)
        assert max(abs(a - b) for s, t in zip(alone, together, strict=True)
                   for a, b in zip(s.log_probs, t, strict=True)) > 0.01


def test_bad_input_is_one_line(trained_run, tmp_path):
    ckpt = str(trained_run[0] / "best.pt")
    src, hyp = _files(tmp_path, ["Ein Hund.", "Zwei Katzen."], ["A dog."])
    for args, message in (
            (["--src", src, "--hyp", hyp], "must be parallel line by line"),
            (["--src", src, "--hyp", str(tmp_path / "none.txt")], "--hyp file"),
            (["--src", src], "the following arguments are required: --hyp")):
        result = run_cli(["score", "--checkpoint", ckpt, *args])
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert message in result.stderr.strip().splitlines()[-1]
    # a word the model cannot write: refused as a prefix with it is, not scored as <unk>
    src, hyp = _files(tmp_path, ["Ein Hund."], ["A Zorblax dog."])
    result = run_cli(["score", "--checkpoint", ckpt, "--src", src, "--hyp", hyp])
    assert result.returncode == 2
    assert "holds 'Zorblax', which this model's target vocabulary does not have" in \
        result.stderr.strip().splitlines()[-1]
    # one its source holds: what the model writes as <unk> there, copied (decode.replace_unk)
    src, hyp = _files(tmp_path, ["Ein Zorblax."], ["A Zorblax dog."])
    result = run_cli(["score", "--checkpoint", ckpt, "--src", src, "--hyp", hyp, "--json",
                      "--precision", "fp32"])
    assert result.returncode == 0, result.stderr
    copied, t = json.loads(result.stdout), Translator.load(ckpt, "cpu")
    [unk] = t.engine.score(t.encode(["Ein Zorblax."]), [t.tgt_vocab.encode(
        ["A", "<unk>", "dog", "."], eos=False)], t.settings(precision="fp32"))
    assert copied["token_log_probs"] == pytest.approx(unk, abs=1e-5)
    assert copied["tokens"] == ["A", "Zorblax", "dog", ".", "<eos>"]
    refused = run_cli(["score", "--checkpoint", ckpt, "--src", src, "--hyp", hyp,
                       "--no-replace-unk"])
    assert refused.returncode == 2 and "'Zorblax'" in refused.stderr
