"""Bad input, second round (#21): each case ends in one line on stderr and a non-zero exit (or,
from Python, a TypeError/ValueError that says what was expected), and nothing is lost."""

from __future__ import annotations

import gzip
import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import run_cli, tiny_train_args
from transformer_mt.checkpoint import load_checkpoint
from transformer_mt.config.file import config_from_dict
from transformer_mt.errors import MTError


def _error_line(result) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def _altered(src, dst, change) -> None:
    ckpt = torch.load(src, weights_only=True)
    change(ckpt)
    torch.save(ckpt, dst)


@pytest.mark.parametrize("option, value, expected", [
    ("--max-len-a", "1e30", "decode.max_len_a' must be in [0.0, 1000.0]"),
    ("--max-len-a", "inf", "decode.max_len_a' must be a finite number"),
    ("--temperature", "inf", "decode.temperature' must be a finite number"),
    ("--temperature", "1e-300", "decode.temperature' must be in [0.01, 100.0]"),
    ("--alpha", "nan", "decode.alpha' must be a finite number"),
    ("--device", "tpu", "device 'tpu' is not one this tool runs on"),
    ("--device", "cuda:x", "device 'cuda:x' is not one this tool runs on"),
])
def test_decoding_settings_are_bounded_at_the_edge(trained_run, option, value, expected):
    run_dir, _ = trained_run
    extra = ["--sample-topk", "5"] if option == "--temperature" else []
    result = run_cli(["translate", "--checkpoint", str(run_dir / "best.pt"), option, value,
                      *extra, "Ein Hund läuft."])
    assert expected in _error_line(result)


@pytest.mark.parametrize("argv, expected", [
    (["translate", "--checkpoint", "m.pt", "--beam-szie", "3", "Hallo"],
     "mt translate: error: unrecognized arguments: --beam-szie (did you mean --beam-size?)"),
    (["evaluate", "--checkpoint", "m.pt", "--splt=val"],
     "mt evaluate: error: unrecognized arguments: --splt=val (did you mean --split?)"),
    (["info", "m.pt", "--zzz"], "mt info: error: unrecognized arguments: --zzz"),
    (["translte", "--checkpoint", "m.pt"], "mt: error: argument COMMAND: invalid choice: "
     "'translte' (choose from"),
])
def test_a_mistyped_option_or_command_is_said_with_the_one_meant(argv, expected):
    """An option a command does not take is that command's error, under its own usage, with
    the option it most looks like; a command that is not one, with the commands."""
    result = run_cli(argv)
    assert result.returncode == 2 and _error_line(result).startswith(expected)
    usage = f"usage: mt {argv[0]} " if expected.startswith(f"mt {argv[0]}:") else "usage: mt "
    assert result.stderr.startswith(usage)


def test_a_file_given_without_its_option_is_said_with_it(tmp_path, capsys):
    """``mt train config.yaml``: the one option missing, and the file meant for it; not a file
    that is another option's value, nor one of another kind, nor for an output."""
    from transformer_mt.cli import main

    config, ckpt = tmp_path / "cpu.yaml", tmp_path / "best.pt"
    config.touch()
    ckpt.touch()
    for argv, expected in (
            (["train", str(config)], f"--config (did you mean --config {config}?)\n"),
            (["translate", str(ckpt), "Hallo"], f"(did you mean --checkpoint {ckpt}?)\n"),
            (["translate", "--input", str(config), "Hallo"], "required: --checkpoint\n"),
            (["score", str(ckpt)], "required: --checkpoint, --src, --hyp\n"),
            (["average", str(ckpt), str(ckpt)], "required: --output\n"),  # not an input
            (["train", str(ckpt)], "required: --config\n")):  # not a config
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and capsys.readouterr().err.endswith(expected)


def test_a_gpu_where_there_is_none_names_the_commands_flag(trained_run):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                      "--device", "cuda", "Ein Hund läuft."])
    line = _error_line(result)
    assert line.startswith("mt translate: error: device 'cuda' asks for CUDA")
    assert "To use the CPU: --device cpu" in line


def test_translating_from_python_says_what_was_expected(trained_run):
    from transformer_mt.training.trainer import train
    from transformer_mt.translate import Translator

    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    for bad in ([1, 2], (s for s in ["Ein Hund."]), "Ein Hund."):
        with pytest.raises(TypeError, match="list of texts"):
            translator.translate(bad)
    with pytest.raises(ValueError, match=r"decode.sample_topk' must be of type int"):
        translator.translate(["Ein Hund."], sample_topk="5")
    with pytest.raises(ValueError, match=r"decode.max_len_b' must be in \[0, 1000000\]"):
        translator.translate(["Ein Hund."], max_len_b=10**30)
    with pytest.raises(ValueError, match="unknown decoding setting 'beam'"):
        translator.translate(["Ein Hund."], beam=3)
    with pytest.raises(ValueError, match="no checkpoint to load"):
        Translator.load([])
    with pytest.raises(TypeError, match="train takes a Config"):
        train({"model": {}}, trained_run[0].parent / "never")
    assert not (trained_run[0].parent / "never").exists()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["decode.beam_size", "decode.alpha", "decode.max_len_a",
                            "decode.max_len_b", "decode.temperature", "decode.sample_topk",
                            "decode.batch_size", "data.vocab_size", "model.d_model",
                            "train.lr", "train.max_tokens", "model.dropout", "name"]),
       value=st.one_of(st.integers(), st.floats(), st.text(max_size=12), st.booleans(),
                       st.none(), st.lists(st.integers(), max_size=2)))
def test_the_config_loader_never_raises_anything_but_its_one_line_error(key, value):
    """Fuzz: any value for a key is either accepted (and then in range) or a ConfigError."""
    try:
        config = config_from_dict({}, [f"{key}={value!r}" if isinstance(value, str)
                                       else f"{key}={value}"])
    except MTError as exc:
        assert "\n" not in str(exc)
        return
    config.validate()


def test_damaged_or_foreign_weights_are_refused_before_a_run_directory_exists(trained_run,
                                                                               tmp_path):
    run_dir, _ = trained_run
    cases = {
        "missing": lambda c: c["model"].pop(next(iter(c["model"]))),
        "shape": lambda c: c["model"].update(
            {k: v[:-1] for k, v in list(c["model"].items())[:1]}),
        "nan": lambda c: next(v for v in c["model"].values() if v.is_floating_point()).fill_(
            float("nan")),
    }
    for name, change in cases.items():
        _altered(run_dir / "best.pt", tmp_path / f"{name}.pt", change)
        new_run = tmp_path / f"run-{name}"
        result = run_cli(tiny_train_args(new_run, f"train.init_from={tmp_path / f'{name}.pt'}"))
        line = _error_line(result)
        assert ("do not fit" in line) if name != "nan" else ("NaN" in line and "lr" not in line)
        assert not new_run.exists(), name
    # a damaged last.pt: refused, the run's other files untouched
    resumed = tmp_path / "resumed"
    assert run_cli(tiny_train_args(resumed, "train.max_steps=2")).returncode == 0
    _altered(resumed / "last.pt", resumed / "last.pt", cases["shape"])
    log_before = (resumed / "train.log").read_text()
    assert "do not fit" in _error_line(run_cli(tiny_train_args(resumed, "train.max_steps=4")))
    assert (resumed / "train.log").read_text() == log_before


def test_damaged_subword_models_and_exports_are_named(trained_run, tmp_path):
    pytest.importorskip("ctranslate2")
    run_dir, _ = trained_run
    out = tmp_path / "ct2"
    assert run_cli(["export", str(run_dir / "best.pt"), str(out)]).returncode == 0
    assert "is a CTranslate2 export (mt export), not a checkpoint" in _error_line(run_cli(
        ["translate", "--engine", "torch", "--checkpoint", str(out), "Ein Hund."]))
    (out / "transformer_mt.json").write_text("{not json")
    line = _error_line(run_cli(["translate", "--engine", "ctranslate2", "--checkpoint",
                                str(out), "Ein Hund."]))
    assert "not a complete export" in line
    (out / "model.bin").write_bytes(b"not a model")
    assert "not a complete export" in _error_line(run_cli(
        ["translate", "--engine", "ctranslate2", "--checkpoint", str(out), "Ein Hund."]))
    assert run_cli(["export", str(run_dir / "best.pt"), str(out), "--overwrite"]).returncode == 0
    for vocabulary in out.glob("*_vocabulary.json"):
        vocabulary.unlink()
    assert "not a complete export" in _error_line(run_cli(
        ["translate", "--engine", "ctranslate2", "--checkpoint", str(out), "Ein Hund."]))


def test_empty_sentencepiece_models_are_refused_or_learnt_again(tmp_path, monkeypatch, caplog):
    from transformer_mt.config.data import DataConfig
    from transformer_mt.data.tokenize import SubwordTokenizer, cached_sentencepiece
    from transformer_mt.errors import DataError

    with pytest.raises(DataError, match="empty"):
        SubwordTokenizer(b"")
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path))
    texts = [f"ein hund läuft {i} mal über die wiese" for i in range(300)]
    cfg = DataConfig(tokenizer="sentencepiece", vocab_size=300)
    model = cached_sentencepiece(texts, cfg, "fingerprint")
    [cached] = (tmp_path / "sentencepiece").glob("*/spm.model")
    cached.write_bytes(b"")  # emptied in the cache
    with caplog.at_level("WARNING"):
        assert cached_sentencepiece(texts, cfg, "fingerprint") == model
    assert "damaged" in caplog.text and cached.read_bytes() == model


def test_a_vocabulary_too_small_for_the_corpus_says_the_size_that_learns():
    """SentencePiece needs a piece for each byte, special and character: below that, one line
    with the size to set (not its own advice, "--character_coverage option"), which learns."""
    from transformer_mt.config.data import DataConfig
    from transformer_mt.data.tokenize import SubwordTokenizer, train_sentencepiece
    from transformer_mt.errors import DataError

    texts = ["Ein Hund läuft über die Wiese.", "Zwei Katzen schlafen."]
    with pytest.raises(DataError) as error:
        train_sentencepiece(texts, DataConfig(tokenizer="sentencepiece", vocab_size=100))
    message = str(error.value)
    assert message.startswith("data.vocab_size 100 is too small for this corpus") \
        and "character_coverage" not in message
    need = int(message.rsplit("set data.vocab_size to ", 1)[1].split()[0])
    assert need > 256 + 4
    model = train_sentencepiece(texts, DataConfig(tokenizer="sentencepiece", vocab_size=need))
    assert next(iter(SubwordTokenizer(model).tokenize(["Ein Hund."])))


def test_a_vocabulary_size_beyond_sentencepiece_is_a_config_error():
    with pytest.raises(MTError, match=r"data.vocab_size' must be in \[16, 1000000\]"):
        config_from_dict({}, ["data.vocab_size=10000000000"])


def test_files_that_cannot_be_read_as_text_are_named_for_what_they_are(trained_run,
                                                                         tmp_path):
    ckpt = str(trained_run[0] / "best.pt")
    corrupt = tmp_path / "corrupt.de.gz"
    corrupt.write_bytes(gzip.compress(b"Ein Hund.\n" * 50)[:30] + b"\x00" * 64)
    assert "cannot read" in _error_line(run_cli(["translate", "--checkpoint", ckpt, "--input",
                                                 str(corrupt)]))
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for path, expected in ((loop, "loop of symbolic links"), (tmp_path, "is a directory"),
                           (tmp_path / "none", "not found")):
        line = _error_line(run_cli(["translate", "--checkpoint", ckpt, "--input", str(path)]))
        assert expected in line, line
    cr_only = tmp_path / "cr.de"
    cr_only.write_bytes(b"Ein Hund.\rZwei Katzen.\rDrei.\r")
    assert "CR-only line ends" in _error_line(run_cli(["translate", "--checkpoint", ckpt,
                                                       "--input", str(cr_only)]))
    empty = tmp_path / "empty.de"
    empty.write_text("")
    line = _error_line(run_cli(["evaluate", "--checkpoint", ckpt, "--src", str(empty), "--ref",
                                str(empty)]))
    assert "is empty" in line
    os.link(ckpt, tmp_path / "ckpt.png")  # the checkpoint under an image's name
    for target, expected in (("att.txt", "not an image name"), (ckpt, "not an image name"),
                             (str(tmp_path / "ckpt.png"), "same file")):
        line = _error_line(run_cli(["translate", "--checkpoint", ckpt, "--attention", target,
                                    "Ein Hund läuft."]))
        assert expected in line, line
    assert torch.load(ckpt, weights_only=True)["model"]  # the checkpoint is intact


def test_a_huge_line_is_cut_before_tokenizing_and_its_pair_dropped(tmp_path):
    train = tmp_path / "train"
    src = [f"Ein Hund läuft {i} mal." for i in range(60)]
    tgt = [f"A dog runs {i} times." for i in range(60)]
    src[7] = "Hund " * 400_000  # 2 MB in one line
    (tmp_path / "train.de").write_text("".join(s + "\n" for s in src))
    (tmp_path / "train.en").write_text("".join(s + "\n" for s in tgt))
    result = run_cli(tiny_train_args(
        train, f"data.train={{src: {tmp_path / 'train.de'}, tgt: {tmp_path / 'train.en'}}}",
        "data.test={}", "data.max_pairs=null", "train.max_steps=2"))
    assert result.returncode == 0, result.stderr
    assert "1 line(s) longer than 20,000 characters were cut" in result.stderr
    assert "59 training pairs" in result.stderr and "removed: 1 too_long" in result.stderr


@pytest.mark.parametrize("sets, expected", [
    ([], "data.train: every one of its 60 src sentences is empty ({dir}/train.tsv);"),
    (["data.tokenizer=sentencepiece", "data.vocab_size=300", "data.shared_vocab=false"],
     "the training corpora's src side (de): no text to learn a SentencePiece model from"),
    (["data.tokenizer=sentencepiece", "data.vocab_size=300", "data.shared_vocab=true"],
     "data.train: every one of its 60 src sentences is empty ({dir}/train.tsv);"),
])
def test_a_side_without_text_is_refused_before_training(tmp_path, sets, expected):
    """A training corpus whose sources are all empty (a TSV's lines 'translation<TAB>' the
    other way round, an empty column) is one line, not a model trained on nothing: said
    by SentencePiece's learning where the side has a model of its own, else as read."""
    (tmp_path / "train.tsv").write_text("".join(f"\tA dog runs {i} times.\n" for i in range(60)))
    result = run_cli(tiny_train_args(tmp_path / "run", f"data.train={{tsv: {tmp_path}/train.tsv}}",
                                     "data.max_pairs=null", *sets))
    assert expected.format(dir=tmp_path) in _error_line(result)
    assert not (tmp_path / "run").exists()


def test_missing_test_files_are_found_before_training(tmp_path):
    result = run_cli(tiny_train_args(tmp_path / "run",
                                     f"data.test={{news: {{tsv: {tmp_path / 'none.tsv'}}}}}"))
    assert "data.test.news" in _error_line(result) and not (tmp_path / "run").exists()


@settings(max_examples=150, deadline=None)
@given(changes=st.dictionaries(
    st.sampled_from(["beam_size", "alpha", "max_len_a", "max_len_b", "temperature",
                     "sample_topk", "top_p", "sample_seed", "batch_size", "precision",
                     "bogus"]),
    st.one_of(st.integers(), st.floats(), st.text(max_size=8), st.booleans(), st.none()),
    max_size=4))
def test_decoding_settings_from_python_are_checked_never_crash(changes):
    """Fuzz: Translator.settings accepts a value only in range, else a one-line ValueError."""
    from transformer_mt.config import Config
    from transformer_mt.data.vocab import Vocab
    from transformer_mt.translate import Translator

    vocab = Vocab(["<unk>", "<pad>", "<bos>", "<eos>", "a"])
    translator = Translator(None, Config(), vocab, vocab, tokenizers=(None, None))
    try:
        cfg = translator.settings(**changes)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    cfg.validate()
    for k, v in changes.items():  # as given (a float also as a string: "1e-3", as YAML reads it)
        if v is not None and k != "beam_size":
            assert getattr(cfg, k) == (float(v) if isinstance(v, str) and isinstance(
                getattr(cfg, k), float) else v), (k, v)


@pytest.mark.parametrize("change, expected", [
    (lambda c: c.update(data=None), "'data' must be a mapping, got NoneType"),
    (lambda c: c.update(data="garbage"), "'data' must be a mapping, got str"),
    (lambda c: c.update(data={"pairs": "many", "corpora": 5}), "'data.pairs' must be a number"),
    (lambda c: c.update(data={"corpora": [5]}), "'data.corpora' must be a list of mappings"),
    (lambda c: c["config"].update(data=None), "its 'data' section is null"),
    (lambda c: c["config"].update(data="garbage"), "its 'data' section is str"),
    (lambda c: c["config"].pop("data"), "it has no 'data' section"),
])
def test_mt_info_on_a_malformed_checkpoint_is_one_line(trained_run, tmp_path, change, expected):
    """A checkpoint whose training summary or stored config is malformed was a traceback in
    mt info (and translate); a null data section was read as the defaults (another model)."""
    run_dir, _ = trained_run
    _altered(run_dir / "best.pt", tmp_path / "odd.pt", change)
    for command in (["info", str(tmp_path / "odd.pt")],
                    ["translate", "--checkpoint", str(tmp_path / "odd.pt"), "Ein Hund."]):
        assert expected in _error_line(run_cli(command))


@pytest.mark.parametrize("args", [
    ["translate", "--checkpoint", "CKPT", "Ein \udcffHund."],
    ["trace", "--checkpoint", "CKPT", "Ein \udcffHund."],
    ["train", "--config", "config/quickstart.yaml", "--run-dir", "RUN"],
])
def test_arguments_that_are_not_utf8_are_one_line(tmp_path, args):
    """Bytes that are not UTF-8 in a sentence or a run directory's name reach Python as lone
    surrogates: spaCy raised on them, and a run wrote into a directory its log could not name."""
    run = tmp_path / "r\udcffun"
    argv = [str(run) if a == "RUN" else str(tmp_path / "x.pt") if a == "CKPT" else a
            for a in args]
    result = run_cli(argv, fresh_process=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is not valid UTF-8 (byte 0xff" in result.stderr.strip().splitlines()[-1]
    assert not any(tmp_path.iterdir())  # nothing written


def test_files_that_do_not_pair_up_or_outrun_the_model_are_one_line(trained_run, tmp_path):
    """mt evaluate --hyp/--ref of different lengths, and mt score of a translation longer
    than the model's positions: one line that says what to do, exit 2, no traceback."""
    ckpt = str(trained_run[0] / "best.pt")
    (tmp_path / "hyp.en").write_text("A dog.\nTwo cats.\n")
    (tmp_path / "ref.en").write_text("A dog.\n")
    (tmp_path / "src.de").write_text("Ein Hund.\n")
    most = load_checkpoint(ckpt)["config"]["model"]["max_positions"] - 2  # <bos>, <eos>
    for length, scored in ((most, True), (most + 1, False), (600, False)):
        (tmp_path / "long.en").write_text(" ".join(["dog"] * length) + "\n")
        result = run_cli(["score", "--checkpoint", ckpt, "--src", str(tmp_path / "src.de"),
                          "--hyp", str(tmp_path / "long.en")])
        assert (result.returncode == 0) == scored, result.stderr
        if not scored:
            assert f"translation 1 has {length} tokens; this model scores at most {most}" \
                in result.stderr and "Traceback" not in result.stderr
    result = run_cli(["evaluate", "--hyp", str(tmp_path / "hyp.en"), "--ref",
                      str(tmp_path / "ref.en")])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "2 translations but 1 references" in result.stderr.strip().splitlines()[-1]


def test_outputs_where_nothing_can_be_written_name_the_users_path(trained_run, tmp_path):
    """An output under a file (or in /proc, which holds no new files): one line naming the
    path asked for and why, not the temporary beside it nor Python's "[Errno 20]"."""
    ckpt = str(trained_run[0] / "best.pt")
    (tmp_path / "a-file").write_text("x")
    under = tmp_path / "a-file"
    for args, path in ((["translate", "--checkpoint", ckpt, "--output", str(under / "o.en"),
                         "Ein Hund."], under / "o.en"),
                       (["export", ckpt, "/proc/exported"], "/proc/exported"),
                       (["export", ckpt, str(under / "exported")], under / "exported")):
        line = _error_line(run_cli(args))
        assert line.startswith(f"mt {args[0]}: error: could not write '{path}': "), line
        assert "Errno" not in line and ".tmp" not in line
    line = _error_line(run_cli(tiny_train_args(under / "run")))
    assert line.startswith(f"mt train: error: '{under / 'run'}") and line.endswith(
        "': a part of this path is a file, not a folder"), line  # (the run's first file's)
    assert under.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
