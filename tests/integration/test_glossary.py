"""A glossary and spans kept as they are (#58): the required text is in every translation,
exactly, with a word model (where it may be unknown to the vocabulary) and a SentencePiece
model, greedy and beam, n-best, documents, the CLI and the server."""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path

import pytest

from tests.helpers import local_client, run_cli
from transformer_mt.data.vocab import UNK_ID
from transformer_mt.errors import MTError
from transformer_mt.translate import Translator
from transformer_mt.translate.glossary import LETTER, Glossary, steered

SOURCES = ["Zwei Hunde schwimmen im Park.", "Ein Kind fährt Fahrrad.", "Drei Kinder lachen."]
TERMS = {"Hunde": "hounds", "fährt Fahrrad": "cycles", "park": "Tiergarten"}
KEPT = ["Ein Mann schreibt an anna.berg@example.org, {name}.",
        "Zwei Hunde sehen https://example.org/a?b=1 und 42 Kinder um 10:30."]


@pytest.fixture(scope="module", params=["words", "sentencepiece"])
def translator(request, trained_run, subword_run) -> Translator:
    run = trained_run[0] if request.param == "words" else subword_run
    return Translator.load(run / "best.pt", "cpu")


def test_terms_are_found_as_whole_words_in_any_case_the_longest_first():
    g = Glossary({"Hund": "hound", "New York": "NYC", "York": "Y", "Park": "park"})
    assert g.required("Der HUND und der Hundefutter-Park.") == ["hound", "park"]
    assert g.required("in New York, York und new york") == ["NYC", "Y", "NYC"]
    assert g.required("nichts") == []


def test_many_terms_are_found_as_a_scan_of_each_term_finds_them():
    """The terms' pattern is a trie (one pattern for thousands of terms): what it finds is
    what trying each term at each place finds, the longest where several start there, in
    any case; here random glossaries of the toy corpus's words and word pairs, prefixes of
    them, upper-cased ones, and one of another script."""
    lines = (Path(__file__).parents[1] / "data" / "toy-de-en" / "train.de").read_text(
        encoding="utf-8").splitlines()
    words = sorted({w.strip(".,") for line in lines for w in line.split()})
    rng = random.Random(7)
    for _ in range(20):
        picked = [" ".join(rng.sample(words, rng.choice([1, 1, 2]))) for _ in range(60)]
        picked += [w[:len(w) // 2] for w in picked[:10]] + [w.upper() for w in picked[10:20]]
        terms = {t.strip(): f"T{n}" for n, t in enumerate(picked) if t.strip()} | {"狗": "hound"}
        glossary = Glossary(terms)
        for sentence in [*rng.sample(lines, 40), "Zwei 狗 und ein Hund."]:
            assert glossary.required(sentence) == _scanned(terms, sentence), sentence


def _scanned(terms: dict[str, str], sentence: str) -> list[str]:
    """Each place of ``sentence``, left to right, tried with every term (as a whole word, in
    any case), the longest kept, and the search going on after it."""
    folded = {t.casefold(): v for t, v in terms.items()}  # (a term given twice: its last)
    found, at = [], 0
    while at < len(sentence):
        here = [t for t in terms if re.match(rf"(?<!{LETTER}){re.escape(t)}(?!{LETTER})",
                                             sentence[at:], re.IGNORECASE)
                and (at == 0 or not re.match(LETTER, sentence[at - 1]))]
        if here:
            longest = max(here, key=len)
            found.append(folded[sentence[at:at + len(longest)].casefold()])
            at += len(longest)
        else:
            at += 1
    return found


def test_terms_are_found_in_the_text_as_the_tokenizers_read_it():
    """A term typed with a combining accent (NFD) or found with a soft hyphen or a zero-width
    space in it (text from a web page) is the term, as the tokenizers read it."""
    nfd = unicodedata.normalize("NFD", "Mädchen")
    g = Glossary({nfd: "lass", "Hund": "hound"}, keep_spans=True)
    assert g.required("Das Mädchen und der Hu\u00adnd auf www.hu\u200bnd.de") == [
        "lass", "hound", "www.hund.de"]
    assert g.required(unicodedata.normalize("NFD", "Ein Mädchen")) == ["lass"]


def test_kept_spans_are_urls_addresses_placeholders_and_numbers():
    g = Glossary(keep_spans=True)
    assert g.required("Mail a.b@c.de um 10:30 auf https://x.org/p?q=1. Danke!") == [
        "a.b@c.de", "10:30", "https://x.org/p?q=1"]
    assert g.required("%s hat %(n)d, {{x}}, {} und ${HOME}; 3,5 oder 1.000") == [
        "%s", "%(n)d", "{{x}}", "{}", "${HOME}", "3,5", "1.000"]
    assert Glossary({"www.x.de": "X"}, keep_spans=True).required("auf www.x.de") == ["X"]
    # quotation marks round a URL are not of it
    assert g.required("Siehe „www.x.de“, «https://x.org/a?b=1» und ‚x.de/a‘.") == [
        "www.x.de", "https://x.org/a?b=1"]


def test_chinese_and_japanese_words_run_together_and_are_found_all_the_same():
    g = Glossary({"狗": "hound", "Python": "蟒蛇"}, keep_spans=True)
    assert g.required("两只狗用Python在www.x.cn玩了3次。") == ["hound", "蟒蛇", "www.x.cn", "3"]
    assert g.required("请发邮件到anna@x.de，谢谢。") == ["anna@x.de"]
    assert g.required("见 https://zh.x.org/wiki/中国 和https://x.cn/a。") == [
        "https://zh.x.org/wiki/中国", "https://x.cn/a"]  # after a space: to the next
    assert g.required("Ein Hundefutter für 3er") == []  # Latin words end at letters, as ever
    assert Glossary({"แมว": "cat"}).required("ฉันชอบแมวมาก") == ["cat"]  # Thai, alike


def test_a_term_the_target_vocabulary_lacks_is_read_in_the_source_as_itself(translator):
    """A word model can write a term its vocabulary lacks only as ``<unk>``, which it writes
    where the source has a word it does not know: that term's source is read as the term
    (``steered``), the sentence's other words, and every term of a SentencePiece model (which
    spells any word), as they are; the ids are the encoded sentences as read, those given
    kept where nothing changed."""
    sentences = [*SOURCES, "Ein Hund."]
    lacks = {t for t in TERMS.values()
             if UNK_ID in translator.tgt_vocab.encode(
                 list(next(iter(translator.tokenizers[1].tokenize([t])))), eos=False)}
    assert bool(lacks) is not translator.tokenizers[1].subword  # (words: "Tiergarten")
    read, ids, required = steered(translator, sentences, Glossary(TERMS))
    expected = [Glossary(TERMS).marked(s, lacks) for s in sentences]
    assert read == expected and ids == translator.encode(expected)
    assert ("Tiergarten" in read[0]) is ("Tiergarten" in lacks) and read[2:] == sentences[2:]
    assert [[r.text for r in req] for req in required] == [
        ["hounds", "Tiergarten"], ["cycles"], [], []]
    given = translator.encode(sentences)
    assert steered(translator, sentences, Glossary(TERMS), given) == (read, ids, required)
    assert Glossary(TERMS).marked("Zwei Hunde im PARK.", {"Tiergarten"}) == \
        "Zwei Hunde im Tiergarten."


@pytest.mark.parametrize("beam", [1, 4])
def test_every_translation_holds_its_terms(translator, beam):
    out = translator.translate(SOURCES, beam_size=beam, glossary=Glossary(TERMS))
    assert "hounds" in out[0] and "Tiergarten" in out[0]
    assert "cycles" in out[1]
    # a sentence without a term translates as it does without the glossary
    assert out[2] == translator.translate(SOURCES[2:], beam_size=beam)[0]


@pytest.mark.parametrize("beam", [1, 4])
def test_kept_spans_come_out_exactly(translator, beam):
    out = translator.translate(KEPT, beam_size=beam, glossary=Glossary(keep_spans=True))
    assert "anna.berg@example.org" in out[0] and "{name}" in out[0]
    for span in ("https://example.org/a?b=1", "42", "10:30"):  # (no digit glued on: a
        assert re.search(rf"(?<!\w){re.escape(span)}(?!\w)", out[1]), out[1]  # byte piece)


def test_sampling_with_a_glossary_is_refused_not_searched(translator, trained_run):
    """The constrained search is a beam search: sampling with a glossary or kept spans was
    searched instead, every seed the same translation. Refused, whether or not a sentence
    holds a term: in Python, by ``mt translate`` (one line, exit 2) and by the server (422,
    a request's own glossary or, for a sentence with a term, the server's); sampling alone
    and the glossary alone translate."""
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    message = "sampling (sample_topk, top_p) and a glossary (or kept spans) cannot be given"
    for glossary, sampled in ((Glossary(keep_spans=True), {"sample_topk": 5}),
                              (Glossary(TERMS), {"top_p": 0.9})):
        with pytest.raises(MTError, match=re.escape(message)):
            translator.translate(["Ein Kind fährt Fahrrad.", "Drei Kinder lachen."],
                                 glossary=glossary, **sampled)
    assert translator.translate(["Drei Kinder lachen.", KEPT[1]], sample_topk=5) and \
        translator.translate(["Drei Kinder lachen."], glossary=Glossary(TERMS))  # (spans:
    # kept by default where the search can, test_kept_spans.py)
    done = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                    "--keep-spans", "--sample-topk", "5", "Drei Kinder lachen."])
    assert done.returncode == 2 and done.stderr.strip().endswith(message + " together")
    assert "Traceback" not in done.stderr
    server = translator.with_settings(translator.config.decode, Glossary(TERMS))
    with local_client(create_app(server, ServeOptions())) as client:
        for body in ({"text": "Drei Kinder lachen.", "keep_spans": True, "sample_topk": 5},
                     {"text": SOURCES[0], "sample_topk": 5}):
            r = client.post("/v1/translate", json=body)
            assert r.status_code == 422 and message in r.text, r.text
        r = client.post("/v1/translate", json={"text": ["Drei Kinder lachen.", "42 Kinder."],
                                                "sample_topk": 5})
        assert r.status_code == 200, r.text


def test_each_of_the_n_best_holds_the_terms(translator):
    hyps = translator.translate(SOURCES[:2], nbest=3, beam_size=3,
                                      glossary=Glossary(TERMS))
    assert all(len(h) == 3 for h in hyps)
    assert all("hounds" in h.text and "Tiergarten" in h.text for h in hyps[0])
    assert all("cycles" in h.text for h in hyps[1])
    # an empty text before them: the same n-best, each in its place
    assert translator.translate(["", *SOURCES[:2]], nbest=3, beam_size=3,
                                glossary=Glossary(TERMS))[1:] == hyps


def test_words_to_avoid_are_spelled_as_the_model_could_write_them(translator):
    """A term's words to avoid reach the search as target ids (``Required.avoid``): each word
    as the tokenizer spells it, as given and with its first letter in the other case; with
    SentencePiece, in other segmentations too (each joins to one of those forms); none of
    ``<unk>``; none for a sentence without the term."""
    glossary = Glossary({"Hunde": "hounds"}, avoid={"Hunde": ["dogs", "little dog"]})
    _, _, required = steered(translator, ["Zwei Hunde im Park.", "Ein Kind."], glossary)
    (term,), none = required
    assert term.text == "hounds" and none == []
    forms = ["dogs", "Dogs", "little dog", "Little dog"]
    canonical = {tuple(translator.tgt_vocab.encode(p, eos=False))
                 for p in translator.tokenizers[1].tokenize(forms)}
    assert {c for c in canonical if UNK_ID not in c} <= set(term.avoid)
    assert all(UNK_ID not in a for a in term.avoid)
    if translator.tokenizers[1].subword:
        assert len(term.avoid) > len(canonical)
        assert {translator.detokenize(translator.tgt_vocab.decode(a))
                for a in term.avoid} == set(forms)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_term_avoids_the_words_given_with_it(trained_run, beam):
    """``avoid`` (negative constraints): where the source term is, the translation holds its
    term and none of the words given with it (either case of the first letter); here the
    words the glossary's translation held beside the term (a word model: its tokens are
    words; the tests' SentencePiece model writes hardly any)."""
    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    source = "Zwei Hunde schwimmen im Park."
    held = translator.translate([source], glossary=Glossary({"Hunde": "hounds"}), nbest=1,
                                beam_size=beam)[0][0]
    words = list(dict.fromkeys(w for w in held.tokens if w.isalpha() and w != "hounds"))[:3]
    assert words, held.text
    glossary = Glossary({"Hunde": "hounds"}, avoid={"Hunde": words})
    found = translator.translate([source, "Drei Kinder lachen."], glossary=glossary, nbest=2,
                                 beam_size=beam)
    for h in found[0]:
        assert "hounds" in h.text
        for w in words:
            for form in (w, w[:1].upper() + w[1:], w[:1].lower() + w[1:]):
                assert not re.search(rf"(?<!\w){re.escape(form)}(?!\w)", h.text), (h.text, w)
    # where the term is not, its words are not avoided
    assert found[1] == translator.translate(["Drei Kinder lachen."], nbest=2, beam_size=beam)[0]


def test_avoided_words_are_checked():
    with pytest.raises(MTError, match="not one of its source terms"):
        Glossary({"Hund": "hound"}, avoid={"Katze": ["cat"]})
    with pytest.raises(MTError, match="asks for 'hound' and avoids 'Hound'"):
        Glossary({"Hund": "hound"}, avoid={"hund": ["dog", "Hound"]})
    with pytest.raises(MTError, match="a list of words, none empty"):
        Glossary({"Hund": "hound"}, avoid={"Hund": "dog"})
    with pytest.raises(MTError, match="a list of words, none empty"):
        Glossary({"Hund": "hound"}, avoid={"Hund": ["dog", " "]})
    g = Glossary({"Hund": "hound", "Park": "park"}, keep_spans=True, avoid={"HUND": [" dog "]})
    assert g.required("Ein Hund im Park, 42.") == ["hound", "park", "42"]
    assert g.avoided("Ein Hund im Park, 42.") == [("dog",), (), ()]


def test_documents_hold_the_terms_and_keep_markup(translator):
    text = translator.translate(["Zwei Hunde schwimmen. Ein Kind lacht.\nDrei Hunde."],
                                form="text", glossary=Glossary({"Hunde": "hounds"}))[0]
    assert text.count("hounds") >= 2 and "\n" in text
    html = translator.translate(['<p>Zwei <b>Hunde</b> im Park. <span translate="no">'
                                 'Hunde</span></p>'], form="html",
                                glossary=Glossary({"Park": "Tiergarten"}))[0]
    assert "Tiergarten" in html and '<span translate="no">Hunde</span>' in html


def test_the_cli_reads_a_tsv_glossary(trained_run, tmp_path):
    tsv = tmp_path / "terms.tsv"
    tsv.write_text("\ufeffHunde\thounds\tdogs\t\n# source\ttarget\n\nPark\tTiergarten\n",
                   encoding="utf-8")  # as Windows' editors save it: a byte-order mark first
    assert Glossary.read(tsv).avoid == {"Hunde": ["dogs"]}  # (an empty field ignored)
    again = tmp_path / "again.tsv"  # a term given again: its last line, avoid and all
    again.write_text("Hund\thound\tdog\nHund\tcanine\nKatze\tcat\t\tkitty\n", encoding="utf-8")
    assert (Glossary.read(again).terms, Glossary.read(again).avoid) == (
        {"Hund": "canine", "Katze": "cat"}, {"Katze": ["kitty"]})
    result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                      "--glossary", str(tsv), "--keep-spans", "--beam", "3",
                      "Zwei Hunde schwimmen im Park.", "Ein Kind sieht 7 Hunde."])
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert "hounds" in first and "Tiergarten" in first
    assert "hounds" in second and "7" in second


@pytest.mark.parametrize(("content", "message"), [
    ("Hunde\n", "line 1: a glossary line is 'source term<TAB>target term"),
    ("Hunde\t \n", "its target term is empty"),
    ("Hunde\thounds\tdogs\tHounds\n", "asks for 'hounds' and avoids 'Hounds'"),
])
def test_a_bad_glossary_is_one_line(trained_run, tmp_path, content, message):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text(content, encoding="utf-8")
    result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                      "--glossary", str(tsv), "Zwei Hunde."])
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_server_takes_a_glossary_and_kept_spans(translator):
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    with local_client(create_app(translator, ServeOptions())) as client:
        r = client.post("/v1/translate", json={
            "text": ["Zwei Hunde schwimmen im Park. Drei Kinder lachen.", KEPT[1]],
            "glossary": {"Hunde": "hounds"}, "keep_spans": True, "beam_size": 3})
        assert r.status_code == 200, r.text
        first, second = (t["text"] for t in r.json()["translations"])
        assert "hounds" in first and "hounds" in second
        assert [first, second] == translator.translate(  # (a long sentence in parts there
            ["Zwei Hunde schwimmen im Park. Drei Kinder lachen.", KEPT[1]], form="text",
            glossary=Glossary({"Hunde": "hounds"}, keep_spans=True), beam_size=3)  # too)
        assert "https://example.org/a?b=1" in second and "10:30" in second
        for bad in ({"Hunde": ""}, {str(n): "x" for n in range(1001)}):
            r = client.post("/v1/translate", json={"text": "Zwei Hunde.", "glossary": bad})
            assert r.status_code == 422, r.text
        r = client.post("/v1/translate", json={"text": "Zwei Hunde.", "glossary": {"a": 1}})
        assert r.status_code == 422
        avoid = {"Hunde": ["dogs", "dog"]}
        r = client.post("/v1/translate", json={"text": [SOURCES[0]], "beam_size": 3,
                                               "glossary": {"Hunde": "hounds"}, "avoid": avoid})
        assert r.status_code == 200, r.text
        assert r.json()["translations"][0]["text"] == translator.translate(
            [SOURCES[0]], glossary=Glossary({"Hunde": "hounds"}, avoid=avoid), beam_size=3)[0]
        for bad in ({"avoid": avoid}, {"glossary": {"Hunde": "hounds"}, "avoid": {"Hunde": [""]}},
                    {"glossary": {"Hunde": "hounds"}, "avoid": {"Katze": ["cat"]}},
                    {"glossary": {"Hunde": "hounds"}, "avoid": {"Hunde": "dogs"}}):
            r = client.post("/v1/translate", json={"text": "Zwei Hunde.", **bad})
            assert r.status_code == 422, (bad, r.text)
        assert client.post("/v1/translate", json={"text": "Zwei Hunde."}).status_code == 200


def test_the_server_holds_its_glossary_on_every_route(translator):
    """``mt serve --glossary``: every route's translations hold its terms (and avoid its
    words): /v1/translate, LibreTranslate's /translate and /translate_file, as the API does
    with that glossary; a sentence without a term as without it (and cached); a request's own
    glossary goes over the server's, term by term; a prefix is decoded without it."""
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    terms = Glossary({"Hunde": "hounds", "Park": "Tiergarten"}, avoid={"Hunde": ["dogs"]})
    server = translator.with_settings(translator.config.decode, terms)
    texts = [SOURCES[0], SOURCES[2]]
    with local_client(create_app(server, ServeOptions())) as client:
        assert client.get("/v1/info").json()["glossary"] == {"terms": 2, "keep_spans": True}
        for _ in range(2):  # the second time from the cache, where it may be
            r = client.post("/v1/translate", json={"text": texts})
            assert r.status_code == 200, r.text
            assert [t["text"] for t in r.json()["translations"]] == [
                translator.translate([texts[0]], glossary=terms)[0],
                translator.translate([texts[1]])[0]]
        assert "hounds" in r.json()["translations"][0]["text"]
        r = client.post("/translate", json={"q": texts[0], "source": "de", "target": "en"})
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == translator.translate([texts[0]], glossary=terms)[0]
        r = client.post("/translate_file", data={"source": "de", "target": "en"},
                        files={"file": ("a.txt", f"{texts[0]}\n".encode(), "text/plain")})
        assert r.status_code == 200, r.text
        text = client.get(r.json()["translatedFileUrl"]).text
        assert "hounds" in text and "Tiergarten" in text
        r = client.post("/v1/translate", json={"text": texts[0], "glossary": {"hunde": "canines"}})
        assert r.status_code == 200, r.text
        assert r.json()["translations"][0]["text"] == translator.translate(
            [texts[0]], glossary=Glossary({"hunde": "canines", "Park": "Tiergarten"}))[0]
        r = client.post("/v1/translate", json={"text": texts[0], "prefix": "Two"})
        assert r.status_code == 200, r.text
        assert r.json()["translations"][0]["text"] == translator.translate(
            [texts[0]], nbest=1, prefix=["Two"])[0][0].text
