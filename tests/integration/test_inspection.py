"""mt plot, mt translate --attention, mt trace: files written, PNGs readable, stages present."""

from __future__ import annotations

import re

import matplotlib.image as mpimg
import pytest
import torch

from tests.helpers import needs_data, run_cli


@pytest.fixture
def run_dir(trained_run):
    return trained_run[0]


def test_plot_writes_readable_pngs(run_dir, tmp_path):
    result = run_cli(["plot", str(run_dir), "--output", str(tmp_path)])
    assert result.returncode == 0, result.stderr
    for name in ("loss", "bleu", "lr"):
        image = mpimg.imread(tmp_path / f"{name}.png")
        assert image.shape[:2] == (360, 600)
        assert image.std() > 0.01  # not a blank canvas
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli(["plot", str(empty)])
    assert result.returncode != 0 and "metrics.jsonl" in result.stderr
    assert "Traceback" not in result.stderr
    result = run_cli(["plot", str(run_dir), "--output", str(tmp_path / "curves.png")])
    assert result.returncode == 2 and "give --output a folder" in result.stderr
    assert not (tmp_path / "curves.png").exists()  # no folder of that name made


def test_attention_map_has_one_row_per_output_token(run_dir, tmp_path):
    png = tmp_path / "att.png"
    result = run_cli(["translate", "--checkpoint", str(run_dir / "best.pt"), "--attention",
                      str(png), "--head", "1", "Ein Hund läuft."])
    assert result.returncode == 0, result.stderr
    image = mpimg.imread(png)
    assert image.ndim == 3 and min(image.shape[:2]) >= 250
    result = run_cli(["translate", "--checkpoint", str(run_dir / "best.pt"), "--attention",
                      str(png), "--layer", "5", "Ein Hund."])
    assert result.returncode != 0 and "out of range" in result.stderr


def test_cross_attention_weights_are_distributions(run_dir):
    from transformer_mt.inside.trace import cross_attention
    from transformer_mt.translate import Translator

    translator = Translator.load(run_dir / "best.pt", "cpu")
    src, out, weights, text = cross_attention(translator, "Ein Hund läuft.")
    assert text == translator.translate(["Ein Hund läuft."], beam_size=1)[0]
    # the API gives the same weights with the translation
    full = translator.translate(["Ein Hund läuft."], nbest=1, beam_size=1, attention=True)[0][0]
    assert torch.equal(full.attention, weights)
    assert src[-1] == "<eos>" and out[-1] == "<eos>"
    assert weights.shape == (len(out), len(src))
    assert weights.sum(-1).sub(1).abs().max() < 1e-4


def test_trace_shows_every_stage_with_shapes(run_dir, tmp_path):
    figures = tmp_path / "fig"
    result = run_cli(["trace", "--checkpoint", str(run_dir / "best.pt"), "--figures",
                      str(figures), "Ein Hund läuft über die Wiese."])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for stage in ("1. Tokens and ids", "2. Token embedding x sqrt(d_model) = x 5.7",
                  "3. Positional encoding", "4. Encoder: 1 layer of", "5. Decoder",
                  "6. Output"):
        assert stage in out, stage
    n_src = 8  # Ein Hund läuft über die Wiese . <eos>
    assert f"shape (1, {n_src}, 32) (batch, source length, d_model)" in out
    assert f"PE shape ({n_src}, 32)" in out
    assert f"attention weights (1, 2, {n_src}, {n_src})" in out
    assert re.search(r"step 0: prefix '<bos>' \| logits \(1, \d+\)", out)
    assert "top 5: " in out and "-> choose" in out
    names = {p.name for p in figures.iterdir()}
    assert {"positional_encoding.png", "encoder_layer0_head0.png", "encoder_layer0_head1.png",
            "decoder_layer0_head1_cross.png", "decoder_layer0_head0_self.png"} <= names


def test_trace_names_the_unknown_words_and_their_copies(run_dir, monkeypatch):
    """Stage 1 names the words the vocabulary lacks (not "<unk>"); an output ``<unk>`` is
    shown written as the source word it attends to most (the decoder's steps made to write
    one here: the tiny model writes none)."""
    from transformer_mt.inside import trace as tracing

    steps = tracing._trace_decoder
    monkeypatch.setattr(tracing, "_trace_decoder", lambda *a, **k: [
        *steps(*a, **k)[:1], "<unk>", "."])
    result = run_cli(["trace", "--checkpoint", str(run_dir / "best.pt"),
                      "Ein Mann aus Tübingen läuft."])
    assert result.returncode == 0, result.stderr
    named = re.search(r"not in the vocabulary \(become <unk>\): (.+)", result.stdout)
    assert named and "Tübingen" in named[1].split(", ") and "<unk>" not in named[1]
    copied = re.search(r"each <unk> written as the source word .*: '(\S+) (\S+)\.'",
                       result.stdout)
    assert copied and copied[2] in named[1].split(", ")


@needs_data  # an untrained model of the default config: Multi30k's vocabularies
def test_trace_without_checkpoint_says_untrained():
    result = run_cli(["trace", "Ein Hund."])
    assert result.returncode == 0, result.stderr
    assert "UNTRAINED" in result.stdout and "shape (1, 4, 256)" in result.stdout


def test_figures_without_matplotlib_name_the_plot_extra(run_dir, tmp_path, monkeypatch, capsys):
    """matplotlib is the optional `plot` extra: each command that draws says so in one line,
    before any work (no translation printed, no file written)."""
    from transformer_mt import cli, packages

    real = packages.installed
    monkeypatch.setattr(packages, "installed", lambda m: m != "matplotlib" and real(m))
    checkpoint = str(run_dir / "best.pt")
    for argv in (["plot", str(run_dir), "--output", str(tmp_path / "plots")],
                 ["translate", "--checkpoint", checkpoint, "--attention",
                  str(tmp_path / "att.png"), "Ein Hund läuft."],
                 ["trace", "--checkpoint", checkpoint, "--figures", str(tmp_path / "figs"),
                  "Ein Hund läuft."]):
        assert cli.main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, (argv, out, err)
        assert "transformer_mt[plot]" in err and "mt plot" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_trace_reads_its_sentence_from_standard_input_and_shows_the_ending(run_dir,
                                                                           monkeypatch):
    """A piped line (or "-") is the sentence; two lines are refused in one line. The decoder
    made to end with a full stop after a source that ends with a word: the output shown, then
    as ``mt translate`` writes it (``decode.end_as_source``)."""
    from transformer_mt.inside import trace as tracing

    steps = tracing._trace_decoder
    monkeypatch.setattr(tracing, "_trace_decoder", lambda *a, **k: [*steps(*a, **k)[:2], "."])
    checkpoint = str(run_dir / "best.pt")
    given = run_cli(["trace", "--checkpoint", checkpoint, "Ein Hund läuft"])
    assert given.returncode == 0, given.stderr
    for argv in (["trace", "--checkpoint", checkpoint], ["trace", "-", "--checkpoint",
                                                         checkpoint]):
        assert run_cli(argv, stdin="\nEin Hund läuft\n").stdout == given.stdout
    output = re.search(r"6\. Output: '(.+)'", given.stdout)
    ending = re.search(r"ended as the source ends \(decode.end_as_source\): '(.+)'",
                       given.stdout)
    assert output and ending and output[1].endswith(".") and ending[1] == output[1][:-1]
    two = run_cli(["trace", "--checkpoint", checkpoint], stdin="Ein Hund.\nEine Katze.\n")
    assert two.returncode == 2 and two.stderr.strip() == (
        "mt trace: error: mt trace walks one sentence through the model; standard input holds "
        "2 lines: give one")
    stopped = run_cli(["trace", "--checkpoint", checkpoint, "Ein Hund läuft."])
    assert "end_as_source" not in stopped.stdout  # (its source ends with one)
