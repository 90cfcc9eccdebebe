"""mt export --format huggingface: transformers loads the directory with its own classes and
computes what we compute (logits within 1e-4, the same greedy translations, the same beam
translations without a length penalty); what it cannot carry is refused in one line."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers import TOY_DE_EN, run_cli, tiny_train_args
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
            "train.warmup_steps=10", "train.max_tokens=1000"))
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
    greedy = translator.translate_nbest(SENTENCES, 1, beam_size=1, precision="fp32")
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
    docs/export.md) it finds what ours finds."""
    checkpoint, directory = exported["post-norm, two vocabularies"]
    tokenizer, model = _load(directory)
    translator = Translator.load(checkpoint, "cpu")
    ours = translator.translate(SENTENCES, beam_size=4, alpha=0.0, precision="fp32")
    for sentence, text in zip(SENTENCES, ours, strict=True):
        batch = tokenizer(sentence, return_tensors="pt")
        limit = int(1.5 * batch["input_ids"].size(1)) + 10
        out = model.generate(**batch, num_beams=4, length_penalty=0.0, early_stopping=True,
                             max_length=limit + 2)
        assert tokenizer.decode(out[0], skip_special_tokens=True) == text


def test_the_directory_says_what_it_is(exported):
    checkpoint, directory = exported["pre-norm, one vocabulary"]
    translator = Translator.load(checkpoint, "cpu")
    generation = json.loads((directory / "generation_config.json").read_text())
    assert generation["num_beams"] == translator.config.decode.beam_size
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
