"""A word-level model's ``<unk>`` written as the source word it attends to most
(``decode.replace_unk``, translate/unknown.py): through the Translator, ``mt translate`` and the
server, whose cache is keyed by ids (two sources with different unknown names are the same ids).
The tiny run writes no ``<unk>`` itself: its decoder's outputs get one at their second token."""

from __future__ import annotations

import dataclasses

import pytest

from tests.helpers import local_client, run_cli
from transformer_mt.data.vocab import UNK, UNK_ID
from transformer_mt.translate import Translation
from transformer_mt.translate.unknown import (
    _inside,
    _phrases,
    _placed,
    copied_from,
    copy_unknown,
    unwritable,
)

# the same ids; the name the one word the tiny run lacks (what is copied, whatever the rounding)
NAMES = ["Ein Mann läuft in Tübingen.", "Ein Mann läuft in Wolfsburg."]


def with_unk(decode):
    """An engine's ``decode`` whose outputs have ``<unk>`` as their second token."""
    def decoding(*args, **kwargs):
        return [[dataclasses.replace(h, tokens=[*h.tokens[:1], UNK_ID, *h.tokens[2:]])
                 for h in hyps] for hyps in decode(*args, **kwargs)]

    return decoding


@pytest.fixture()
def writes_unk(translator, monkeypatch):
    monkeypatch.setattr(translator.engine, "decode", with_unk(translator.engine.decode))
    return translator


def test_the_same_ids_copy_each_sources_own_word(writes_unk):
    t = writes_unk
    assert t.encode(NAMES[:1]) == t.encode(NAMES[1:])  # both names are unknown, alone
    assert [i for i in t.encode(NAMES[:1])[0] if i == UNK_ID] == [UNK_ID]
    plain = t.translate(NAMES, nbest=1, replace_unk=False)
    copied = t.translate(NAMES, nbest=1)
    for name, [before], [after] in zip(["Tübingen", "Wolfsburg"], plain, copied, strict=True):
        assert before.tokens[1] == UNK and after.ids == before.ids
        assert after.tokens == [*before.tokens[:1], name, *before.tokens[2:]]
        assert after.text == t.detokenize(after.tokens) and name in after.text
    assert t.translate(NAMES) == [h[0].text for h in copied]  # text of a sentence the same


def test_copy_follows_attention_and_keeps_a_glossarys_spans(translator):
    """Where the source has several unknown words, the one the ``<unk>`` attends to most; a
    span already written as a given text (a glossary's term) stays as it is."""
    sentence = "Herr Quastenflosser aus Tübingen spielt."
    src = translator.encode([sentence])[0]
    words = next(iter(translator.tokenizers[0].tokenize([sentence])))
    unknown = [j for j, i in enumerate(src[:-1]) if i == UNK_ID]
    assert len(unknown) >= 2
    [[h]] = translator.translate([sentence], nbest=1, replace_unk=False)
    ids = [h.ids[0], UNK_ID, UNK_ID, *h.ids[3:]]
    tokens = translator.tgt_vocab.decode(ids)
    kept = [(2, 3, "New York")]  # the second <unk> is a glossary's term
    given = Translation(translator.tokenizers[1].detokenize_keeping(tokens, kept), tokens,
                        h.score, ids, kept=kept)
    [[out]] = copy_unknown(translator, [sentence], [[given]])
    weights = translator.cross_attention(src, ids)  # (T + 1, S)
    j = max(unknown, key=lambda j: weights[1, j].item())
    assert out.tokens == [tokens[0], words[j], "New York", *tokens[3:]]  # each <unk> shown
    assert out.kept == [*kept, (1, 2, words[j])] and given.kept == kept  # a new object
    assert out.text == translator.tokenizers[1].detokenize(
        [tokens[0], words[j], "New York", *tokens[3:]])
    assert copy_unknown(translator, [sentence], [[out]]) == [[out]]  # done once
    # a source without unknown words: any of its words (never a full stop, never <eos>)
    assert copied_from(weights, ids, [4, 5, 6, 3], ["Ein", ".", "Hund"]) == [
        [0, 2][j] for j in weights[[1, 2]][:, [0, 2]].argmax(-1).tolist()]
    assert copied_from(weights, ids, [4, 3], ["."]) == []  # no word: <unk> stays


def test_a_word_copied_before_a_full_stop_is_written_without_its_own(translator):
    """spaCy reads German's "42." at a sentence's end as one word (an ordinal's): copied
    before the full stop the output writes, it was written "42.."."""
    sentence = "Ein Mann läuft 42."
    assert next(iter(translator.tokenizers[0].tokenize([sentence])))[-1] == "42."
    assert translator.encode([sentence])[0][-2] == UNK_ID  # (the one word the model lacks)
    for tokens, text in ([["A", UNK, "."], "A 42."], [["A", UNK, "runs"], "A 42. runs"]):
        ids = [translator.tgt_vocab.stoi.get(t, UNK_ID) for t in tokens]
        [[out]] = copy_unknown(translator, [sentence], [[Translation(
            translator.tokenizers[1].detokenize(tokens), tokens, 0.0, ids)]])
        assert out.text == text


def test_a_word_the_model_writes_as_several_unks_in_a_row_is_written_once(translator):
    """A model that cannot write a word often writes an ``<unk>`` for each of its parts,
    each copying the same source word: written once ("A Luftaufnahme Luftaufnahme with"),
    one span, each of its tokens showing the word; and a source word is copied once: a
    later ``<unk>`` that copies it again, a token between, is written as nothing."""
    sentence = "Ein Mann läuft in Tübingen."  # its one unknown word
    for tokens, text, kept in ([["A", UNK, UNK, UNK, "runs"], "A Tübingen runs",
                                [(1, 4, "Tübingen")]],
                               [["A", UNK, "runs", UNK], "A Tübingen runs",
                                [(1, 2, "Tübingen"), (3, 4, "")]]):
        ids = [translator.tgt_vocab.stoi.get(t, UNK_ID) for t in tokens]
        [[out]] = copy_unknown(translator, [sentence], [[Translation(
            translator.tokenizers[1].detokenize(tokens), tokens, 0.0, ids)]])
        assert out.text == text and out.ids == ids and out.kept == kept
        assert out.tokens == [*(t.replace(UNK, "Tübingen") for t in tokens[:-1]),
                              tokens[-1]]  # (the last: the one written as nothing)
    sentence = "Herr Quastenflosser aus Tübingen spielt."  # two, side by side: each its own
    src, words = translator.encode([sentence])[0], next(iter(
        translator.tokenizers[0].tokenize([sentence])))
    ids = [translator.tgt_vocab.stoi["A"], UNK_ID, UNK_ID, translator.tgt_vocab.stoi["."]]
    copies = copied_from(translator.cross_attention(src, ids), ids, src, words)
    [[out]] = copy_unknown(translator, [sentence], [[Translation(
        "A <unk> <unk>.", translator.tgt_vocab.decode(ids), 0.0, ids)]])
    assert out.text == translator.tokenizers[1].detokenize(
        ["A", *dict.fromkeys(words[j] for j in copies), "."])


def test_an_unk_that_copies_a_kept_spans_word_is_written_as_nothing(translator):
    """A number kept (a span the search wrote whole, ``terms``) is the translation's only one:
    an ``<unk>`` elsewhere that copies one of its words is written as nothing (the demo model:
    "... the 12,50 at the 12,50 12,50 €."); told of no terms, it copies the word."""
    sentence = "Ein Mann läuft 12,50 € ."
    words = list(next(iter(translator.tokenizers[0].tokenize([sentence]))))
    src = translator.encode([sentence])[0]
    assert [w for w, i in zip(words, src, strict=False) if i == UNK_ID] == ["12,50", "€"]
    ids = [translator.tgt_vocab.stoi["A"], UNK_ID, translator.tgt_vocab.stoi["."], UNK_ID,
           UNK_ID]
    tokens = translator.tgt_vocab.decode(ids)
    kept = [(3, 5, "12,50 €")]  # (the span, written by the search)
    given = Translation(translator.tokenizers[1].detokenize_keeping(tokens, kept), tokens, 0.0,
                        ids, kept=kept)
    [[once]] = copy_unknown(translator, [sentence], [[given]], terms=True)
    [[twice]] = copy_unknown(translator, [sentence], [[given]])
    assert once.text == "A. 12,50 €" and once.kept == [*kept, (1, 2, "")]
    assert twice.text.count("12,50") + twice.text.count("€") == 3
    # spaCy reads German's ordinal "3." as one word; the span kept is "3" ("am 3. Mai"); a
    # number written as English writes it ("1 250 000", three words, as "1,250,000"; "12,50"
    # as "12.50", its currency's sign before it: "€12.50") is the source's
    words = ["Am", "3.", "Mai", "2021", "laufen", "20", "Menschen", "für", "1", "250", "000",
             "und", "12,50", "€", "."]
    assert _inside(words, {"3", "2021", "1,250,000", "12.50 €"}) == {1, 3, 8, 9, 10, 12, 13}
    assert _inside(words, {"€12.50"}) == {12, 13} and _inside(["Ein", "$", "5"], {"5 $"}) == {1, 2}


def test_a_quoted_name_the_model_cannot_read_is_copied_whole_and_no_quotes_round_nothing(
        translator):
    """An ``<unk>`` that copies a word inside quotation marks whose words the model all lacks
    writes the quoted text whole (a sign's words, a name: the demo model wrote 'says "Memoria"
    "" "' for „Memoria Justicia Sin Olvido“), a later one copying it again nothing, and the
    quotation marks round nothing are left out (and of a comma on both sides of such a copy,
    one); quotes that hold a word the model knows, or a glossary's term, are copied a word at
    a time."""
    sentence = "Ein Mann „Herr Quastenflosser“ ."
    words = list(next(iter(translator.tokenizers[0].tokenize([sentence]))))
    src = translator.encode([sentence])[0]
    assert [w for w, i in zip(words, src, strict=False) if i == UNK_ID and w.isalpha()] == [
        "Herr", "Quastenflosser"]
    dot = translator.tgt_vocab.stoi["."]
    tokens = ["A", '"', UNK, '"', UNK, '"', "."]  # (the model's loop: 'A "<unk>" <unk> ".')
    ids = [translator.tgt_vocab.stoi["A"], dot, UNK_ID, dot, UNK_ID, dot, dot]
    given = Translation(translator.tokenizers[1].detokenize(tokens), tokens, 0.0, ids)
    [[out]] = copy_unknown(translator, [sentence], [[given]])
    assert out.text == 'A "Herr Quastenflosser".', out
    assert out.tokens[:5] == ["A", '"', "Herr Quastenflosser", '"', UNK]
    # the quoted text is the source's words (what the logit lens and mt score ask)
    assert unwritable(translator, sentence, out.tokens, out.ids) == []
    assert unwritable(translator, sentence, ["Herr Fisch"], [UNK_ID]) == ["Herr Fisch"]
    assert unwritable(translator, "Er sagt „Herr Quastenflosser.“", ["Herr Quastenflosser."],
                      [UNK_ID]) == []  # (its words as the source tokenizer reads them)
    # the quoted text's tokens (start, end), for each unknown word in it
    assert _phrases(words, src, set()) == {3: (3, 5), 4: (3, 5)}
    known = ["Ein", "„", "Mann", "Quastenflosser", "“"]
    assert _phrases(known, translator.encode([" ".join(known)])[0], set()) == {}
    assert _phrases(words, src, {"Herr"}) == {}  # (a term: written apart)
    # a comma on both sides of a copy written as nothing: one ("E-Mail, max@x.de,, and")
    tokens = ["A", ",", UNK, ",", UNK, ",", "."]
    given = Translation(translator.tokenizers[1].detokenize(tokens), tokens, 0.0, ids)
    [[out]] = copy_unknown(translator, [sentence], [[given]])
    assert out.text.count(",") == 2 and ",," not in out.text.replace(" ", ""), out


def test_mt_translate_copies_unless_told_not_to(trained_run, tmp_path):
    """``--no-replace-unk`` leaves ``<unk>``; the copy is the default (word-level models)."""
    from transformer_mt.translate import Translator

    source = tmp_path / "in.de"
    source.write_text("\n".join(NAMES) + "\n")
    runs = {}
    original = Translator.load

    def load(*args, **kwargs):
        t = original(*args, **kwargs)
        t.engine.decode = with_unk(t.engine.decode)
        return t

    with pytest.MonkeyPatch.context() as m:
        m.setattr(Translator, "load", load)
        for flag in ("--replace-unk", "--no-replace-unk"):
            result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                              "--input", str(source), flag])
            assert result.returncode == 0, result.stderr
            runs[flag] = result.stdout.splitlines()
    assert all(UNK in line for line in runs["--no-replace-unk"])
    assert [line.replace(UNK, name) for line, name in zip(
        runs["--no-replace-unk"], ["Tübingen", "Wolfsburg"], strict=True)] == runs["--replace-unk"]


def test_the_servers_cache_gives_each_source_its_own_word(writes_unk):
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    with local_client(create_app(writes_unk, ServeOptions())) as client:
        texts = [client.post("/v1/translate", json={"text": name, "beam_size": 1})
                 .json()["translations"][0]["text"] for name in NAMES]  # the second: cached
        assert "Tübingen" in texts[0] and "Wolfsburg" in texts[1]
        assert texts[1] == texts[0].replace("Tübingen", "Wolfsburg")
        kept = client.post("/v1/translate", json={"text": NAMES[1], "beam_size": 1,
                                                  "replace_unk": False}).json()
        assert UNK in kept["translations"][0]["text"]
        hits = [line for line in client.get("/metrics").text.splitlines()
                if line.startswith("mt_cache_hits_total")]
        assert hits == ["mt_cache_hits_total 1.0"]


def test_the_logit_lens_reads_a_copied_word_as_the_unk_written_there(writes_unk):
    """The page looks deeper at the tokens its translation came back with: a copied word is
    the ``<unk>`` the model wrote there; a word neither known nor the source's is refused."""
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    with local_client(create_app(writes_unk, ServeOptions())) as client:
        [found] = client.post("/v1/translate", json={"text": NAMES[0], "beam_size": 1,
                                                     "attention": True}).json()["translations"]
        assert found["tokens"][1] == "Tübingen"
        lens = client.post("/v1/lens", json={"text": NAMES[0], "tokens": found["tokens"]})
        assert lens.status_code == 200, lens.text
        assert lens.json()["output"] == [*found["tokens"][:1], UNK, *found["tokens"][2:],
                                         "<eos>"]
        tokens = [found["tokens"][0], "Wolfsburg", *found["tokens"][2:]]
        refused = client.post("/v1/lens", json={"text": NAMES[0], "tokens": tokens})
        assert refused.status_code == 422 and "'Wolfsburg' is neither" in refused.text


def test_an_unknown_alternative_shows_the_word_it_is_written_as(translator, monkeypatch):
    """``--alternatives`` at the first position: an ``<unk>`` there is offered as its copy."""
    found = translator.engine.alternatives

    def first_unknown(*args, **kwargs):
        alternatives = found(*args, **kwargs)
        a = alternatives[0]
        alternatives[0] = dataclasses.replace(a, token=UNK_ID, completion=dataclasses.replace(
            a.completion, tokens=[UNK_ID, *a.completion.tokens[1:]]))
        return alternatives

    monkeypatch.setattr(translator.engine, "alternatives", first_unknown)
    [unknown, *others] = translator.alternatives(NAMES[0], k=3)
    words = next(iter(translator.tokenizers[0].tokenize(NAMES[:1])))
    src = translator.encode(NAMES[:1])[0]
    assert unknown.token in {w for w, i in zip(words, src, strict=False) if i == UNK_ID}
    assert unknown.translation.tokens[0] == unknown.token
    assert unknown.translation.text.startswith(unknown.token)
    assert all(UNK not in c.token for c in others)
    [kept, *_] = translator.alternatives(NAMES[0], k=3, replace_unk=False)
    assert kept.token == UNK and kept.translation.tokens[0] == UNK


def test_a_translations_tokens_copied_word_and_all_make_a_prefix(writes_unk):
    """The page's "what else could come here?": the tokens before a position make a prefix;
    the copied word, which the model cannot write, is forced as ``<unk>`` and written as it
    is (what follows is the model's, which went on from its own word here)."""
    [[found]] = writes_unk.translate(NAMES[:1], nbest=1, beam_size=1)
    assert found.tokens[1] == "Tübingen"
    [[again]] = writes_unk.translate(NAMES[:1], nbest=1, beam_size=1,
                                     prefix=[" ".join(found.tokens[:2]) + " "])
    assert again.ids[:2] == found.ids[:2] and again.tokens[:2] == found.tokens[:2]
    assert again.kept[0] == (1, 2, "Tübingen") and UNK not in again.text
    assert again.text.startswith(writes_unk.detokenize(found.tokens[:2]))


def test_validation_copies_as_mt_evaluate_does(writes_unk):
    """Training's validation decodes the cached ids and copies from the cached source tokens
    (``ParallelData.source_words``): the translations ``mt evaluate`` makes from the text."""
    from transformer_mt.data.prepare import prepare_data
    from transformer_mt.evaluate import decode_and_score

    t = writes_unk
    valid = prepare_data(t.config).valid
    n = min(len(valid), 12)
    texts = [t.tokenizers[0].detokenize(valid.source_words(k)) for k in range(n)]
    assert [valid.source_words(k) for k in range(n)] == list(t.tokenizers[0].tokenize(texts))
    refs = (valid.references or [])[:n]
    ids = [valid.source(k).tolist() for k in range(n)]
    by_text = decode_and_score(t, refs, sources=texts, beam_size=1)
    by_ids = decode_and_score(t, refs, ids=ids, beam_size=1,
                              words=[valid.source_words(k) for k in range(n)])
    assert by_ids.hypotheses == by_text.hypotheses
    assert not any(UNK in h for h in by_ids.hypotheses)
    assert all(UNK in h for h in decode_and_score(t, refs, ids=ids, beam_size=1).hypotheses)


def test_a_written_unk_is_read_back_as_the_unknown_word(writes_unk):
    """A ``<unk>`` in a text (``--no-replace-unk``'s output, an older corpus) is one word, the
    unknown one, on either side, not "<", "unk" and ">": the output can be scored."""
    t = writes_unk
    for tokenizer in t.tokenizers:
        assert next(iter(tokenizer.tokenize(["Ein <unk> (<unk>)."]))) == [
            "Ein", UNK, "(", UNK, ")", "."]
    [[h]] = t.translate(NAMES[:1], nbest=1, beam_size=1, replace_unk=False)
    assert h.tokens[1] == UNK and UNK in h.text
    [scored] = t.score(NAMES[:1], [h.text], strict=True, replace_unk=False)
    assert scored.tokens[:-1] == h.tokens  # and <eos>


def test_a_switch_and_mt_trace_copy_as_the_translation_does(trained_run, tmp_path):
    """``/v1/switch`` (the page's "switch parts off") and ``mt trace --switch`` decode with the
    reference search: a real model that writes ``<unk>`` shows the word copied there, as its
    translation does, with the ``<unk>``'s id kept for the switch's cost."""
    pytest.importorskip("fastapi")
    from tests.helpers import writing_unk
    from transformer_mt.inside.lens import decode_switched
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions
    from transformer_mt.translate import Translator

    path = writing_unk(trained_run[0] / "best.pt", NAMES[0], tmp_path / "unk.pt")
    t = Translator.load(path, "cpu")
    [[shown]] = t.translate(NAMES[:1], nbest=1, beam_size=1)
    assert UNK_ID in shown.ids and "Tübingen" in shown.tokens and UNK not in shown.text
    with local_client(create_app(t, ServeOptions())) as client:
        answer = client.post("/v1/switch", json={"text": NAMES[0],
                                                 "switches": ["cross:1:1=1"]}).json()
    for side in ("trained", "switched"):
        assert answer[side]["tokens"] == shown.tokens and answer[side]["text"] == shown.text
    plain, cost = decode_switched(t, NAMES[0])
    assert plain.ids == shown.ids and cost == pytest.approx(answer["trained_scored"])
    t.config.decode.replace_unk = False
    assert UNK in decode_switched(t, NAMES[0])[0].tokens
    traced = run_cli(["trace", "--checkpoint", str(path), "--switch", "cross:1:1=0",
                      NAMES[0]])
    assert traced.returncode == 0, traced.stderr
    assert "as trained: " + repr(shown.text) in traced.stdout


def test_a_word_with_a_soft_hyphen_or_a_control_character_is_that_word(translator):
    """Text from a web page or a PDF: "Mäd\\u00adchen" (a soft hyphen) shows as "Mädchen" and
    is read as it, not as an unknown word written with its invisible character; the same for
    a zero-width space, a word joiner, a byte-order mark and a control character (a NUL, a
    terminal's escape); a vertical tab is a space."""
    plain = ["Ein Mädchen läuft in der Stadt.", "Ein Junge schwimmt am Strand."]
    hidden = ["Ein Mäd\u00adchen läuft in der Sta\u200bdt.",
              "Ein Jun\u2060ge schwimmt am \ufeffStrand."]
    controls = ["Ein Mädchen\x00 läuft in\x0bder Stadt\x07.",
                "Ein \x1b[1mJunge schwimmt am Strand."]
    plain_controls = [plain[0], "Ein [1mJunge schwimmt am Strand."]
    assert translator.encode(hidden) == translator.encode(plain)
    assert translator.encode(controls) == translator.encode(plain_controls)
    ours = translator.translate(hidden)
    assert ours == translator.translate(plain)
    assert translator.translate(controls) == translator.translate(plain_controls)
    assert not any(UNK in text or "\u00ad" in text for text in ours)


def test_a_glossarys_term_is_written_once_where_the_model_copies_it(translator):
    """With a glossary's terms read in the source (``glossary.steered``, ``terms=True``): an
    ``<unk>`` that would copy a term the translation already holds is written as nothing (the
    same without ``terms``: the word); a term met by one ``<unk>`` moves to the ``<unk>`` that
    copies it, where another does, the first then copying its own word; two terms met at each
    other's <unk> change places."""
    sentence = "Herr Quastenflosser aus Tübingen spielt."
    src = translator.encode([sentence])[0]
    words = list(next(iter(translator.tokenizers[0].tokenize([sentence]))))
    [[h]] = translator.translate([sentence], nbest=1, replace_unk=False)
    ids = [h.ids[0], UNK_ID, *h.ids[2:]]
    tokens = translator.tgt_vocab.decode(ids)
    [j] = copied_from(translator.cross_attention(src, ids), ids, src, words)
    kept = [(3, 4, words[j])]  # (a term the translation holds, written elsewhere)
    given = Translation(translator.tokenizers[1].detokenize_keeping(tokens, kept), tokens,
                        h.score, ids, kept=kept)
    [[once]] = copy_unknown(translator, [sentence], [[given]], terms=True)
    [[twice]] = copy_unknown(translator, [sentence], [[given]])
    assert twice.kept == [*kept, (1, 2, words[j])] and twice.text.count(words[j]) == 2
    assert once.kept == [*kept, (1, 2, "")] and once.text.count(words[j]) == 1
    assert once.tokens[1] == UNK and once.text == translator.tokenizers[1].detokenize(
        [tokens[0], *tokens[2:3], words[j], *tokens[4:]])
    assert _placed([(1, 2, "Y")], {1: "X", 5: "Y"}) == [(5, 6, "Y")]  # X: copied at 1
    assert _placed([(1, 2, "Y")], {1: "Y", 5: "Y"}) == [(1, 2, "Y")]  # where it is copied
    assert _placed([(1, 2, "B"), (6, 7, "A")], {1: "A", 6: "B"}) == [(1, 2, "A"), (6, 7, "B")]
    assert _placed([(1, 2, "B"), (6, 7, "A")], {1: "C", 6: "B"}) == [(1, 2, "A"), (6, 7, "B")]
    assert _placed([(1, 3, "Y Z")], {1: "X", 5: "Y Z"}) == [(1, 3, "Y Z")]  # (one <unk>s)
