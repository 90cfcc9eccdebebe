"""Interactive decoding from text, as users reach it (#34): a target prefix ("finish my
sentence", an unfinished last word finished), alternatives at a position and word alignments
through the Translator, mt translate, mt trace and POST /v1/translate; our alternatives and
prefixes equal CTranslate2's on the exported model; bad prefixes are one-line errors and 422s."""

from __future__ import annotations

import pytest

from tests.helpers import TOY_DE_EN, local_client, run_cli
from transformer_mt.data.tokenize import SubwordTokenizer, WordTokenizer, train_sentencepiece
from transformer_mt.data.vocab import UNK_ID, Vocab
from transformer_mt.errors import MTError
from transformer_mt.translate import Translator
from transformer_mt.translate.prefix import forcing_of


def _sources(n: int = 12) -> list[str]:
    return (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:n]


def test_a_prefix_of_the_models_own_words_gives_its_translation(translator):
    """The model's own greedy output, cut after k tokens (and k tokens plus the first letters of
    the next: a word to finish), forced as a prefix: the same translation and score."""
    sources = _sources()
    plain = translator.translate(sources, nbest=1, beam_size=1, precision="fp32")
    for cut in (1, 2, 4):
        whole = [" ".join(h[0].tokens[:cut]) + " " for h in plain]
        partial = [" ".join([*h[0].tokens[:cut], h[0].tokens[cut][:2]])
                   if len(h[0].tokens) > cut else "" for h in plain]
        for prefixes in (whole, partial):
            forced = translator.translate(sources, nbest=1, beam_size=1, precision="fp32",
                                                prefix=prefixes)
            assert [h[0].tokens for h in forced] == [h[0].tokens for h in plain]
            assert [h[0].score for h in forced] == pytest.approx(
                [h[0].score for h in plain], abs=1e-4)


def test_forced_words_begin_the_translation_and_are_scored(translator):
    sources = _sources(6)
    words = [translator.tgt_vocab.itos[i] for i in range(10, 16)]  # words the model has
    prefixes = [f"{w} {v} " for w, v in zip(words, reversed(words), strict=True)]
    limits = [int(1.5 * len(x)) + 10 for x in translator.encode(sources)]
    compared = 0
    for beam in (1, 3):
        found = translator.translate(sources, nbest=1, beam_size=beam, prefix=prefixes,
                                           precision="fp32")
        scored = translator.score(sources, [h[0].text for h in found], precision="fp32")
        for prefix, hyps, s, limit in zip(prefixes, found, scored, limits, strict=True):
            assert hyps[0].tokens[:2] == prefix.split()
            # the text gives the tokens back, and search did not cut the output (forcing <eos>)
            if s.tokens[:-1] == hyps[0].tokens and len(hyps[0].tokens) < limit:
                expected = s.score if beam > 1 else s.log_prob
                assert hyps[0].score == pytest.approx(expected, abs=1e-3)
                compared += 1
    assert compared >= 3


def test_prefixes_are_made_of_what_the_vocabulary_can_write(tmp_path):
    texts = (TOY_DE_EN / "train.en").read_text(encoding="utf-8").splitlines()
    words = WordTokenizer("en")
    vocab = Vocab.build(words.tokenize(texts), min_freq=1)
    forcing = forcing_of(["Two dogs ", "Two do", "", "  "], words, vocab, 50)
    assert forcing.tokens == [[vocab.stoi["Two"], vocab.stoi["dogs"]], [vocab.stoi["Two"]], [],
                              []]
    assert forcing.then[0] is None and forcing.then[2] is None
    assert {vocab.itos[i] for i in forcing.then[1]} == {
        w for w in vocab.itos[4:] if w.startswith("do")} and "dogs" in {
        vocab.itos[i] for i in forcing.then[1]}
    unknown = forcing_of(["Two Zorblax "], words, vocab, 50)  # a whole word the vocabulary
    assert unknown.tokens == [[vocab.stoi["Two"], UNK_ID]]  # lacks: forced as <unk>, written
    assert unknown.kept == [[(1, 2, "Zorblax")]]  # as typed ("Zorblax", unfinished: refused)
    for prefix, message in (("Two xqz", "begins with 'xqz'"), ("dogs " * 60, "at most 50")):
        with pytest.raises(MTError, match=message):
            forcing_of([prefix], words, vocab, 50)

    spm = SubwordTokenizer(train_sentencepiece(texts, _spm_config(tmp_path)))
    pieces = spm.fixed_vocab()
    forcing = forcing_of(["Two dogs s", "Two dogs "], spm, pieces, 50)
    *whole, last = next(spm.tokenize(["Two dogs s"]))
    assert [pieces.itos[i] for i in forcing.tokens[0]] == whole  # the last piece is finished
    assert {pieces.itos[i] for i in forcing.then[0]} == {
        p for p in pieces.itos[4:] if p.startswith(last)}
    assert [pieces.itos[i] for i in forcing.tokens[1]] == next(spm.tokenize(["Two dogs"]))
    assert forcing.then[1] is None
    assert spm.words(["▁Two", "▁do", "gs", "▁s", "wim", "."]) == [0, 1, 1, 2, 2, 2]
    # Chinese and Japanese run their words together: each piece is one
    assert spm.words(["▁两只", "狗", "在", "▁Schnee", "里玩", "。"]) == [0, 1, 2, 3, 4, 5]


def _spm_config(tmp_path):
    from transformer_mt.config import DataConfig

    return DataConfig(tokenizer="sentencepiece", vocab_size=300)


def test_alternatives_begin_with_greedys_and_match_ctranslate2(translator, trained_run,
                                                               tmp_path):
    sources = _sources(8)
    greedy = translator.translate(sources, nbest=1, beam_size=1, precision="fp32")
    for source, hyps in zip(sources, greedy, strict=True):
        found = translator.alternatives(source, "", 3, beam_size=1, precision="fp32")
        assert found[0].translation.tokens == hyps[0].tokens
        assert [c.log_prob for c in found] == sorted((c.log_prob for c in found), reverse=True)
        assert len({c.token for c in found}) == 3
    pytest.importorskip("ctranslate2")
    from transformer_mt.formats.ctranslate2 import export_ctranslate2

    theirs = Translator.load(export_ctranslate2(trained_run[0] / "best.pt", tmp_path / "ct2"),
                             "cpu", engine="ctranslate2")
    prefix = " ".join(greedy[0][0].tokens[:2]) + " "
    for source in sources:
        for p in ("", prefix):
            found = [c for c in translator.alternatives(source, p, 4, beam_size=1,
                                                         precision="fp32") if c.token != "<eos>"]
            other = theirs.alternatives(source, p, 4, beam_size=1)[:len(found)]  # never ends
            assert [(c.token, c.translation.tokens) for c in found] == [
                (c.token, c.translation.tokens) for c in other]
            for mine, its in zip(found, other, strict=True):  # scored as ours
                assert its.log_prob == pytest.approx(mine.log_prob, abs=1e-4)
                assert its.translation.score == pytest.approx(mine.translation.score, abs=1e-4)
    assert translator.translate(sources, beam_size=1, precision="fp32",
                                prefix=[prefix] * len(sources)) == theirs.translate(
        sources, beam_size=1, prefix=[prefix] * len(sources))
    with pytest.raises(MTError, match="whole words"):
        theirs.translate(sources[:1], prefix=["A ma"])


def test_the_command_line_finishes_offers_and_aligns(trained_run, translator, tmp_path):
    ckpt = str(trained_run[0] / "best.pt")
    source = _sources(1)[0]
    best = translator.translate([source], nbest=1, beam_size=1)[0][0]
    prefix = best.tokens[0] + " "
    done = run_cli(["translate", "--checkpoint", ckpt, "--beam-size", "1", "--prefix", prefix,
                    source])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == best.text
    offered = run_cli(["translate", "--checkpoint", ckpt, "--beam-size", "1", "--prefix",
                       prefix, "--alternatives", "3", source])
    assert offered.returncode == 0, offered.stderr
    rows = [line.split("\t") for line in offered.stdout.splitlines()]
    expected = translator.alternatives(source, prefix, 3, beam_size=1)
    assert [(r[0], r[1], r[3]) for r in rows] == [("0", c.token, c.translation.text)
                                                  for c in expected]
    written = tmp_path / "alternatives.tsv"
    written.write_text("an older file\n")
    to_file = run_cli(["translate", "--checkpoint", ckpt, "--beam-size", "1", "--prefix",
                       prefix, "--alternatives", "3", "--output", str(written), source])
    assert to_file.returncode == 0 and to_file.stdout == ""
    assert written.read_text() == offered.stdout
    given = tmp_path / "with-a-blank.de"
    given.write_text(f"{source}\n\n{source}\n")
    blank = run_cli(["translate", "--checkpoint", ckpt, "--alternatives", "2", "--input",
                     str(given)])
    assert blank.returncode == 2 and "line 2 is blank" in blank.stderr
    aligned = run_cli(["translate", "--checkpoint", ckpt, "--beam-size", "1", "--align",
                       "--layer", "0", source, "Zwei Hunde."])
    assert aligned.returncode == 0, aligned.stderr
    first = aligned.stdout.splitlines()[0]
    text, links = first.split(" ||| ")
    assert text == best.text
    pairs = [tuple(map(int, link.split("-"))) for link in links.split()]
    assert pairs == translator.align(source, best, 0)
    n_src, n_out = len(next(translator.tokenizers[0].tokenize([source]))), len(best.tokens)
    assert sorted({j for _, j in pairs}) == list(range(n_out))  # every output word, once or more
    assert all(0 <= i < n_src for i, _ in pairs)
    traced = run_cli(["trace", "--checkpoint", ckpt, "--prefix", prefix, "--alternatives", "2",
                      source])
    assert traced.returncode == 0, traced.stderr
    assert f"the prefix forces '{best.tokens[0]}'" in traced.stdout
    assert "7. Alternatives at step 1" in traced.stdout
    named = run_cli(["translate", "--checkpoint", ckpt, "--prefix", "Zorblax ", source])
    assert named.returncode == 0 and named.stdout.startswith("Zorblax "), named.stderr
    for args, message in ((["--split-sentences", "--prefix", "A "], "--split-sentences"),
                          (["--align", "--layer", "7"], "--layer 7 is out of range"),
                          (["--alternatives", "2"], "takes sentences")):
        bad = run_cli(["translate", "--checkpoint", ckpt, *args,
                       *([] if "takes sentences" in message else [source])])
        assert bad.returncode != 0 and message in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr


def test_prefixes_alternatives_and_alignments_over_http(translator):
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    sources = _sources(3)
    best = translator.translate(sources, nbest=1, beam_size=1)
    prefixes = [h[0].tokens[0] + " " for h in best]
    with local_client(create_app(translator, ServeOptions())) as client:
        got = client.post("/v1/translate", json={
            "text": sources, "prefix": prefixes, "alternatives": 2, "align": True,
            "beam_size": 1})
        assert got.status_code == 200, got.text
        for answer, source, prefix, hyps in zip(got.json()["translations"], sources, prefixes,
                                                best, strict=True):
            assert answer["text"] == hyps[0].text
            expected = translator.alternatives(source, prefix, 2, beam_size=1)
            assert [(a["token"], a["text"]) for a in answer["alternatives"]] == [
                (c.token, c.translation.text) for c in expected]
            assert answer["alternatives"][0]["log_prob"] == pytest.approx(
                expected[0].log_prob, abs=1e-4)
            assert [tuple(p) for p in answer["alignment"]] == translator.align(source, hyps[0])
        one = client.post("/v1/translate", json={"text": sources[0], "prefix": "",
                                                 "beam_size": 1})
        assert one.json()["translations"][0]["text"] == best[0][0].text
        # a sentence longer than the training's, steered, is read whole (as mt translate does)
        long = "Ein Mann fährt Fahrrad, zwei Hunde spielen im Schnee, eine Frau liest ein Buch."
        assert translator.fits([long]) == [False]
        steered = client.post("/v1/translate", json={"text": long, "prefix": "A ",
                                                     "align": True, "beam_size": 1})
        assert steered.status_code == 200, steered.text
        assert steered.json()["translations"][0]["text"] == translator.translate(
            [long], nbest=1, beam_size=1, prefix=["A "])[0][0].text
        for body, message in (
                ({"text": sources[:2], "prefix": "A "}, "2 texts"),
                ({"text": "Ein Hund. Eine Katze.", "prefix": "A "}, "holds 2 sentences"),
                ({"text": sources[0], "alternatives": 99}, "at most 8"),
                ({"text": sources[0], "prefix": 3}, "prefix")):
            bad = client.post("/v1/translate", json=body)
            assert bad.status_code == 422 and message in bad.json()["error"], bad.text
        assert client.post("/v1/translate", json={"text": sources[0]}).status_code == 200
        named = client.post("/v1/translate", json={"text": sources[0], "prefix": "Zorblax "})
        [found] = named.json()["translations"]  # a word the model lacks, written as typed
        assert found["text"].startswith("Zorblax ") and found["tokens"][0] == "Zorblax"
