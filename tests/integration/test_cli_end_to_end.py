"""The CLI end to end on a few hundred Multi30k pairs: train, translate, evaluate, info, average."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.helpers import (
    DATA_DIR,
    REPO,
    TOY_DE_EN,
    needs_data,
    run_cli,
    tiny_train_args,
)


def test_train_writes_checkpoints_metrics_and_config(trained_run):
    run_dir, result = trained_run
    for name in ("last.pt", "best.pt", "config.yaml", "src_vocab.json", "tgt_vocab.json",
                 "metrics.jsonl", "train.log"):
        assert (run_dir / name).is_file(), name
    assert sorted(p.name for p in run_dir.glob("step_*.pt")) == ["step_0000003.pt",
                                                                 "step_0000006.pt"]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in records if r["type"] == "train"]
    assert train_steps == [1, 2, 3, 4, 5, 6]
    assert all({"loss", "lr", "tokens_per_s", "grad_norm"} <= r.keys()
               for r in records if r["type"] == "train")
    valid = [r for r in records if r["type"] == "valid"]
    assert [r["step"] for r in valid] == [3, 6]
    assert all({"val_loss", "val_ppl", "val_bleu", "val_chrf"} <= r.keys() for r in valid)
    losses = [r["loss"] for r in records if r["type"] == "train"]
    assert losses[-1] < losses[0]  # it learns something even in 6 steps
    assert "trained to step 6" in result.stdout


def test_translate_sentence_file_and_stdin(trained_run, tmp_path):
    run_dir, _ = trained_run
    ckpt = str(run_dir / "best.pt")
    result = run_cli(["translate", "--checkpoint", ckpt, "Ein Mann fährt Fahrrad.",
                      "Zwei Hunde spielen."])
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2
    inp = tmp_path / "in.de"
    inp.write_text("Ein Hund läuft.\n\nEine Frau singt.\n", encoding="utf-8")
    out = tmp_path / "out.en"
    result = run_cli(["translate", "--checkpoint", ckpt, "--input", str(inp), "--output",
                      str(out)])
    assert result.returncode == 0, result.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and lines[1] == ""  # one output line per input line, order kept
    piped = "".join(f"{s}\n" for s in ["Ein Hund läuft.", "", "Eine Frau singt."] * 100)
    result = run_cli(["translate", "--checkpoint", ckpt, "--input", str(inp)])
    together = result.stdout.splitlines()
    result = run_cli(["translate", "--checkpoint", ckpt], stdin=piped)  # in chunks of 256
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == together * 100  # every line, in order
    result = run_cli(["translate", "--checkpoint", ckpt, "--beam", "3", "--nbest", "2",
                      "Ein Hund läuft."])
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(rows) == 2 and all(r[0] == "0" and len(r) == 3 for r in rows)
    assert float(rows[0][1]) >= float(rows[1][1])


def test_evaluate_prints_bleu_chrf_and_signature(trained_run, tmp_path):
    run_dir, _ = trained_run
    hyp = tmp_path / "hyp.txt"
    result = run_cli(["evaluate", "--checkpoint", str(run_dir / "best.pt"), "--split", "val",
                      "--max-sentences", "25", "--output", str(hyp), "--json"])
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["sentences"] == 25
    assert 0.0 <= summary["bleu"] <= 100.0 and 0.0 <= summary["chrf"] <= 100.0
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in summary["bleu_signature"]
    assert len(hyp.read_text(encoding="utf-8").splitlines()) == 25
    result = run_cli(["evaluate", "--checkpoint", str(run_dir / "best.pt"), "--split", "val",
                      "--max-sentences", "10"])
    assert result.returncode == 0, result.stderr
    assert "BLEU = " in result.stdout and "chrF2 = " in result.stdout
    assert summary["unk_copied"] and "each <unk> written as a source word" in result.stdout
    assert summary["end_as_source"] and "each ending as its source ends" in result.stdout
    plain = json.loads(run_cli(["evaluate", "--checkpoint", str(run_dir / "best.pt"), "--split",
                                "val", "--max-sentences", "4", "--json", "--no-replace-unk",
                                "--no-end-as-source"]).stdout)
    assert plain["unk_copied"] is False and plain["end_as_source"] is False
    # every decoding setting of mt translate: the same translations as it gives
    settings = ["--beam-size", "3", "--alpha", "1.5", "--max-len-b", "7"]
    result = run_cli(["evaluate", "--checkpoint", str(run_dir / "best.pt"), "--split", "val",
                      "--max-sentences", "8", "--output", str(hyp), "--json", *settings])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["alpha"] == 1.5
    sources = tmp_path / "val.de"
    sources.write_text("".join((TOY_DE_EN / "valid.de").read_text(encoding="utf-8")
                               .splitlines(True)[:8]),
                       encoding="utf-8")
    translated = run_cli(["translate", "--checkpoint", str(run_dir / "best.pt"), "--input",
                          str(sources), *settings])
    assert translated.stdout == hyp.read_text(encoding="utf-8")


@needs_data
def test_evaluate_reads_multi30k_from_data_dir_over_the_checkpoints(trained_run, tmp_path):
    """``--data-dir`` is where Multi30k's sets are looked for first, before the directory the
    checkpoint's config names (here one holding a damaged copy); the checkpoint is not
    changed."""
    from transformer_mt.checkpoint import load_checkpoint, save_checkpoint

    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in ("test_2016_flickr.de.gz", "test_2016_flickr.en.gz"):
        (damaged / name).write_bytes(b"not the file")
    ckpt = load_checkpoint(trained_run[0] / "best.pt")
    ckpt["config"]["data"].update(train={"multi30k": "train"}, test=None,  # Multi30k's sets
                                  data_dir=str(damaged))
    path = tmp_path / "multi30k.pt"
    save_checkpoint(ckpt, path)
    args = ["evaluate", "--checkpoint", str(path), "--split", "test_2016_flickr",
            "--max-sentences", "5", "--json"]
    refused = run_cli(args)
    assert refused.returncode != 0 and "is corrupt" in refused.stderr
    result = run_cli([*args, "--data-dir", str(DATA_DIR)])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sentences"] == 5
    assert load_checkpoint(path)["config"]["data"]["data_dir"] == str(damaged)


def test_info_and_average(trained_run, tmp_path):
    run_dir, _ = trained_run
    result = run_cli(["info", str(run_dir / "last.pt"), "--json"])
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["step"] == 6 and info["resumable"] is True and info["format_version"] == 1
    assert info["config"]["model"]["d_model"] == 32
    flagged = run_cli(["info", "--checkpoint", str(run_dir / "last.pt"), "--json"])
    assert json.loads(flagged.stdout) == info  # (named as the other commands name it)
    for argv, said in ((["info"], "name one checkpoint: mt info CKPT (or --checkpoint CKPT)"),
                       (["info", "a.pt", "--checkpoint", "b.pt"],
                        "two checkpoints named (a.pt and b.pt): give one")):
        refused = run_cli(argv)
        assert refused.returncode == 2 and refused.stderr.strip() == f"mt info: error: {said}"
    avg = tmp_path / "avg.pt"
    steps = sorted(str(p) for p in run_dir.glob("step_*.pt"))
    result = run_cli(["average", "--output", str(avg), *reversed(steps)])
    assert result.returncode == 0, result.stderr
    assert json.loads(run_cli(["info", str(avg), "--json"]).stdout)["step"] == 6  # the latest
    result = run_cli(["translate", "--checkpoint", str(avg), "Ein Hund."])
    assert result.returncode == 0 and result.stdout.strip()


def test_training_again_on_a_finished_run_resumes_and_does_nothing(trained_run):
    run_dir, _ = trained_run
    before = (run_dir / "metrics.jsonl").read_text()
    result = run_cli(tiny_train_args(run_dir))
    assert result.returncode == 0, result.stderr
    assert "already complete" in result.stderr
    assert (run_dir / "metrics.jsonl").read_text() == before


def test_interactive_prompt_on_a_terminal(trained_run):
    """With a terminal on stdin, mt translate prompts, translates each line, stops at Ctrl-D."""
    import pty


    run_dir, _ = trained_run
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "transformer_mt", "translate",
                             "--checkpoint", str(run_dir / "best.pt")], cwd=REPO,
                            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    os.close(terminal)
    time.sleep(0.5)
    os.write(controller, "Ein Hund läuft.\n".encode())
    os.write(controller, b"\x04")  # Ctrl-D at the prompt: end of input
    out, err = proc.communicate(timeout=120)
    os.close(controller)
    assert proc.returncode == 0, err
    assert "Type a sentence (de)" in err
    assert out.count("de> ") == 2 and out.count("en> ") == 1  # two prompts, one translation


def test_command_line_conveniences(trained_run, tmp_path):
    run_dir, _ = trained_run
    ckpt = str(run_dir / "best.pt")
    version = run_cli(["--version"])
    assert version.returncode == 0 and "transformer_mt" in version.stdout
    assert "torch" in version.stdout
    # --quiet and --debug before the command as well as after it
    quiet = run_cli(["--quiet", "translate", "--checkpoint", ckpt, "Ein Hund."])
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout.strip()
    debug = run_cli(["--debug", "info", str(tmp_path / "missing.pt")])
    assert debug.returncode != 0 and "Traceback" in debug.stderr
    # sentences and --input together are refused, not one of them silently ignored
    inp = tmp_path / "in.de"
    inp.write_text("Ein Hund.\n")
    both = run_cli(["translate", "--checkpoint", ckpt, "--input", str(inp), "Eine Katze."])
    assert both.returncode != 0 and "not both" in both.stderr.strip().splitlines()[-1]
    # every command's --help shows its defaults
    help_text = run_cli(["translate", "--help"]).stdout
    assert "(default: 1)" in help_text and "(default: auto)" in help_text
    assert "(default: auto)" in run_cli(["trace", "--help"]).stdout  # like the others


def test_decoding_options_on_the_command_line(trained_run):
    run_dir, _ = trained_run
    ckpt = str(run_dir / "best.pt")
    sentence = "Ein Mann fährt mit dem Fahrrad die Straße entlang."

    def translate(*options: str) -> str:
        result = run_cli(["translate", "--checkpoint", ckpt, *options, sentence])
        assert result.returncode == 0, result.stderr
        return result.stdout

    short = translate("--beam", "1", "--max-len-a", "0", "--max-len-b", "2")
    assert len(short.split()) <= 2
    sampled = [translate("--sample-topk", "50", "--seed", str(s), "--temperature", "2")
               for s in (1, 1, 2, 3)]
    assert sampled[0] == sampled[1] and len(set(sampled)) > 1  # seeded, and random
    assert translate("--sample-topk", "1") == translate("--beam", "1")  # top-1 is greedy
    nucleus = [translate("--top-p", "0.9", "--seed", str(s), "--temperature", "2")
               for s in (1, 1, 2, 3)]
    assert nucleus[0] == nucleus[1] and len(set(nucleus)) > 1
    assert translate("--top-p", "0.000001") == translate("--beam", "1")  # a point: greedy
    ensemble = translate("--checkpoint", ckpt, "--beam", "3")  # the same model twice
    assert ensemble == translate("--beam", "3")
    from transformer_mt.translate import Translator

    translator = Translator.load(ckpt, "cpu")
    for precision in ("fp32", "bf16"):  # what an export's translations are compared with
        assert translate("--precision", precision, "--beam", "2") == translator.translate(
            [sentence], beam_size=2, precision=precision)[0] + "\n"
    bad = run_cli(["translate", "--checkpoint", ckpt, "--precision", "fp64", sentence])
    assert bad.returncode == 2 and "invalid choice: 'fp64'" in bad.stderr
    bad = run_cli(["translate", "--checkpoint", ckpt, "--alpha", "-1", sentence])
    assert bad.returncode != 0 and "decode.alpha" in bad.stderr.strip().splitlines()[-1]


def test_every_save_writes_a_step_checkpoint_so_a_run_stopped_early_averages(tmp_path,
                                                                                monkeypatch):
    """Each scheduled save writes a step checkpoint and the last train.keep_last stay, so a run
    stopped long before its budget (Ctrl-C, a time limit) has saves to average: only the last
    few of a fixed budget were written, and a run stopped before them had last.pt alone. The
    stop's own save (step 10) is last.pt, not a step file; a run that ends keeps its last."""
    from transformer_mt.training.stop import StopSignals

    agreed = StopSignals.agreed

    def ctrl_c_at_step_10(self: StopSignals, step: int) -> bool:
        if step == 10:
            self.signum = signal.SIGINT
        return agreed(self, step)

    monkeypatch.setattr(StopSignals, "agreed", ctrl_c_at_step_10)
    for max_steps, code, kept in ((100000, 130, (6, 9)), (8, 0, (6, 8))):
        run = tmp_path / f"run-{max_steps}"
        result = run_cli(tiny_train_args(run, f"train.max_steps={max_steps}", "train.keep_last=2",
                                         "train.eval_every=100", "train.max_epochs=null"))
        assert result.returncode == code, result.stderr
        assert sorted(p.name for p in run.glob("step_*.pt")) == [f"step_{s:07d}.pt" for s in kept]


def test_info_says_how_many_pairs_were_trained_on_and_removed(trained_run):
    result = run_cli(["info", str(trained_run[0] / "last.pt"), "--json"])
    info = json.loads(result.stdout)
    assert info["training_pairs"] + sum(info["removed_pairs"].values()) == 300  # max_pairs
    assert set(info["removed_pairs"]) == {"too_long"}  # no filter asked for
    # how long the sources were, and the sentences translated whole since (the same)
    lengths = info["source_tokens"]
    assert 0 < lengths["99.9%"] <= lengths["max"] <= 100  # data.max_len
    assert info["config"]["decode"]["max_sentence_tokens"] == lengths["99.9%"]
