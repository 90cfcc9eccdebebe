"""``--compile`` as a user meets it (``decode/compiled.py``): ``mt translate --compile`` prints
what ``mt translate`` prints, ``mt serve --compile`` compiles before it serves and answers as
without it, and what it cannot do (no C++ compiler, options it does not go with) is one line.

It reads the graphs tests/system/test_compiled.py compiled, of the same model (tests/conftest.py
runs it after that module); alone, it compiles them.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers import local_client, run_cli
from tests.toy import make_model, save_toy_checkpoint
from transformer_mt.decode.compiled import CompiledDecoding
from transformer_mt.errors import MTError
from transformer_mt.internals import torch_private
from transformer_mt.precision import for_decoding
from transformer_mt.translate import Translator

TEXT = "s3 s1 s4 s7 s2"  # the toy's symbols as words: it reverses them


@pytest.fixture(scope="module")
def fp32_checkpoint(one_layer_toy, tmp_path_factory):
    """The toy model as a checkpoint that decodes in fp32, where compiled and eager decoding
    compute alike on any CPU."""
    return save_toy_checkpoint(one_layer_toy, tmp_path_factory.mktemp("fp32") / "fp32.pt",
                               precision="fp32")


def test_mt_translate_compile_translates_as_without(fp32_checkpoint):
    """What a user runs: ``mt translate --compile`` of a sentence, in a fresh process, prints
    what ``mt translate`` prints."""
    compiled = run_cli(["translate", "--checkpoint", str(fp32_checkpoint), "--compile", TEXT],
                       fresh_process=True)
    assert compiled.returncode == 0, compiled.stderr
    plain = run_cli(["translate", "--checkpoint", str(fp32_checkpoint), TEXT])
    assert plain.returncode == 0, plain.stderr
    assert compiled.stdout == plain.stdout == " ".join(reversed(TEXT.split())) + "\n"


def test_mt_serve_compiles_before_it_serves(one_layer_toy, tmp_path):
    """``mt serve --compile``'s app of a greedy model: the decoder thread compiles while
    warming up, before the first request, a lone sentence's graphs (its beams' too: a request
    may ask for a beam) and a batch's, and requests of one sentence and of several, greedy
    and of a beam, are answered as without it."""
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    if not torch_private.compile_usable():  # the server then decodes eagerly, as it says
        pytest.skip("--compile is off on this torch (internals/torch_private.py)")
    texts = [TEXT, "s0 s9 s5", "s8 s8 s6 s1 s2 s0 s4"]
    greedy = save_toy_checkpoint(one_layer_toy, tmp_path / "greedy.pt", precision="fp32",
                                 beam_size=1)  # (the graphs of fp32_checkpoint's weights)
    plain = Translator.load(greedy, "cpu")
    translator = Translator.load(greedy, "cpu", compile=True)
    with local_client(create_app(translator, ServeOptions())) as client:
        decoding = translator.engine._copies["fp32"]  # made by the warm-up
        assert isinstance(decoding, CompiledDecoding)
        assert decoding.batches and decoding._one is not None and decoding.beams
        for asked, beam in ((texts[:1], 1), (texts[:1], 3), (texts, 1)):
            answer = client.post("/v1/translate", json={"text": asked, "beam_size": beam})
            assert answer.status_code == 200, answer.text
            assert [t["text"] for t in answer.json()["translations"]] == plain.translate(
                asked, beam_size=beam)


def test_a_beam_after_a_greedy_lone_sentence_runs_compiled(fp32_checkpoint, monkeypatch):
    """The API with ``compile=True``: a lone sentence greedy first loads a lone sentence's
    graphs but not its beams' (nor does scoring); a lone sentence's beam after it loads those
    (it ran uncompiled, ~3x slower) and runs them, and a beam wider than they take the
    batch's graph, each translating as without compiling."""
    if not torch_private.compile_usable():
        pytest.skip("--compile is off on this torch (internals/torch_private.py)")
    plain = Translator.load(fp32_checkpoint, "cpu")
    translator = Translator.load(fp32_checkpoint, "cpu", compile=True)
    assert translator.translate([TEXT], beam_size=1) == plain.translate([TEXT], beam_size=1)
    decoding = translator.engine._copies["fp32"]
    assert isinstance(decoding, CompiledDecoding)
    assert decoding.lone and not decoding.beams
    translator.score([TEXT], plain.translate([TEXT], beam_size=1))
    assert not decoding.beams  # scoring runs one hypothesis a sentence: no beam's graph
    ran = []
    monkeypatch.setattr(decoding, "_run", lambda runner, inputs: ran.append(runner) or
                        CompiledDecoding._run(decoding, runner, inputs))
    assert translator.translate([TEXT], beam_size=3) == plain.translate([TEXT], beam_size=3)
    assert decoding.beams and decoding._beam in ran and not decoding.batches
    # a beam wider than the lone graphs take (the toy's 14 tokens allow no beam past 6, so
    # they take 2 here: as if the beam of 3 were past a real model's 8)
    monkeypatch.setattr(decoding, "max_rows", 2)
    assert translator.translate([TEXT], beam_size=3) == plain.translate([TEXT], beam_size=3)
    assert decoding.batches and decoding._batch in ran


def test_a_lone_sentence_after_a_batch_runs_its_own_graphs(fp32_checkpoint):
    """The API with ``compile=True``: a batch first compiles (or loads) a batch's graph, and a
    lone sentence after it its own (it ran the batch's, 1.45x slower on the quickstart model);
    scoring, then, loads nothing more; each call translates as without compiling."""
    if not torch_private.compile_usable():
        pytest.skip("--compile is off on this torch (internals/torch_private.py)")
    texts = [TEXT, "s0 s9 s5", "s8 s8 s6 s1 s2 s0 s4"]
    plain = Translator.load(fp32_checkpoint, "cpu")
    translator = Translator.load(fp32_checkpoint, "cpu", compile=True)
    assert translator.translate(texts) == plain.translate(texts)
    decoding = translator.engine._copies["fp32"]
    assert isinstance(decoding, CompiledDecoding)
    assert decoding.batches and not decoding.lone
    for text in texts:
        assert translator.translate([text]) == plain.translate([text])
    assert decoding.lone
    loaded = decoding._beam, decoding._one
    outputs = plain.translate(texts)
    ours, theirs = translator.score(texts, outputs), plain.score(texts, outputs)
    assert [s.tokens for s in ours] == [s.tokens for s in theirs]
    assert [s.log_prob for s in ours] == pytest.approx([s.log_prob for s in theirs], abs=1e-4)
    assert (decoding._beam, decoding._one) == loaded


def test_compile_refusals_are_one_line(trained_run):
    run_dir, _ = trained_run
    ckpt = str(run_dir / "best.pt")
    for args, says in (
            (["--checkpoint", ckpt, "--checkpoint", ckpt], "--compile decodes with one model"),
            (["--checkpoint", ckpt, "--engine", "ctranslate2"], "the CTranslate2 engine has"),
    ):
        result = run_cli(["translate", *args, "--compile", "Hallo"])
        assert result.returncode != 0
        assert says in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("cxx", ["/nonexistent/g++", "false"])
def test_no_compiler_is_a_one_line_error(monkeypatch, tmp_path, cxx):
    """Where there is no C++ compiler (``CXX``, which the compiling processes' inductor reads,
    names none: said before compiling) or inductor finds it does not work (said by the
    compiling process), loading says so in a line, and what to do; the cache keeps nothing.
    A graph whose turn comes after one failed does not start (the lone sentence's two graphs:
    as many started as run at once)."""
    from transformer_mt.decode.compilers import Worker

    monkeypatch.setenv("CXX", cxx)
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path))
    started = []
    compile_ = Worker.compile
    monkeypatch.setattr(Worker, "compile", lambda self, *args: started.append(args[0])
                        or compile_(self, *args))
    model = make_model(n_encoder_layers=1, n_decoder_layers=1)
    decoding = CompiledDecoding(for_decoding(model, "fp32"), model)
    with pytest.raises(MTError, match=r"could not compile the decoder: .*C\+\+ compiler"
                       r".*; translate without --compile") as caught:
        decoding.warm_up("fp32")
    assert "\n" not in str(caught.value)
    assert len(started) == (0 if cxx.startswith("/") else min(torch.get_num_threads(), 2))
    assert not [p for p in (tmp_path / "compiled").iterdir() if p.suffix != ".lock"]
