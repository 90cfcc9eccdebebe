"""mt export: the CTranslate2 model computes our log-probabilities and decodes as we do."""

from __future__ import annotations

import itertools
import json
from unittest import mock

import pytest
import torch

from tests.helpers import run_cli, writing_unk
from tests.toy import SYMBOLS, VOCAB, save_toy_checkpoint, toy_pairs, train_toy_model
from transformer_mt.config import ModelConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS
from transformer_mt.decode.search import beam_search, greedy, next_token_logprobs
from transformer_mt.errors import MTError
from transformer_mt.model.transformer import AttentionWeights, Transformer

pytest.importorskip("ctranslate2")

from transformer_mt.formats.ctranslate2 import export_ctranslate2
from transformer_mt.translate.exported import CTranslate2Engine, load_exported


def _export(model: Transformer, tmp_path, name: str) -> CTranslate2Engine:
    out = export_ctranslate2(save_toy_checkpoint(model, tmp_path / f"{name}.pt"), tmp_path / name)
    return load_exported(out, "cpu").engine  # type: ignore[return-value]


def _tokens(ids) -> list[str]:
    return [SYMBOLS[i - len(SPECIALS)] for i in ids]


def _our_log_probs(model: Transformer, src: torch.Tensor, out: list[int]) -> torch.Tensor:
    tgt_in = torch.tensor([[BOS_ID, *out]])
    with torch.no_grad():
        logits = model(src[None], tgt_in, source_mask(src[None]))[0]  # (T, V)
    gold = torch.tensor([*out, EOS_ID])
    # as our search scores: <pad> and <bos> are never produced (the export bars them too)
    return next_token_logprobs(logits)[torch.arange(len(gold)), gold]


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_exported_model_scores_like_ours(tmp_path, norm):
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                      dropout=0.0, max_positions=32, norm=norm)
    model = Transformer(cfg, VOCAB, VOCAB, PAD_ID).eval()
    engine = _export(model, tmp_path, norm)
    pairs = toy_pairs(40, torch.Generator().manual_seed(3))
    sources = [_tokens(src[:-1].tolist()) for src, _ in pairs]
    targets = [_tokens(tgt[1:-1].tolist()) for _, tgt in pairs]
    for (src, tgt), theirs in zip(pairs, engine.score_tokens(sources, targets), strict=True):
        ours = _our_log_probs(model, src, tgt[1:-1].tolist())
        assert torch.allclose(ours, torch.tensor(theirs), atol=1e-4)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A toy model trained a little (imperfect: its mistakes must match too), its export, and
    300 sources: (model, engine, padded sources, sources as tokens, their length limits)."""
    model = train_toy_model(steps=150, seed=2)
    engine = _export(model, tmp_path_factory.mktemp("toy"), "toy")
    pairs = toy_pairs(300, torch.Generator().manual_seed(4))
    src = torch.nn.utils.rnn.pad_sequence([s for s, _ in pairs], batch_first=True,
                                          padding_value=PAD_ID)
    return (model, engine, src, [_tokens(s[:-1].tolist()) for s, _ in pairs],
            [int(len(s) * 1.5) + 10 for s, _ in pairs])


def test_exported_model_decodes_greedily_like_ours(toy):
    model, engine, src, sources, limits = toy
    ours = greedy(model, src, source_mask(src), max_len_a=1.5, max_len_b=10)
    assert [_tokens(h.tokens) for h in ours] == engine.translate_tokens(sources, limits)


class Counting:
    """An engine's translator, counting the sentences of each batch it is given."""

    def __init__(self, translator) -> None:
        self.translator, self.batches = translator, []

    def __getattr__(self, name: str):
        return getattr(self.translator, name)

    def translate_batch(self, batch, **settings):
        self.batches.append(len(batch))
        return self.translator.translate_batch(batch, **settings)


def test_the_export_decodes_its_batches_side_by_side_as_one_by_one(toy, tmp_path):
    """--workers 2 with an export: two batches at once (its inter_threads), the same
    translations and scores, in input order; sources of at most two batches are dealt into
    two (a server's batch of 20: two of 10, so that both decode)."""
    model, engine, _, sources, limits = toy
    out = export_ctranslate2(save_toy_checkpoint(model, tmp_path / "toy.pt"), tmp_path / "toy")
    two = load_exported(out, "cpu", workers=2).engine
    assert isinstance(two, CTranslate2Engine) and two.translator.num_translators == 2
    two.translator = counting = Counting(two.translator)
    assert two.translate_tokens(sources[:20], limits[:20]) == engine.translate_tokens(
        sources[:20], limits[:20], batch_size=20)
    assert counting.batches == [10, 10]
    for beam in (1, 3):
        theirs, mine = two.search(sources, limits, beam, 16), engine.search(sources, limits,
                                                                            beam, 16)
        assert counting.batches[-20:] == [16] * 18 + [6, 6]  # 300: 9 spans of 32, then 12
        assert [[t for t, _ in h] for h in theirs] == [[t for t, _ in h] for h in mine]
        # (its threads differ: 1 each against this process's; rounding with them)
        assert [s for h in theirs for _, s in h] == pytest.approx(
            [s for h in mine for _, s in h], abs=1e-4)


def test_exported_model_searches_and_scores_as_ours(toy):
    """The engine's n-best: the hypotheses ours finds, in our order, with our scores, but for
    the few sentences its other stopping rule decodes otherwise. ``decode.alpha`` reaches it
    as its length penalty (told nothing, it divided by its own default, 1.0, whatever alpha
    was asked); it divides by ``length ** alpha``, ours by the GNMT penalty: it is asked for
    the whole beam, which it then searches until it has, as ours does, and its hypotheses are
    ranked and scored here as ours."""
    model, engine, src, sources, limits = toy
    asked, translate_batch = [], engine.translator.translate_batch

    def spy(*args, **kwargs):
        asked.append(kwargs["length_penalty"])
        return translate_batch(*args, **kwargs)

    with mock.patch.object(engine, "translator", mock.Mock(wraps=engine.translator,
                                                           translate_batch=spy)):
        for beam, alpha in ((1, 0.6), (5, 0.0), (5, 0.6), (5, 2.0)):
            nbest = min(beam, 3)
            ours = [[h] for h in greedy(model, src, source_mask(src), max_len_a=1.5,
                                        max_len_b=10)] if beam == 1 else beam_search(
                model, src, source_mask(src), beam, alpha, max_len_a=1.5, max_len_b=10,
                nbest=nbest)
            theirs = engine.search(sources, limits, beam, alpha=alpha, nbest=nbest)
            assert set(asked) == {alpha}
            asked.clear()
            same = best = 0
            for mine, found in zip(ours, theirs, strict=True):
                best += _tokens(mine[0].tokens) == found[0][0]
                if [_tokens(h.tokens) for h in mine] == [t for t, _ in found]:
                    same += 1
                    assert [h.score for h in mine] == pytest.approx([s for _, s in found],
                                                                    abs=1e-4)
            # (measured: 0-2 of 300 best ones differ, 0-11 n-best lists, with 1 or 2 threads)
            assert best >= 292 and same >= 280, f"beam {beam}, alpha {alpha}: {best}, {same}"


@pytest.mark.parametrize(("beam", "most"), [(1, 3), (5, 35)])
def test_the_engine_bars_the_repeated_ngrams_ours_bars(toy, beam, most):
    """``decode.no_repeat_ngram_size`` reaches the engine as its own setting, which bars what
    ours bars (decode/repeats.py): no output holds a pair twice, and greedily ours are its
    outputs. Its beam normalises the probabilities of the tokens it leaves anew (ours, as
    fairseq's and transformers', keeps the model's): measured, 20 of 300 best ones differ."""
    model, engine, src, sources, limits = toy
    ours = beam_search(model, src, source_mask(src), beam, 0.6, 1.5, 10, no_repeat=2)
    theirs = [h[0][0] for h in engine.search(sources, limits, beam, alpha=0.6, no_repeat=2)]
    assert all(len(set(itertools.pairwise(t))) == len(t) - 1 for t in theirs)
    assert sum(_tokens(a[0].tokens) != b for a, b in zip(ours, theirs, strict=True)) <= most
    plain = engine.search(sources, limits, beam, alpha=0.6)  # (measured: 33 of 300 change)
    assert sum(p[0][0] != t for p, t in zip(plain, theirs, strict=True)) >= 25


def test_the_engines_attention_is_ours(toy):
    """What the export's ``return_attention`` gives (its alignment heads, set by mt export to
    all of the last layer's, averaged) is our last layer's cross-attention, the heads averaged,
    read while each output is forced; another layer or one head is refused in one line."""
    model, engine, src, _, _ = toy
    outputs = [h.tokens for h in greedy(model, src[:40], source_mask(src[:40]))]
    ids = [[x for x in row if x != PAD_ID] for row in src[:40].tolist()]
    for row, out, theirs in zip(ids, outputs, engine.cross_attention(ids, outputs),
                                strict=True):
        weights = AttentionWeights()
        with torch.no_grad():
            source = torch.tensor([row])
            model(source, torch.tensor([[BOS_ID, *out]]), source_mask(source), attention=weights)
        ours = weights.cross[-1][0].mean(0)  # (T_out + 1, S)
        assert theirs.shape == ours.shape
        torch.testing.assert_close(theirs[:-1, :-1], ours[:-1, :-1], atol=1e-5, rtol=1e-4)
    with pytest.raises(MTError, match="last layer's attention, the heads averaged"):
        engine.cross_attention(ids[:1], outputs[:1], 0)


def test_mt_export_and_translate_with_the_engine(trained_run, tmp_path):
    run_dir, _ = trained_run
    out = tmp_path / "ct2"
    result = run_cli(["export", "--format", "ctranslate2", str(run_dir / "best.pt"), str(out)])
    assert result.returncode == 0, result.stderr
    sentences = ["Ein Hund läuft über die Wiese.", "", "Zwei Männer spielen Fußball."]
    torch_out = run_cli(["translate", "--checkpoint", str(run_dir / "best.pt"), "--beam", "1",
                         *sentences])
    engine_out = run_cli(["translate", "--engine", "ctranslate2", "--checkpoint", str(out),
                          "--beam", "1", *sentences])
    assert engine_out.returncode == 0, engine_out.stderr
    assert engine_out.stdout == torch_out.stdout
    # without --engine, an export's directory decodes with the engine (auto)
    assert run_cli(["translate", "--checkpoint", str(out), "--beam", "1",
                    *sentences]).stdout == engine_out.stdout
    nbest = run_cli(["translate", "--checkpoint", str(out), "--nbest", "2", *sentences[::2]])
    assert nbest.returncode == 0, nbest.stderr  # index, score, text; the best first
    rows = [line.split("\t") for line in nbest.stdout.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "1", "1"]
    assert float(rows[0][1]) >= float(rows[1][1]) and float(rows[2][1]) >= float(rows[3][1])
    assert [rows[0][2], rows[2][2]] == run_cli(["translate", "--checkpoint", str(out), "--beam",
                                                "2", *sentences[::2]]).stdout.splitlines()
    aligned = run_cli(["translate", "--checkpoint", str(out), "--beam", "1", "--align",
                       "Ein Hund läuft."])  # its attention is ours
    assert aligned.returncode == 0 and aligned.stdout == run_cli(
        ["translate", "--checkpoint", str(run_dir / "best.pt"), "--beam", "1", "--align",
         "Ein Hund läuft."]).stdout
    refused = run_cli(["translate", "--checkpoint", str(out), "--align", "--head", "0",
                       "Ein Hund."])
    assert refused.returncode != 0 and "PyTorch engine" in refused.stderr
    refused = run_cli(["translate", "--engine", "ctranslate2", "--checkpoint", str(out),
                       "--keep-spans", "Ein Hund sieht 3 Katzen."])  # constraints: ours only
    assert refused.returncode == 2 and "CTranslate2 cannot constrain its search" in \
        refused.stderr and "Traceback" not in refused.stderr
    kept = run_cli(["translate", "--engine", "ctranslate2", "--checkpoint", str(out),
                    "--keep-spans", "Ein Hund."])  # nothing to keep: translated as ever
    assert kept.returncode == 0 and kept.stdout == run_cli(
        ["translate", "--engine", "ctranslate2", "--checkpoint", str(out), "Ein Hund."]).stdout
    (tmp_path / "m.tmx").write_text(  # a memory read in the export's languages
        '<tmx version="1.4"><body><tu><tuv xml:lang="de-DE"><seg>Ein Hund.</seg></tuv><tuv '
        'xml:lang="en-US"><seg>A hound.</seg></tuv></tu></body></tmx>', encoding="utf-8")
    held = run_cli(["translate", "--checkpoint", str(out), "--beam", "1", "--memory",
                    str(tmp_path / "m.tmx"), "Ein Hund.", sentences[2]])
    assert held.returncode == 0 and held.stdout == "A hound.\n" + engine_out.stdout.split(
        "\n")[2] + "\n"
    from transformer_mt.translate import Translator

    exported = Translator.load(out, "cpu", engine="ctranslate2")  # the checkpoint's
    assert exported.config.decode.keep_spans and exported.translate(  # keep_spans: not here
        ["Ein Hund sieht 3 Katzen."]) == exported.translate(["Ein Hund sieht 3 Katzen."],
                                                           keep_spans=False)


def test_the_export_copies_unknown_words_as_ours_does(trained_run, tmp_path):
    """A word model's ``<unk>`` copied from the source through the engine's attention: the
    same translations as ours (the tiny run made to write ``<unk>``: helpers.writing_unk)."""
    sentences = ["Zwei Hunde schwimmen in Tübingen.", "Ein Mann läuft in Wolfsburg."]  # one
    # unknown word each: the copies are the same whatever the engines' rounding
    model = writing_unk(trained_run[0] / "best.pt", sentences[0], tmp_path / "unk.pt")
    assert run_cli(["export", "--format", "ctranslate2", str(model),
                    str(tmp_path / "ct2")]).returncode == 0
    outputs = [run_cli(["translate", "--checkpoint", str(path), "--precision", "fp32", *flag,
                        *sentences]).stdout.splitlines()
               for path in (model, tmp_path / "ct2") for flag in ([], ["--no-replace-unk"])]
    ours, ours_unk, engine, engine_unk = outputs
    assert engine == ours and engine_unk == ours_unk and ours != ours_unk
    assert all("<unk>" in line for line in ours_unk) and not any("<unk>" in x for x in ours)
    assert "Tübingen" in ours[0] and "Wolfsburg" in ours[1]


def test_export_never_replaces_what_is_not_an_earlier_export(trained_run, tmp_path):
    """The CTranslate2 converter removes its target with force=True: an export into '.', a
    run directory, a directory holding the checkpoint or other files must lose nothing."""
    run_dir, _ = trained_run
    project = tmp_path / "proj"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    ckpt = project / "model.pt"
    ckpt.write_bytes((run_dir / "best.pt").read_bytes())
    before = {p.name: p.read_bytes() for p in project.iterdir()}
    for target, cwd, expected in ((".", project, "holds the checkpoint"),
                                  (str(project), tmp_path, "holds the checkpoint"),
                                  (str(run_dir), tmp_path, "holds a run directory of this tool"),
                                  ("../proj/", project, "holds the checkpoint")):
        result = run_cli(["export", str(ckpt), target], cwd=cwd)
        assert result.returncode != 0 and expected in result.stderr.strip().splitlines()[-1]
        assert "Traceback" not in result.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("keep")
    result = run_cli(["export", str(ckpt), str(other), "--overwrite"])
    assert result.returncode != 0 and "not an export" in result.stderr
    assert (other / "keep.txt").read_text() == "keep"
    assert {p.name: p.read_bytes() for p in project.iterdir()} == before
    assert (run_dir / "best.pt").exists() and (run_dir / "last.pt").exists()
    assert not list(tmp_path.glob(".*.tmp")) and not list(project.glob(".*.tmp"))


def test_export_replaces_an_earlier_export_only_with_overwrite(trained_run, tmp_path):
    run_dir, _ = trained_run
    out = tmp_path / "ct2"
    assert run_cli(["export", str(run_dir / "best.pt"), str(out)]).returncode == 0
    model = (out / "model.bin").read_bytes()
    again = run_cli(["export", str(run_dir / "last.pt"), str(out)])
    assert again.returncode != 0 and "--overwrite" in again.stderr
    assert (out / "model.bin").read_bytes() == model
    replaced = run_cli(["export", str(run_dir / "last.pt"), str(out), "--overwrite",
                        "--quantization", "int8"])
    assert replaced.returncode == 0, replaced.stderr
    assert (out / "model.bin").read_bytes() != model
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]  # nothing left beside it


def test_an_engine_told_no_thread_count_probes_for_it(toy, tmp_path, monkeypatch, caplog):
    """Where nothing sets the threads (no ``OMP_NUM_THREADS``, no ``threads``), the engine
    decodes on all the cores a batch, or on one a batch with as many batches at once as cores,
    whichever ran the probe faster: here the cores' made slow, so one; the translations are
    those of the engines told either count, and torch's threads here stay as they were."""
    model, _, _, sources, limits = toy
    out = export_ctranslate2(save_toy_checkpoint(model, tmp_path / "toy.pt"), tmp_path / "toy")
    real = CTranslate2Engine._probe
    timed: list[float] = []

    def slow_at_first(self, translator):  # the first engine timed is the cores'
        timed.append(real(self, translator))
        return timed[-1] * (10 if len(timed) == 1 else 1)

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(CTranslate2Engine, "_probe", slow_at_first)
    caplog.set_level("DEBUG", "transformer_mt.translate.exported")  # (mt --debug shows it)
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        probed = load_exported(out, "cpu").engine
        told = [load_exported(out, "cpu", threads=n).engine for n in (1, 2)]
        # (CTranslate2 sets the threads of the thread that makes it: torch's are put back)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(saved)
    assert isinstance(probed, CTranslate2Engine) and probed.threads == 1 and len(timed) == 2
    assert probed.translator.num_translators == 2  # one thread a batch, 2 batches at once
    assert [e.threads for e in told] == [1, 2] and len(timed) == 2  # told: no probe
    assert f"with 2 threads a batch it ran a probe {10 * timed[0] / timed[1]:.1f}x slower" in (
        caplog.text) and "decodes with 1 thread a batch, 2 batches at once here" in caplog.text
    for other in told:
        assert probed.translate_tokens(sources, limits, 3) == other.translate_tokens(
            sources, limits, 3)


def test_mt_evaluate_compares_a_checkpoint_with_its_exports(trained_run, tmp_path):
    """`mt evaluate --checkpoint A.pt --checkpoint EXPORT/` scores the export with CTranslate2
    (what int8 costs, with paired bootstrap): in fp32 it translates as the checkpoint, so the
    two score alike, and the int8 export decodes in int8; an ensemble of a checkpoint and an
    export is refused in one line."""
    run_dir, _ = trained_run
    best = str(run_dir / "best.pt")
    for name, extra in (("fp32", []), ("int8", ["--quantization", "int8"])):
        assert run_cli(["export", best, str(tmp_path / name), *extra]).returncode == 0
    result = run_cli(["evaluate", "--checkpoint", best, "--checkpoint", str(tmp_path / "fp32"),
                      "--checkpoint", str(tmp_path / "int8"), "--split", "val", "--beam", "1",
                      "--precision", "fp32", "--json"])
    assert result.returncode == 0, result.stderr
    ours, fp32, int8 = json.loads(result.stdout)["systems"]
    assert fp32["name"] == str(tmp_path / "fp32") and int8["name"] == str(tmp_path / "int8")
    assert fp32["BLEU"]["score"] == ours["BLEU"]["score"] and fp32["BLEU"]["p_value"] == 1.0
    assert 0 < int8["BLEU"]["score"] <= 100
    # each decodes in its own type (the int8 export was widened to float32 as it loaded), as
    # mt info says, with the checkpoint's vocabularies
    told = {name: json.loads(run_cli(["info", "--json", str(tmp_path / name)]).stdout)
            for name in ("fp32", "int8")}
    checkpoint = json.loads(run_cli(["info", "--json", best]).stdout)
    assert told["fp32"]["compute_type"] == "float32"
    assert told["int8"]["compute_type"].startswith("int8")
    n = torch.get_num_threads()  # (mt info ran here: the engine's threads, or the probe's way)
    assert told["fp32"]["threads"] in (f"{n} thread{'s' if n > 1 else ''} a batch",
                                       f"1 thread a batch, {n} batches at once")
    for info in told.values():
        assert info["engine"].startswith("CTranslate2 ") and info["config"] == checkpoint["config"]
        assert (info["src_vocab"], info["tgt_vocab"]) == (checkpoint["src_vocab"],
                                                          checkpoint["tgt_vocab"])
    refused = run_cli(["evaluate", "--checkpoint", best, "--checkpoint", str(tmp_path / "fp32"),
                       "--ensemble", "--split", "val"])
    assert refused.returncode == 2 and "is a CTranslate2 export" in refused.stderr
    assert "Traceback" not in refused.stderr
