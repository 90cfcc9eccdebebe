from __future__ import annotations

import errno
import json
import os
import pickle
import re

import pytest
import torch

from tests.helpers import REPO, run_cli
from transformer_mt import average, build
from transformer_mt import checkpoint as ck
from transformer_mt.config import Config, ModelConfig
from transformer_mt.data.vocab import Vocab
from transformer_mt.errors import CheckpointError, MTError


def small_checkpoint(seed: int = 0) -> dict:
    torch.manual_seed(seed)
    cfg = Config(model=ModelConfig(d_model=16, n_heads=2, n_encoder_layers=1,
                                   n_decoder_layers=1, d_ff=32))
    vocab = Vocab.build([["a", "b"]], min_freq=1)
    model = build.build_model(cfg, vocab, vocab)
    return ck.make_checkpoint(model, cfg, vocab, vocab, {"step": seed})


def later_save(ckpt: dict, step: int) -> dict:
    """``ckpt`` as a later save of its run: the same model, its weights moved a little."""
    gen = torch.Generator().manual_seed(step)
    model = {k: v + 0.01 * torch.randn(v.shape, generator=gen) if v.is_floating_point()
             else v.clone() for k, v in ckpt["model"].items()}
    return {**ckpt, "model": model, "progress": {"step": step}}


def test_round_trip_rebuilds_the_model(tmp_path):
    ckpt = small_checkpoint()
    ck.save_checkpoint(ckpt, tmp_path / "m.pt")
    loaded = ck.load_checkpoint(tmp_path / "m.pt")
    model, cfg, src_vocab, _ = build.model_from_checkpoint(loaded)
    assert cfg.model.d_model == 16 and len(src_vocab) == 6
    for k, v in model.state_dict().items():
        assert torch.equal(v, ckpt["model"][k])
    # one vocabulary for both sides is written once (and a shared SentencePiece model too)
    assert loaded["src_vocab"] is loaded["tgt_vocab"] and loaded["src_vocab"] == ckpt["src_vocab"]
    other = [*ckpt["src_vocab"][:-1], "zz"]
    models = (b"one model", b"another")
    ck.save_checkpoint({**ckpt, "tgt_vocab": other, "sentencepiece": {
        side: torch.frombuffer(bytearray(m), dtype=torch.uint8)
        for side, m in zip(("src", "tgt"), models, strict=True)}}, tmp_path / "two.pt")
    two = ck.load_checkpoint(tmp_path / "two.pt")
    assert (two["src_vocab"], two["tgt_vocab"]) == (ckpt["src_vocab"], other)
    assert ck.subword_models_of(two) == models
    ck.save_checkpoint({**ckpt, "sentencepiece": {
        side: torch.frombuffer(bytearray(b"one model"), dtype=torch.uint8)
        for side in ("src", "tgt")}}, tmp_path / "one.pt")
    one = ck.load_checkpoint(tmp_path / "one.pt")
    assert one["sentencepiece"]["src"] is one["sentencepiece"]["tgt"]
    assert ck.subword_models_of(one) == (b"one model", b"one model")


@pytest.mark.parametrize("shared", [False, True])
def test_a_checkpoint_loads_into_a_model_built_without_initialisation(shared):
    """model_from_checkpoint skips drawing the initial weights: the model it gives equals one
    initialised and then loaded, parameters and every buffer (the positional table is not in
    the checkpoint), tied weights still tied; and building with initialisation is unchanged
    after it (the same seed draws the same weights)."""
    ckpt = small_checkpoint()
    ckpt["config"]["data"]["shared_vocab"] = shared
    cfg, (src, tgt) = ck.checkpoint_config(ckpt), ck.vocabs_of(ckpt)
    fast, *_ = build.model_from_checkpoint(ckpt)
    plain = build.build_model(cfg, src, tgt)
    plain.load_state_dict(ckpt["model"])
    for get in (lambda m: dict(m.named_parameters()), lambda m: dict(m.named_buffers())):
        a, b = get(fast), get(plain.eval())
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (fast.encoder.embed.weight is fast.decoder.embed.weight) == shared
    ids = torch.tensor([[4, 5, 3]])
    mask = (ids != 0)[:, None, None, :]
    assert torch.equal(fast(ids, ids, mask), plain(ids, ids, mask))
    seeded = []
    for _ in range(2):
        torch.manual_seed(3)
        seeded.append(build.build_model(cfg, src, tgt).state_dict())
        build.build_model(cfg, src, tgt, initialise=False)
    assert all(torch.equal(seeded[0][k], seeded[1][k]) for k in seeded[0])
    assert not torch.equal(seeded[0]["decoder.embed.embedding.weight"],
                           ckpt["model"]["decoder.embed.embedding.weight"])


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    ck.save_checkpoint(small_checkpoint(1), path)
    before = path.read_bytes()

    def disk_full(obj, f):
        f.write(b"partial data")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(MTError, match=r"No space left on device.*unchanged"):
        ck.save_checkpoint(small_checkpoint(2), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


class Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "evil.pt"
    ckpt = small_checkpoint()
    ckpt["progress"] = {"step": Payload()}
    torch.save(ckpt, evil)
    with pytest.raises(CheckpointError, match="refusing to load"):
        ck.load_checkpoint(evil)
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(CheckpointError):
        ck.load_checkpoint(plain)
    assert not (tmp_path / "PWNED").exists()


def test_truncated_foreign_and_future_checkpoints(tmp_path):
    good = tmp_path / "good.pt"
    ck.save_checkpoint(small_checkpoint(), good)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        ck.load_checkpoint(truncated)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not a transformer_mt checkpoint"):
        ck.load_checkpoint(foreign)
    future = tmp_path / "future.pt"
    ckpt = small_checkpoint()
    ckpt["format_version"] = 99
    torch.save(ckpt, future)
    with pytest.raises(CheckpointError, match="format version 99"):
        ck.load_checkpoint(future)
    with pytest.raises(CheckpointError, match="not found"):
        ck.load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="is a directory; train one"):
        ck.load_checkpoint(tmp_path / "empty")  # a directory without checkpoints


def test_a_runs_directory_is_answered_with_its_checkpoints(tmp_path):
    """``--checkpoint runs/NAME`` names the file to pass, best.pt first."""
    for name in ("step_0000200.pt", "last.pt", "best.pt", "step_0000100.pt", "avg.pt"):
        ck.save_checkpoint(small_checkpoint(), tmp_path / name)
    with pytest.raises(CheckpointError) as info:
        ck.load_checkpoint(tmp_path)
    assert str(info.value) == (f"'{tmp_path}' is a directory; pass one of its checkpoints, "
                               f"e.g. {tmp_path / 'best.pt'} (5 there: best.pt, avg.pt, "
                               "last.pt, step_0000100.pt and 1 more)")


def test_weights_that_do_not_fit_the_vocabulary_are_refused(tmp_path):
    ckpt = small_checkpoint()
    ckpt["tgt_vocab"] = [*ckpt["tgt_vocab"], "extra"]
    with pytest.raises(CheckpointError, match="do not fit"):
        build.model_from_checkpoint(ckpt)


def test_the_average_is_the_mean_of_the_weights_with_the_latest_progress(tmp_path):
    a = small_checkpoint(0)
    b = later_save(a, 1)
    ck.save_checkpoint(a, tmp_path / "a.pt")
    ck.save_checkpoint(b, tmp_path / "b.pt")
    avg = average.average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"])
    key = "encoder.layers.0.ffn.linear1.weight"
    assert torch.allclose(avg["model"][key], (a["model"][key] + b["model"][key]) / 2)
    assert len(avg["progress"]["averaged_from"]) == 2
    assert avg["progress"]["step"] == 1  # the latest of the averaged checkpoints


@pytest.mark.parametrize("content", [b"", b"garbage bytes", None])
def test_cli_bad_checkpoint_is_one_line(tmp_path, content):
    path = tmp_path / "x.pt"
    if content is not None:
        path.write_bytes(content)
    result = run_cli(["translate", "--checkpoint", str(path), "Hallo"])
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and "x.pt" in result.stderr


def test_a_text_file_is_not_a_checkpoint(tmp_path):
    text = tmp_path / "x.pt"
    text.write_text("soccer\n")  # starts with a pickle opcode
    with pytest.raises(CheckpointError, match="not a checkpoint") as info:
        ck.load_checkpoint(text)
    assert "run code" not in str(info.value)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("src_vocab", 7, "'src_vocab' must be a list of strings"),
    ("tgt_vocab", ["a", 3], "'tgt_vocab' must be a list of strings"),
    ("model", [1, 2], "'model' must be a mapping"),
    ("progress", "x", "'progress' must be a mapping"),
    ("training_state", {"optimizer": {}, "scaler": {}, "rng": 5,
                        "loss_since_log": torch.zeros(2)}, "'training_state.rng' must be"),
])
def test_checkpoints_with_parts_of_the_wrong_type_are_refused(tmp_path, key, value, message):
    ckpt = small_checkpoint()
    ckpt[key] = value
    path = tmp_path / "bad.pt"
    torch.save(ckpt, path)
    with pytest.raises(CheckpointError, match=message):
        ck.load_checkpoint(path)
    ckpt = small_checkpoint()
    ckpt["progress"] = {"step": "ten"}
    torch.save(ckpt, path)
    with pytest.raises(CheckpointError, match=r"'progress\.step' must be a number"):
        ck.load_checkpoint(path)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("where", [(0, 0), (-1, -1), (3, 5)])
def test_non_finite_weights_are_refused(value, where):
    ckpt = small_checkpoint()
    ckpt["model"]["encoder.layers.0.ffn.linear1.weight"][where] = value
    with pytest.raises(CheckpointError, match="NaN or infinite weights"):
        build.model_from_checkpoint(ckpt)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):  # the check, alone
        weights = [w.to(dtype) for w in ckpt["model"].values() if w.is_floating_point()]
        assert not ck.weights_are_finite(weights)
        assert ck.weights_are_finite(w.nan_to_num(0.0, 0.0, 0.0) for w in weights)


def test_averaging_checkpoints_of_different_tensors_is_refused(tmp_path):
    a = small_checkpoint(0)
    ck.save_checkpoint(a, tmp_path / "a.pt")
    key = "encoder.layers.0.ffn.linear1.bias"
    for name, change in (("missing", lambda m: m.pop(key)),
                         ("extra", lambda m: m.__setitem__("stray", torch.zeros(1))),
                         ("reshaped", lambda m: m.__setitem__(key, torch.zeros(3)))):
        b = small_checkpoint(1)
        change(b["model"])
        ck.save_checkpoint(b, tmp_path / f"{name}.pt")
        with pytest.raises(CheckpointError, match="only checkpoints of one run"):
            average.average_checkpoints([tmp_path / "a.pt", tmp_path / f"{name}.pt"])


def test_averaging_trainings_that_started_apart_is_refused_and_names_the_ensemble(tmp_path):
    """Two trainings of one config from other seeds have unrelated weights (their average
    translates nothing): refused in one line that says to decode them as an ensemble, nothing
    written; saves of one run average (the cosine similarity of their weights is near 1)."""
    first, other = small_checkpoint(0), small_checkpoint(1)
    assert average.similarity(other["model"], first["model"]) < 0.1
    assert average.similarity(later_save(first, 5)["model"], first["model"]) > 0.9
    for name, ckpt in (("a", first), ("b", other), ("later", later_save(first, 5))):
        ck.save_checkpoint(ckpt, tmp_path / f"{name}.pt")
    out = tmp_path / "avg.pt"
    result = run_cli(["average", str(tmp_path / "a.pt"), str(tmp_path / "later.pt"),
                      str(tmp_path / "b.pt"), "--output", str(out)])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert "'" + str(tmp_path / "b.pt") + "' comes from another training" in line
    assert "as an ensemble instead (mt translate --checkpoint A --checkpoint B)" in line
    assert not out.exists()
    twice = run_cli(["average", str(tmp_path / "a.pt"), str(tmp_path / "later.pt"),
                     str(tmp_path / "." / "a.pt"), "--output", str(out)])
    assert twice.returncode != 0 and "is the same file as" in twice.stderr.splitlines()[-1]
    assert not out.exists()  # a file named twice would have counted twice
    result = run_cli(["average", str(tmp_path / "a.pt"), str(tmp_path / "later.pt"),
                      "--output", str(out)])
    assert result.returncode == 0, result.stderr
    assert out.exists()


def test_an_ensemble_of_models_that_do_not_translate_alike_is_refused(trained_run,
                                                                     subword_run, tmp_path):
    """Models of other vocabularies, or of the other direction (a joint vocabulary serves
    both: an en->de model's probabilities would be averaged with a de->en one's), are refused in
    one line, naming the file; each alone translates."""
    model = trained_run[0] / "best.pt"
    reverse = ck.load_checkpoint(model)
    reverse["config"]["data"].update(src_lang="en", tgt_lang="de")
    ck.save_checkpoint(reverse, tmp_path / "en-de.pt")
    for other, says in ((subword_run / "best.pt", "has other vocabularies than"),
                        (tmp_path / "en-de.pt", "translates en->de, '" + str(model) + "' de->en; "
                         "an ensemble's models must translate the same way")):
        result = run_cli(["translate", "--checkpoint", str(model), "--checkpoint", str(other),
                          "Ein Hund."])
        assert result.returncode != 0 and "Traceback" not in result.stderr
        line = result.stderr.strip().splitlines()[-1]
        assert f"'{other}'" in line and says in line
        assert run_cli(["translate", "--checkpoint", str(other), "Ein Hund."]).returncode == 0


def test_a_full_disk_during_torch_save_is_one_line_and_keeps_the_old_file(tmp_path):
    """A real write failure (a file-size limit stands in for a full disk): torch.save raises
    RuntimeError, and the user gets one line; the previous output is intact, no temporary left."""
    import resource
    import subprocess
    import sys

    from tests.helpers import REPO

    ck.save_checkpoint(small_checkpoint(0), tmp_path / "0.pt")
    ck.save_checkpoint(later_save(small_checkpoint(0), 1), tmp_path / "1.pt")
    out = tmp_path / "avg.pt"
    out.write_bytes(b"previous")
    limit = 20_000  # bytes: smaller than a checkpoint

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run([sys.executable, "-m", "transformer_mt", "average",
                             str(tmp_path / "0.pt"), str(tmp_path / "1.pt"), "--output",
                             str(out)], cwd=REPO, capture_output=True, text=True,
                            preexec_fn=cap, timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert "could not write" in line and "unchanged" in line
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.pt", "1.pt", "avg.pt"]


def test_a_checkpoint_of_release_0_1_translates_as_it_did(tmp_path):
    """A checkpoint written by 0.1.0 (its data section names Multi30k splits, not corpora) is
    read, described and translates exactly as 0.1.0 translated it (tests/data/checkpoint-0.1),
    with ``<unk>`` left as it was (``--no-replace-unk``); by default each is a source word."""
    old = REPO / "tests" / "data" / "checkpoint-0.1"
    stored = torch.load(old / "best.pt", weights_only=True)
    assert "train_split" in stored["config"]["data"]  # the old shape, not rewritten since
    # nbest.tsv was printed on a bf16 CPU, where the checkpoint's `precision: auto` meant bf16; on
    # an AVX2-only CPU auto means fp32 (scores 0.01-0.02 apart), so bf16 is asked for by name
    args = ["translate", "--checkpoint", str(old / "best.pt"), "--input",
            str(old / "sentences.de"), "--nbest", "2", "--precision", "bf16"]
    result, copied = run_cli([*args, "--no-replace-unk"]), run_cli(args)
    assert result.returncode == 0 and copied.returncode == 0, result.stderr + copied.stderr
    expected = (old / "nbest.tsv").read_text(encoding="utf-8").splitlines()
    got = result.stdout.splitlines()
    assert [line.split("\t")[::2] for line in got] == [
        line.split("\t")[::2] for line in expected]  # index and text, exactly
    sources = {w.strip(".") for w in (old / "sentences.de").read_text(encoding="utf-8").split()}
    texts = [line.split("\t")[2] for line in copied.stdout.splitlines()]
    assert any("<unk>" in line for line in expected) and not any("<unk>" in t for t in texts)
    for mine, theirs in zip(texts, [line.split("\t")[2] for line in expected], strict=True):
        # each <unk> now a word of the source (those side by side one word, where the same)
        parts = re.split(r"<unk>(?: <unk>)*", theirs)
        words = re.fullmatch(r"(\S+(?: \S+)*?)".join(re.escape(p) for p in parts), mine)
        assert words and set(" ".join(words.groups()).split()) <= sources, (mine, theirs)
    for mine, theirs in zip(got, expected, strict=True):
        assert float(mine.split("\t")[1]) == pytest.approx(float(theirs.split("\t")[1]),
                                                           abs=2e-4)
    info = run_cli(["info", str(old / "best.pt"), "--json"])
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)["config"]["data"]
    assert data["train"] == {"multi30k": "train"} and data["valid"] == {"multi30k": "val"}
