"""mt export --format huggingface: transformers loads the directory with its own classes and
computes what we compute (logits within 1e-4, the same greedy translations, the same beam
translations without a length penalty); what it cannot carry is refused in one line."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from tests.helpers import TOY_DE_EN, run_cli, tiny_train_args, toy_corpus
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, PAD_ID
from transformer_mt.decode.search import max_output_lengths
from transformer_mt.translate import Translator

transformers = pytest.importorskip("transformers")

VARIANTS = {  # name: (norm, shared vocabulary, tied output projection)
    "pre-norm, one vocabulary": ("pre", True, True),
    "post-norm, two vocabularies": ("post", False, True),
    "post-norm, one vocabulary, untied": ("post", True, False),
}
SENTENCES = [*(TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:40],
             "Ein Hund läuft über die große grüne Wiese.", "Zwei Männer spielen Fußball im Park."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each variant trained for a few steps on the toy corpus with SentencePiece, exported."""
    out = {}
    for name, (norm, shared, tied) in VARIANTS.items():
        tmp = tmp_path_factory.mktemp("hf")
        result = run_cli(tiny_train_args(
            tmp / "run", "data.tokenizer=sentencepiece", "data.vocab_size=400",
            f"model.norm={norm}", f"data.shared_vocab={str(shared).lower()}",
            f"model.tie_embeddings={str(tied).lower()}", "model.d_model=64",
            "model.n_encoder_layers=2", "model.n_decoder_layers=2", "train.max_steps=40",
            "train.warmup_steps=10", "train.max_tokens=1000", "train.eval_every=40",
            "train.save_every=40"))  # one validation and one save: the model exported
        assert result.returncode == 0, result.stderr
        checkpoint = tmp / "run" / "best.pt"
        result = run_cli(["export", "--format", "huggingface", str(checkpoint),
                          str(tmp / "hf")])
        assert result.returncode == 0, result.stderr
        out[name] = (checkpoint, tmp / "hf")
    return out


def _load(directory):
    return (transformers.AutoTokenizer.from_pretrained(directory),
            transformers.AutoModelForSeq2SeqLM.from_pretrained(directory).eval())


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_transformers_computes_what_we_compute(exported, variant):
    checkpoint, directory = exported[variant]
    tokenizer, model = _load(directory)
    norm = VARIANTS[variant][0]
    assert type(model).__name__ == ("PegasusForConditionalGeneration" if norm == "pre"
                                    else "MarianMTModel")
    translator = Translator.load(checkpoint, "cpu")
    ids = translator.encode(SENTENCES)
    assert [tokenizer(s)["input_ids"] for s in SENTENCES] == ids  # the same ids, <eos> too
    greedy = translator.translate(SENTENCES, nbest=1, beam_size=1, precision="fp32")
    allowed = torch.ones(len(translator.tgt_vocab), dtype=torch.bool)
    allowed[[PAD_ID, BOS_ID]] = False  # -inf on both sides: never produced
    for x, hyps in zip(ids, greedy, strict=True):
        src, tgt_in = torch.tensor([x]), torch.tensor([[BOS_ID, *hyps[0].ids]])
        with torch.no_grad():
            ours = translator.model(src, tgt_in, source_mask(src))
            theirs = model(input_ids=src, decoder_input_ids=tgt_in).logits
        assert (ours[..., allowed] - theirs[..., allowed]).abs().max() < 1e-4
        assert torch.all(theirs[..., ~allowed] == -torch.inf)
        # greedy search to the same length limit: the same translation
        limit = int(max_output_lengths(source_mask(src), 1.5, 10,
                                       translator.config.model.max_output_tokens)[0])
        out = model.generate(src, num_beams=1, do_sample=False, max_length=limit + 2)
        assert tokenizer.decode(out[0], skip_special_tokens=True) == hyps[0].text


def test_beam_search_agrees_without_a_length_penalty(exported):
    """Beam search is transformers' own; without a length penalty (whose formulas differ:
    docs/export.md) it finds what ours finds, and with its ``no_repeat_ngram_size`` what ours
    finds with ``decode.no_repeat_ngram_size`` (both bar after normalising)."""
    checkpoint, directory = exported["post-norm, two vocabularies"]
    tokenizer, model = _load(directory)
    translator = Translator.load(checkpoint, "cpu")
    found = {}
    for n in (0, 2):
        found[n] = translator.translate(SENTENCES, beam_size=4, alpha=0.0, precision="fp32",
                                        max_sentence_tokens=250,  # each whole, as theirs
                                        no_repeat_ngram_size=n)
        for sentence, text in zip(SENTENCES, found[n], strict=True):
            batch = tokenizer(sentence, return_tensors="pt")
            limit = int(1.5 * batch["input_ids"].size(1)) + 10
            out = model.generate(**batch, num_beams=4, length_penalty=0.0,
                                 early_stopping=True, max_length=limit + 2,
                                 no_repeat_ngram_size=n)
            assert tokenizer.decode(out[0], skip_special_tokens=True) == text
    assert sum(a != b for a, b in zip(found[0], found[2], strict=True)) >= 5  # (it bars some)


def test_the_directory_says_what_it_is(exported):
    checkpoint, directory = exported["pre-norm, one vocabulary"]
    translator = Translator.load(checkpoint, "cpu")
    generation = json.loads((directory / "generation_config.json").read_text())
    assert generation["num_beams"] == translator.config.decode.beam_size
    assert generation["no_repeat_ngram_size"] == translator.config.decode.no_repeat_ngram_size
    assert generation["decoder_start_token_id"] == BOS_ID
    card = (directory / "README.md").read_text()
    assert "language: [de, en]" in card and "pipeline_tag: translation" in card
    assert "AutoModelForSeq2SeqLM" in card and "length penalty" in card
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["kind"] == "huggingface"
    assert set(manifest["files"]) == {p.name for p in directory.iterdir()} - {"manifest.json"}
    # an earlier export is replaced only when asked
    again = run_cli(["export", "--format", "huggingface", str(checkpoint), str(directory)])
    assert again.returncode != 0 and "--overwrite" in again.stderr.strip().splitlines()[-1]
    again = run_cli(["export", "--format", "huggingface", "--overwrite", str(checkpoint),
                     str(directory)])
    assert again.returncode == 0, again.stderr


def test_without_transformers_the_extra_is_named(exported, tmp_path, monkeypatch):
    from transformer_mt import packages

    real = packages.installed
    monkeypatch.setattr(packages, "installed", lambda m: m != "transformers" and real(m))
    checkpoint, _ = exported["pre-norm, one vocabulary"]
    result = run_cli(["export", "--format", "huggingface", str(checkpoint), str(tmp_path / "x")])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "transformer_mt[huggingface]" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x").exists()


def test_what_transformers_cannot_carry_is_refused_in_one_line(trained_run, tmp_path):
    words = trained_run[0] / "best.pt"  # a spaCy (word-level) model
    cases = [
        (["export", "--format", "huggingface", str(words), str(tmp_path / "a")],
         "data.tokenizer: sentencepiece"),
        (["export", "--format", "huggingface", "--quantization", "int8", str(words),
          str(tmp_path / "b")], "--quantization is CTranslate2's"),
    ]
    result = run_cli(tiny_train_args(tmp_path / "pre", "data.tokenizer=sentencepiece",
                                     "data.vocab_size=400", "train.max_steps=1"))
    assert result.returncode == 0, result.stderr
    cases.append((["export", "--format", "huggingface", str(tmp_path / "pre" / "best.pt"),
                   str(tmp_path / "c")], "data.shared_vocab: true"))
    for args, message in cases:
        result = run_cli(args)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert message in result.stderr.strip().splitlines()[-1]
        assert not (tmp_path / args[-1]).exists()


def _opus_like(directory, tmp_path):
    """A random Marian model laid out as OPUS-MT's are: SiLU ("swish"), one vocabulary of both
    sides' SentencePiece pieces with ``</s>`` at 0, ``<unk>`` at 1 and ``<pad>`` last, which
    is also the decoder's first token, and a -inf logit bias on ``<pad>``."""
    import sentencepiece as spm

    models = {}
    for side, lang in (("source", "de"), ("target", "en")):
        prefix = tmp_path / side
        spm.SentencePieceTrainer.train(input=str(TOY_DE_EN / f"train.{lang}"),
                                       model_prefix=str(prefix), vocab_size=200,
                                       character_coverage=1.0, hard_vocab_limit=False,
                                       minloglevel=2)
        models[side] = prefix.with_suffix(".model")
    pieces = []
    for path in models.values():
        processor = spm.SentencePieceProcessor(model_file=str(path))
        pieces += [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())]
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    pad = vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=32, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, activation_function="swish",
        max_position_embeddings=64, scale_embedding=True, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias[0, pad] = -torch.inf
    model.save_pretrained(directory)
    tokenizer = transformers.MarianTokenizer(
        source_spm=str(models["source"]), target_spm=str(models["target"]),
        vocab=str(tmp_path / "vocab.json"), source_lang="de", target_lang="en")
    tokenizer.save_pretrained(directory)
    return tokenizer, model


def test_an_opus_mt_style_model_imports_computes_the_same_and_fine_tunes(tmp_path):
    tokenizer, model = _opus_like(tmp_path / "opus", tmp_path)
    result = run_cli(["import", str(tmp_path / "opus"), str(tmp_path / "opus.pt")])
    assert result.returncode == 0, result.stderr
    translator = Translator.load(tmp_path / "opus.pt", "cpu")
    assert translator.config.model.activation == "silu" and translator.config.model.norm == "post"
    # our ids are theirs reordered: our specials first (<bos>: their decoder's first token,
    # <pad>), the rest in their order
    pad = len(tokenizer.encoder) - 1
    theirs_of = torch.tensor([1, pad, pad, 0, *range(2, pad)])  # ours i -> theirs
    ours_of = {int(t): i for i, t in enumerate(theirs_of) if i != 2}
    assert len(translator.tgt_vocab) == len(theirs_of) == len(tokenizer.encoder) + 1
    sentences = SENTENCES[:20]
    ids = translator.encode(sentences)
    assert [[ours_of[i] for i in tokenizer(s)["input_ids"]] for s in sentences] == ids
    greedy = translator.translate(sentences, nbest=1, beam_size=1, precision="fp32")
    for x, hyps, sentence in zip(ids, greedy, sentences, strict=True):
        src = torch.tensor([x])
        tgt_in = torch.tensor([[BOS_ID, *hyps[0].ids]])
        with torch.no_grad():
            ours = translator.model(src, tgt_in, source_mask(src))
            theirs = model(input_ids=theirs_of[src], decoder_input_ids=theirs_of[tgt_in]).logits
        assert (ours[..., 4:] - theirs[..., theirs_of[4:]]).abs().max() < 1e-4
        batch = tokenizer(sentence, return_tensors="pt")
        limit = int(1.5 * batch["input_ids"].size(1)) + 10
        out = model.generate(**batch, num_beams=1, do_sample=False, max_length=limit + 2)
        assert tokenizer.decode(out[0], skip_special_tokens=True) == hyps[0].text
    # fine-tuning on one's own corpus, from the config written beside the checkpoint
    finetune = tmp_path / "opus.finetune.yaml"
    assert f"init_from: {tmp_path / 'opus.pt'}" in finetune.read_text()
    result = run_cli(["train", "--config", str(finetune), "--run-dir", str(tmp_path / "ft"),
                      "--set", f"data.train={toy_corpus('train')}",
                      "--set", f"data.valid={toy_corpus('valid')}", "--set", "train.max_steps=3",
                      "--set", "train.eval_every=3", "--set", "train.max_tokens=500"])
    assert result.returncode == 0, result.stderr
    assert "fine-tuning: weights of" in result.stderr
    tuned = Translator.load(tmp_path / "ft" / "last.pt", "cpu")
    assert tuned.src_vocab.itos == translator.src_vocab.itos  # the model's vocabulary, kept


def test_import_refuses_what_it_cannot_carry(tmp_path):
    result = run_cli(["import", str(tmp_path), str(tmp_path / "x.pt")])
    assert result.returncode == 2 and "no config.json" in result.stderr.strip().splitlines()[-1]
    named = run_cli(["import", "Helsinki-NLP/opus-mt-de-en", str(tmp_path / "x.pt")])  # a name
    assert "hf download Helsinki-NLP/opus-mt-de-en --local-dir opus-mt-de-en" in named.stderr
    _opus_like(tmp_path / "opus", tmp_path)

    def refused(change) -> str:
        """The last line mt import says of a copy of the model that ``change`` damaged."""
        damaged = tmp_path / "damaged"
        shutil.rmtree(damaged, ignore_errors=True)
        shutil.copytree(tmp_path / "opus", damaged)
        change(damaged)
        result = run_cli(["import", str(damaged), str(tmp_path / "x.pt")])
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        return result.stderr.strip().splitlines()[-1]

    def weights(directory, drop: str) -> None:
        from safetensors.torch import load_file, save_file

        state = load_file(directory / "model.safetensors")
        del state[drop]
        save_file(state, directory / "model.safetensors", metadata={"format": "pt"})

    def edit(directory, name: str, change) -> None:
        path = directory / name
        path.write_text(json.dumps(change(json.loads(path.read_text()))), encoding="utf-8")

    assert "holds no transformers model" in refused(  # a CTranslate2 model's config.json
        lambda d: (d / "config.json").write_text('{"add_source_bos": false}'))
    assert "lacks 1 of the model's weights" in refused(
        lambda d: weights(d, "model.decoder.layers.1.fc2.weight"))
    assert "says no decoder_start_token_id" in refused(lambda d: edit(
        d, "config.json", lambda c: {**c, "decoder_start_token_id": None}))
    assert "but no target_vocab.json" in refused(lambda d: edit(
        d, "tokenizer_config.json", lambda c: {**c, "separate_vocabs": True}))
    assert "tokens in its vocab.json" in refused(lambda d: edit(
        d, "vocab.json", lambda v: dict(list(v.items())[:100])))
    inside = run_cli(["import", str(tmp_path / "opus"),
                      str(tmp_path / "opus" / "model.safetensors"), "--overwrite"])
    assert inside.returncode == 2 and "in the model directory" in inside.stderr
    assert (tmp_path / "opus" / "model.safetensors").stat().st_size > 1000  # untouched
    (tmp_path / "x.finetune.yaml").write_text("mine")
    kept = run_cli(["import", str(tmp_path / "opus"), str(tmp_path / "x.pt")])
    assert kept.returncode == 2 and "x.finetune.yaml' exists" in kept.stderr
    assert (tmp_path / "x.finetune.yaml").read_text() == "mine"
    (tmp_path / "x.finetune.yaml").unlink()
    (tmp_path / "opus" / "source.spm").unlink()
    result = run_cli(["import", str(tmp_path / "opus"), str(tmp_path / "x.pt")])
    assert result.returncode == 2 and "no source.spm" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x.pt").exists()


@pytest.mark.parametrize("variant", ["pre-norm, one vocabulary", "post-norm, two vocabularies"])
def test_export_then_import_gives_the_model_back(exported, variant, tmp_path):
    checkpoint, directory = exported[variant]
    result = run_cli(["import", str(directory), str(tmp_path / "back.pt")])
    assert result.returncode == 0, result.stderr
    before, after = Translator.load(checkpoint, "cpu"), Translator.load(tmp_path / "back.pt")
    assert after.src_vocab.itos == before.src_vocab.itos
    assert after.tgt_vocab.itos == before.tgt_vocab.itos
    for name, weight in before.model.state_dict().items():
        assert torch.equal(weight, after.model.state_dict()[name]), name
    assert after.config.decode.beam_size == before.config.decode.beam_size  # generation_config
    # (each sentence whole: the import has no record of how long the training's were)
    same = {"beam_size": 4, "precision": "fp32", "batch_size": 16, "max_sentence_tokens": 250}
    assert after.translate(SENTENCES, **same) == before.translate(SENTENCES, **same)


def test_ctranslate2s_own_converter_takes_the_pegasus_export(exported, tmp_path):
    """What tools that convert from the Hub run (ct2-transformers-converter): the pre-norm
    (Pegasus) export converts, and CTranslate2 translates with it as we do (greedy, fp32).
    The Marian-class export is refused by that converter, loudly: its Marian loader assumes
    OPUS-MT's layout (a decoder that starts from a zero vector, <pad> last) and drops a row;
    docs/export.md sends such models through mt export --format ctranslate2."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from ctranslate2.converters import TransformersConverter

    checkpoint, directory = exported["pre-norm, one vocabulary"]
    TransformersConverter(str(directory)).convert(str(tmp_path / "ct2"))
    translator = Translator.load(checkpoint, "cpu")
    ours = translator.translate(SENTENCES, nbest=1, beam_size=1, precision="fp32")
    engine = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu",
                                    compute_type="float32")
    ids = translator.encode(SENTENCES)
    for x, hyps in zip(ids, ours, strict=True):
        src = torch.tensor([x])
        limit = int(max_output_lengths(source_mask(src), 1.5, 10,
                                       translator.config.model.max_output_tokens)[0])
        out = engine.translate_batch([[translator.src_vocab.itos[i] for i in x]],
                                     beam_size=1, max_decoding_length=limit + 1,
                                     min_decoding_length=0)
        assert translator.detokenize(out[0].hypotheses[0][:limit]) == hyps[0].text
    _, marian = exported["post-norm, two vocabularies"]
    with pytest.raises(ValueError, match="vocabulary"):
        TransformersConverter(str(marian)).convert(str(tmp_path / "marian"))
