"""Your own data: corpora from files (pairs of text files, TSV, gzip) in any language pair,
subword units, the token-id cache, fine-tuning, and the one-line errors for bad data."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest
import torch

from tests.helpers import (
    run_cli,
    toy_corpus_pairs,
    train_toy,
    translate_elsewhere,
    write_config,
    write_corpus,
)
from transformer_mt.config import Config
from transformer_mt.config.data import CorpusConfig, DataConfig
from transformer_mt.config.file import load_config
from transformer_mt.data.batch import Batch, collate
from transformer_mt.data.prepare import prepare_data
from transformer_mt.errors import ConfigError


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """One French -> Spanish model trained on a TSV corpus, shared by the tests that read it."""
    return train_toy(tmp_path_factory.mktemp("toy"), "tsv")


def test_train_on_a_tsv_file_in_a_third_language_pair(toy_run, tmp_path):
    run_dir, _ = toy_run
    assert "180 training pairs" in (run_dir / "train.log").read_text()
    out = translate_elsewhere(run_dir / "last.pt", tmp_path / "elsewhere",
                              "Le chien blanc court.", "L'oiseau rouge chante.")
    assert out == ["El perro blanco corre.", "El pájaro rojo canta."]


def test_train_on_two_gzipped_files_then_translate_with_the_checkpoint_alone(tmp_path):
    run_dir, _ = train_toy(tmp_path, "pair")
    shutil.rmtree(tmp_path / "corpus")  # the corpus is gone: the checkpoint is all there is
    out = translate_elsewhere(run_dir / "last.pt", tmp_path / "elsewhere",
                              "Le cheval vert saute.", "L'homme gris joue.")
    assert out == ["El caballo verde salta.", "El hombre gris juega."]


def test_sentencepiece_model_travels_in_the_checkpoint_and_no_unk_reaches_the_user(tmp_path):
    run_dir, _ = train_toy(tmp_path, "tsv", tokenizer="sentencepiece", vocab_size=300,
                           shared_vocab=True)
    ckpt = torch.load(run_dir / "last.pt", weights_only=True)
    assert ckpt["sentencepiece"]["src"].dtype == torch.uint8
    assert ckpt["src_vocab"] == ckpt["tgt_vocab"]  # one shared vocabulary
    shutil.rmtree(tmp_path / "corpus")

    from transformer_mt import Translator

    translator = Translator.load(run_dir / "last.pt", device="cpu")
    model = translator.model
    # one matrix tied three ways: source embedding, target embedding, output projection
    assert model.encoder.embed.weight is model.decoder.embed.weight
    assert model.decoder.project.weight is model.decoder.embed.weight
    # characters never seen in training are spelt in bytes, never <unk>
    ids = translator.encode(["Le chat Ω€ mange."])[0]
    assert 0 not in ids
    out = translator.translate(["Le chat noir mange.", "Le chien gris dort."])
    assert out == ["El gato negro come.", "El perro gris duerme."]
    forced = translator.tokenizers[1].detokenize(["▁El", "<unk>", "▁gato"])
    assert "<unk>" not in forced and "⁇" not in forced

    pytest.importorskip("ctranslate2")
    from transformer_mt.formats.ctranslate2 import export_ctranslate2

    export_ctranslate2(run_dir / "last.pt", tmp_path / "ct2")  # the models travel along
    engine = Translator.load(tmp_path / "ct2", device="cpu", engine="ctranslate2")
    sentences = [a for a, _ in toy_corpus_pairs()[::7]]
    assert engine.translate(sentences, beam_size=1) == translator.translate(sentences,
                                                                             beam_size=1)


def test_sentencepiece_learns_bpe_or_unigram_with_our_specials():
    from transformer_mt.data.tokenize import SubwordTokenizer, train_sentencepiece

    lines = [a for a, _ in toy_corpus_pairs()] * 3
    for subword in ("unigram", "bpe"):
        model = train_sentencepiece(lines, DataConfig(tokenizer="sentencepiece", subword=subword,
                                                      vocab_size=320))
        tokenizer = SubwordTokenizer(model)
        vocab = tokenizer.fixed_vocab()
        assert vocab.itos[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"] and len(vocab) <= 320
        tokens = next(tokenizer.tokenize(["Le chat noir mange."]))
        assert tokenizer.detokenize(tokens) == "Le chat noir mange."


def test_fine_tuning_starts_from_a_checkpoint_and_refuses_another_model(toy_run, tmp_path):
    base, data = toy_run
    write_config(tmp_path / "tune.yaml", data,
                 train={"max_steps": 1, "init_from": str(base / "last.pt"), "lr": 1e-9,
                        "warmup_steps": 0})
    tuned = tmp_path / "tuned"
    result = run_cli(["train", "--config", str(tmp_path / "tune.yaml"), "--run-dir", str(tuned)])
    assert result.returncode == 0, result.stderr
    a = torch.load(base / "last.pt", weights_only=True)
    b = torch.load(tuned / "last.pt", weights_only=True)
    assert b["progress"]["step"] == 1 and a["src_vocab"] == b["src_vocab"]
    # a step at lr 1e-9 barely moves the weights it started from
    assert all(torch.allclose(a["model"][k], b["model"][k], atol=1e-6) for k in a["model"])

    write_config(tmp_path / "other.yaml", data, model={"d_model": 128},
                 train={"init_from": str(base / "last.pt")})
    result = run_cli(["train", "--config", str(tmp_path / "other.yaml"), "--run-dir",
                      str(tmp_path / "other")])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "model.d_model=64" in result.stderr and "128" in result.stderr
    assert not (tmp_path / "other").exists()


def test_a_word_model_made_before_hyphens_were_marked_goes_on_splitting_them_so(toy_run,
                                                                               tmp_path):
    """A checkpoint without ``data.mark_hyphens`` (made before it) reads and writes words as it
    was trained to (hyphens unmarked), and so do its fine-tuning and a resumed run of it."""
    from transformer_mt import Translator

    base, data = toy_run
    old = tmp_path / "old"
    shutil.copytree(base, old)
    ckpt = torch.load(old / "last.pt", weights_only=True)
    assert ckpt["config"]["data"].pop("mark_hyphens") is True  # today's default
    torch.save(ckpt, old / "last.pt")
    assert [t.mark_hyphens for t in Translator.load(old / "last.pt", "cpu").tokenizers] == [
        False, False]

    write_config(tmp_path / "tune.yaml", data, train={"max_steps": 1, "warmup_steps": 0,
                                                      "init_from": str(old / "last.pt")})
    resumed = ["train", "--config", str(base.parent / "toy.yaml"), "--run-dir", str(old),
               "--set", f"train.max_steps={ckpt['progress']['step'] + 1}",
               "--set", "train.max_epochs=null"]
    for args in (["train", "--config", str(tmp_path / "tune.yaml"), "--run-dir",
                  str(tmp_path / "tuned")], resumed):
        result = run_cli(args)
        assert result.returncode == 0, result.stderr
        run = tmp_path / ("tuned" if args is not resumed else "old")
        assert torch.load(run / "last.pt", weights_only=True)["config"]["data"][
            "mark_hyphens"] is False


@pytest.mark.parametrize("problem, expected", [
    ("missing", "data.train.src: '{dir}/missing.fr' not found"),
    ("empty", "'{dir}/empty.fr' is empty"),
    ("latin1", "data.train.src: '{dir}/latin1.fr', line 3: not valid UTF-8"),
    ("latin1tsv-subwords", "data.train.tsv: '{dir}/latin1.tsv', line 3: not valid UTF-8"),
    ("cut-subwords", "data.train.tsv: cannot read '{dir}/cut.tsv.gz': Compressed file ended"),
    ("docx", "'{dir}/a.docx' is a zip archive, not lines of text"),  # not a line read
    ("counts", "has 4 lines but '{dir}/b.es' has 3;"),
    ("counts-subwords", "has 4 lines but '{dir}/b.es' has 3;"),  # said before any learning
    ("columns", "line 2 has 3 tab-separated columns"),
    ("validcolumns-subwords", "data.valid: '{dir}/bad.tsv' line 2 has 3 tab-separated columns"),
    ("testlatin1-subwords", "data.test.news.tsv: '{dir}/latin1.tsv', line 3: not valid UTF-8"),
])
def test_bad_corpus_files_get_one_line_and_no_run_directory(tmp_path, monkeypatch, problem,
                                                            expected):
    """What is wrong with a corpus said in one line, naming its key, before any learning
    (a validation or test set's too), or as it is read for it (a TSV corpus, a gzipped one)."""
    from transformer_mt.data import tokenize
    d, learnt, learn = tmp_path, [], tokenize.train_sentencepiece
    monkeypatch.setattr(tokenize, "train_sentencepiece", lambda *a: learnt.append(a) or learn(*a))
    (d / "a.fr").write_text("un\ndeux\ntrois\nquatre\n", encoding="utf-8")
    (d / "b.es").write_text("uno\ndos\ntres\n", encoding="utf-8")
    (d / "c.es").write_text("uno\ndos\ntres\ncuatro\n", encoding="utf-8")
    (d / "empty.fr").write_bytes(b"")
    (d / "latin1.fr").write_bytes("un\ndeux\ntr\u00e8s\n".encode("latin-1"))
    (d / "a.docx").write_bytes(b"PK\x03\x04\x14\0\0\0\x08\0")  # a zip's first bytes
    (d / "bad.tsv").write_text("un\tuno\ndeux\tdos\textra\n", encoding="utf-8")
    (d / "latin1.tsv").write_bytes("un\tuno\ndeux\tdos\ntr\u00e8s\ttres\n".encode("latin-1"))
    # cut short, and past the first of gzip's reads (128 KiB): not found as the first line is
    words = "\n".join(f"{n:x}\t{n * 7919 % 100003:x}" for n in range(50_000)).encode()
    (d / "cut.tsv.gz").write_bytes(gzip.compress(words)[:-20])
    good = {"src": str(d / "a.fr"), "tgt": str(d / "c.es")}
    train = {"missing": {"src": str(d / "missing.fr"), "tgt": str(d / "b.es")},
             "empty": {"src": str(d / "empty.fr"), "tgt": str(d / "b.es")},
             "latin1": {"src": str(d / "latin1.fr"), "tgt": str(d / "b.es")},
             "docx": {"src": str(d / "a.docx"), "tgt": str(d / "b.es")},
             "counts": {"src": str(d / "a.fr"), "tgt": str(d / "b.es")},
             "columns": {"tsv": str(d / "bad.tsv")},
             "latin1tsv": {"tsv": str(d / "latin1.tsv")},
             "cut": {"tsv": str(d / "cut.tsv.gz")}}.get(problem.split("-")[0], good)
    subwords = {"tokenizer": "sentencepiece", "vocab_size": 300} if "subwords" in problem else {}
    valid = {"tsv": str(d / "bad.tsv")} if problem.startswith("valid") else good
    test = {"news": {"tsv": str(d / "latin1.tsv")}} if problem.startswith("test") else {}
    write_config(d / "bad.yaml", {"src_lang": "fr", "tgt_lang": "es", "train": train,
                                  "valid": valid, "test": test, **subwords})
    run_dir = d / "run"
    result = run_cli(["train", "--config", str(d / "bad.yaml"), "--run-dir", str(run_dir)])
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]  # the error: one line, after any progress
    assert last.startswith("mt train: error:") and expected.format(dir=d) in last, last
    assert not run_dir.exists()
    # said before the learning began, or as it read them (as itself: not inside
    # SentencePiece's own error, with a source line)
    assert bool(learnt) == (problem in ("latin1tsv-subwords", "cut-subwords"))


def test_config_names_the_corpus_key_and_the_nearest_language():
    with pytest.raises(ConfigError, match=r"'data.src_lang' is 'fre'.*did you mean 'fr'"):
        load_config(None, ["data.src_lang=fre"])
    with pytest.raises(ConfigError, match=r"is 'German'.*did you mean 'de'"):
        load_config(None, ["data.src_lang=German"])  # a language's name finds its code
    with pytest.raises(ConfigError, match=r"data\.train.* needs both src and tgt"):
        load_config(None, ["data.train={src: a.fr}"])
    with pytest.raises(ConfigError, match="exactly one corpus"):
        load_config(None, ["data.train={tsv: a.tsv, multi30k: train}"])
    with pytest.raises(ConfigError, match="Multi30k split, which has de and en only"):
        load_config(None, ["data.src_lang=fr"])
    config = load_config(None, ["data.src_lang=zh", "data.tgt_lang=ja",
                                "data.train={tsv: a.tsv}", "data.valid={tsv: b.tsv}"])
    assert config.data.test_sets() == {}  # Multi30k's test sets only go with Multi30k
    # SentencePiece needs none of spaCy's rules: any ISO 639 code (Swahili, Hausa, Khmer)
    own = ["data.train={tsv: a.tsv}", "data.valid={tsv: b.tsv}", "data.tgt_lang=en"]
    with pytest.raises(ConfigError, match=r"'sw', a language spaCy does not know.*any ISO 639"):
        load_config(None, [*own, "data.src_lang=sw"])
    subwords = [*own, "data.tokenizer=sentencepiece"]
    assert load_config(None, [*subwords, "data.src_lang=sw"]).data.src_lang == "sw"
    with pytest.raises(ConfigError, match=r"is 'Swahili', not .* code \(2 or 3 [a-z ]*\)$"):
        load_config(None, [*subwords, "data.src_lang=Swahili"])  # (no code to suggest)
    with pytest.raises(ConfigError, match=r"is 'German', not .*; did you mean 'de'"):
        load_config(None, [*subwords, "data.src_lang=German"])


def test_bleu_tokenizer_follows_the_target_language():
    from transformer_mt.evaluate import score

    hyp, ref = ["我喜欢猫。"], ["我喜欢狗。"]
    zh = score(hyp, ref, "zh")
    assert "tok:zh" in zh.bleu_signature
    assert zh.bleu > score(hyp, ref, "en").bleu  # 13a sees one word, zh sees characters
    assert "tok:13a" in score(["A cat."], ["A dog."], "fr").bleu_signature
    hyp, ref = ["ฉันชอบแมว"], ["ฉันชอบหมา"]  # Thai: no spaces between words
    assert "tok:char" in score(hyp, ref, "th").bleu_signature
    assert score(hyp, ref, "th").bleu > score(hyp, ref, "en").bleu == 0


def test_our_own_translations_are_not_taken_for_tokenized_text(caplog):
    """sacreBLEU guesses that 100 lines ending in " ." were never detokenized: right of a file
    a user brings (``mt evaluate --hyp``), wrong of the model's own, which an untrained model
    ends so (validation at step 40 printed "It looks like you forgot to detokenize")."""
    from transformer_mt.evaluate import score

    hyp, ref = ["a man ."] * 100, ["A man."] * 100
    theirs = score(hyp, ref, "en")
    assert "forgot to detokenize" in caplog.text
    caplog.clear()
    ours = score(hyp, ref, "en", ours=True)
    assert "detokenize" not in caplog.text
    assert (ours.bleu, ours.chrf, ours.bleu_signature) == (
        theirs.bleu, theirs.chrf, theirs.bleu_signature)


def test_evaluate_scores_any_file_pair(toy_run, tmp_path):
    run_dir, _ = toy_run
    pairs = toy_corpus_pairs()[:30]
    (tmp_path / "t.fr").write_text("".join(a + "\n" for a, _ in pairs), encoding="utf-8")
    (tmp_path / "t.es").write_text("".join(b + "\n" for _, b in pairs), encoding="utf-8")
    result = run_cli(["evaluate", "--checkpoint", str(run_dir / "last.pt"), "--src",
                      str(tmp_path / "t.fr"), "--ref", str(tmp_path / "t.es"), "--json",
                      "--beam", "1", "--output", str(tmp_path / "hyp.es")])
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["sentences"] == 30 and record["bleu"] > 90
    hyps = (tmp_path / "hyp.es").read_text(encoding="utf-8").splitlines()
    assert sum(h == b for h, (_, b) in zip(hyps, pairs, strict=True)) >= 28
    result = run_cli(["evaluate", "--checkpoint", str(run_dir / "last.pt"), "--src",
                      str(tmp_path / "t.fr")])
    assert result.returncode != 0 and "--src and --ref together" in result.stderr


def test_token_id_cache_equals_fresh_tokenization_and_plans_from_lengths(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))
    data = write_corpus(tmp_path / "corpus", "pair")
    cfg = Config(data=DataConfig(src_lang="fr", tgt_lang="es", min_freq=1,
                                 train=CorpusConfig(**data["train"]),
                                 valid=CorpusConfig(**data["valid"])))
    first = prepare_data(cfg)
    assert isinstance(first.train.corpora[0].pairs.src.ids, np.memmap)
    again = prepare_data(cfg)  # read back from the cache
    pairs, read = toy_corpus_pairs(), again.train.corpora[0].pairs
    for k in (0, 57, 179):
        src_tokens = [first.src_vocab.itos[i] for i in read.source(k)[:-1]]
        assert src_tokens == next(first.tokenizers[0].tokenize([pairs[k][0]]))
        assert read.target(k).tolist() == first.train.corpora[0].pairs.target(k).tolist()
    assert again.valid.references == [b for _, b in pairs[::9]]
    # a batch gathered from the memory map in one go equals one padded example by example
    for indices in ([0, 5, 179, 33], [7], list(range(0, 180, 2))):
        fast = collate(read, indices)
        plain = Batch.from_ids([torch.from_numpy(read.source(k)) for k in indices],
                               [torch.from_numpy(read.target(k)) for k in indices])
        assert torch.equal(fast.src, plain.src) and torch.equal(fast.tgt, plain.tgt)
        assert (fast.n_tokens, fast.n_src_tokens) == (plain.n_tokens, plain.n_src_tokens)
    assert len(list((tmp_path / "cache" / "corpus").glob("*/ids.bin"))) == 4


@pytest.mark.parametrize("damage", ["zeroed", "swapped", "types_reordered", "offsets",
                                    "checksums"])
def test_a_damaged_token_id_cache_is_rebuilt_never_trained_on(tmp_path, monkeypatch, caplog,
                                                              damage):
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))
    data = write_corpus(tmp_path / "corpus", "pair")
    cfg = Config(data=DataConfig(src_lang="fr", tgt_lang="es", min_freq=1,
                                 train=CorpusConfig(**data["train"]),
                                 valid=CorpusConfig(**data["valid"])))
    fresh = prepare_data(cfg)
    fresh_pairs = fresh.train.corpora[0].pairs
    expected = [fresh_pairs.source(k).tolist() for k in range(len(fresh_pairs))]
    for entry in (tmp_path / "cache" / "corpus").glob("*/ids.bin"):
        entry = entry.parent
        ids = np.fromfile(entry / "ids.bin", dtype=np.int32)
        if damage == "zeroed":  # same size, all zeros
            np.zeros_like(ids).tofile(entry / "ids.bin")
        elif damage == "swapped":
            ids[[0, 1]] = ids[[1, 0]]
            ids.tofile(entry / "ids.bin")
        elif damage == "types_reordered":
            types = json.loads((entry / "types.json").read_text(encoding="utf-8"))
            (entry / "types.json").write_text(json.dumps(types[::-1], ensure_ascii=False))
        elif damage == "offsets":
            offsets = np.load(entry / "offsets.npy")
            np.save(entry / "offsets.npy", offsets[::-1].copy())
        else:
            (entry / "sha256.json").write_text("{not json")
    del fresh, fresh_pairs
    with caplog.at_level("WARNING"):
        again = prepare_data(cfg)
    read = again.train.corpora[0].pairs
    assert [read.source(k).tolist() for k in range(len(read))] == expected
    assert "is damaged" in caplog.text and "making it again" in caplog.text


def test_a_cache_directory_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    """An MT_CACHE_DIR under a file (or anywhere it cannot be made) names the directory and
    what to do; it was a raw errno naming a subdirectory."""
    from transformer_mt.data.cache import cache_entry
    from transformer_mt.errors import MTError

    (tmp_path / "a_file").write_text("x")
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "a_file" / "cache"))
    with pytest.raises(MTError, match=r"cannot write the cache directory .*a_file/cache "
                       r"\(Not a directory\); set MT_CACHE_DIR"):
        cache_entry("corpus", "key", lambda d: None, ())


def test_resuming_over_a_changed_training_corpus_is_refused(tmp_path, monkeypatch):
    """The batch plan indexes the corpus's lines: a resume over shuffled lines would train on
    misaligned pairs. The checkpoint's fingerprint of the corpus catches it."""
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))
    data = write_corpus(tmp_path / "corpus", "tsv")
    write_config(tmp_path / "toy.yaml", data, train={"max_steps": 3, "eval_every": 3})
    run = ["train", "--config", str(tmp_path / "toy.yaml"), "--run-dir", str(tmp_path / "run")]
    assert run_cli(run).returncode == 0
    tsv = tmp_path / "corpus" / "train.tsv"
    original = tsv.read_text(encoding="utf-8")
    lines = original.splitlines(keepends=True)
    tsv.write_text("".join(lines[1:] + lines[:1]), encoding="utf-8")  # same lines, shifted
    last = (tmp_path / "run" / "last.pt").read_bytes()
    result = run_cli([*run, "--set", "train.max_steps=5"])
    line = result.stderr.strip().splitlines()[-1]
    assert result.returncode != 0 and "training corpus" in line and "has changed" in line
    assert (tmp_path / "run" / "last.pt").read_bytes() == last
    tsv.write_text(original, encoding="utf-8")
    resumed = run_cli([*run, "--set", "train.max_steps=5"])
    assert resumed.returncode == 0, resumed.stderr
    assert "trained to step 5" in resumed.stdout


def test_languages_are_checked_only_against_a_spacy_that_is_there(tmp_path, monkeypatch):
    """The codes a config may name come from spaCy's package where it is installed; where it
    is not (a GPU image), or a package of that name holds no languages, any code is taken
    (SentencePiece needs no spaCy), never an error about spaCy's files."""
    import importlib.machinery
    import importlib.util

    from transformer_mt.config import languages

    real = languages.spacy_languages()
    assert "de" in real and "en" in real
    (tmp_path / "spacy").mkdir()
    fake = importlib.machinery.ModuleSpec("spacy", None, origin=str(tmp_path / "spacy" /
                                                                    "__init__.py"))
    for spec in (None, fake):
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, spec=spec: spec)
        languages.spacy_languages.cache_clear()
        try:
            assert languages.spacy_languages() == ()
            languages.check_language("xx-made-up", "data.src_lang")  # taken
        finally:
            languages.spacy_languages.cache_clear()
