"""Real LibreTranslate clients from the registry against a real ``mt serve`` process (#30):
libretranslatepy (url-encoded forms) and deep-translator (the query string), curl-style JSON;
paragraphs come back whole, HTML keeps its markup, detect, languages and keys. The server is
started with decoding flags (``--beam-size 3 --no-repeat-ngram-size 2``): what its clients,
which name no decoding setting, are translated with."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import urllib.request

import pytest

from tests.helpers import REPO, start_server

pytest.importorskip("fastapi")
libretranslatepy = pytest.importorskip("libretranslatepy")
deep_translator = pytest.importorskip("deep_translator")

PARAGRAPH = "Ein Mann fährt Fahrrad. Zwei Hunde spielen im Schnee.\nEine Frau liest ein Buch."
SETTINGS = ("--beam-size", "3", "--no-repeat-ngram-size", "2")  # mt serve's decoding flags


@pytest.fixture(scope="module")
def server(trained_run, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text("# one a line\nk1\nk2\n")
    proc, url = start_server(trained_run[0] / "best.pt", "--api-key-file", str(keys),
                             *SETTINGS)
    yield url
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err


@pytest.fixture(scope="module")
def expected(trained_run):
    from transformer_mt.translate import Translator

    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    served = translator.with_settings(translator.settings(beam_size=3, no_repeat_ngram_size=2))
    assert served.translate([PARAGRAPH]) != translator.translate([PARAGRAPH])  # (they tell)
    return served


def test_libretranslatepy(server, expected):
    api = libretranslatepy.LibreTranslateAPI(server, api_key="k1")
    assert api.translate(PARAGRAPH, "de", "en") == expected.translate([PARAGRAPH], form="text")[0]
    assert api.translate(PARAGRAPH, "auto", "en") == expected.translate([PARAGRAPH], form="text")[0]
    detected = api.detect("Un chien court dans la neige.")
    assert detected[0]["language"] == "fr" and detected[0]["confidence"] > 50
    assert api.languages()[0] == {"code": "de", "name": "German", "targets": ["en"]}
    with pytest.raises(urllib.error.HTTPError) as refused:
        libretranslatepy.LibreTranslateAPI(server, api_key="wrong").translate("Hund", "de", "en")
    assert refused.value.code == 403
    english = "A dog runs through the snow with two children."  # already in the target
    assert api.translate(english, "auto", "en") == english
    with pytest.raises(urllib.error.HTTPError) as wrong_language:
        api.translate("Un chien court dans la neige.", "auto", "en")
    assert wrong_language.value.code == 400
    assert "translates de into en" in json.load(wrong_language.value)["error"]


def test_deep_translator(server, expected):
    from deep_translator import LibreTranslator
    from deep_translator.exceptions import AuthorizationException

    client = LibreTranslator(source="de", target="en", api_key="k2", custom_url=server + "/")
    assert client.translate(PARAGRAPH) == expected.translate([PARAGRAPH], form="text")[0]
    assert client.translate_batch(["Ein Hund.", "Zwei Katzen. Drei Mäuse."]) == \
        expected.translate(["Ein Hund.", "Zwei Katzen. Drei Mäuse."], form="text")
    with pytest.raises(AuthorizationException):
        LibreTranslator(source="de", target="en", api_key="bad",
                        custom_url=server + "/").translate("Ein Hund.")


def _post(url: str, body: dict, key: str | None = None) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {
        "Content-Type": "application/json", **({"X-API-Key": key} if key else {})})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


def test_json_lists_html_alternatives(server, expected):
    got = _post(server + "/translate", {"q": [PARAGRAPH, "", "Ein Hund."], "source": "auto",
                                        "target": "en", "api_key": "k1", "alternatives": 2})
    # alternatives: 2 searches with a beam of 3
    assert got["translatedText"] == expected.translate([PARAGRAPH, "", "Ein Hund."],
                                                       form="text", beam_size=3)
    assert [d["language"] for d in got["detectedLanguage"]] == ["de"] * 3
    nbest = expected.translate(["Ein Hund."], nbest=3, beam_size=3)[0]
    assert got["alternatives"][2] == [h.text for h in nbest[1:] if h.text != nbest[0].text][:2]
    html = '<p class="x">Ein Mann. <b>Zwei Hunde</b> spielen.</p><br><code>Hund.</code>'
    got = _post(server + "/translate", {"q": html, "source": "de", "target": "en",
                                        "format": "html", "api_key": "k1"})
    assert got["translatedText"] == expected.translate([html], form="html")[0]
    assert got["translatedText"].startswith('<p class="x">')
    assert got["translatedText"].endswith("</p><br/><code>Hund.</code>")
    with urllib.request.urlopen(server + "/frontend/settings", timeout=10) as answer:
        assert json.load(answer)["keyRequired"] is True
    with urllib.request.urlopen(server + "/spec", timeout=10) as answer:
        spec = json.load(answer)
    body = spec["paths"]["/translate"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["$ref"].endswith("LibreTranslateRequest")
    assert {} not in spec["paths"]["/translate"]["post"]["security"]  # a key is required


def test_markup_follows_attention_in_alternatives_and_glossaries(server, expected):
    """HTML's alternatives (LibreTranslate's ``alternatives``) and glossary translations
    (``/v1/translate``) share each sentence out among its pieces along the attention of the
    translation they hold, as the best one does (they were shared by relative position)."""
    from transformer_mt.translate.documents import split_html
    from transformer_mt.translate.glossary import Glossary
    from transformer_mt.translate.inline import attention_links

    html = ("<p>Ein Mann mit <b>rotem Hut</b> fährt <i>mit Hunden</i> im "
            "<a href='x'>Park</a>.</p>")
    got = _post(server + "/translate", {"q": html, "source": "de", "target": "en",
                                        "format": "html", "api_key": "k1", "alternatives": 2})
    doc = split_html(html, "de")
    assert all(expected.fits(doc.sentences))  # as long as the toy's sentences: read whole
    hyps = expected.translate(doc.sentences, nbest=3, beam_size=3)[0]
    texts = [doc.rebuild([h.text], [attention_links(expected, doc.sentences, [h.text])[0]])
             for h in hyps]
    assert got["translatedText"] == texts[0] == expected.translate([html], form="html",
                                                                   beam_size=3)[0]
    assert got["alternatives"] == [t for t in dict.fromkeys(texts) if t != texts[0]][:2]
    assert len(got["alternatives"]) == 2
    terms = {"Hut": "cap"}
    steered = _post(server + "/v1/translate", {"text": html, "format": "html",
                                               "glossary": terms}, key="k1")
    assert steered["translations"][0]["text"] == expected.translate(
        [html], form="html", glossary=Glossary(terms))[0]


def test_readme_curl_examples(server, expected):
    """README's curl lines as a user pastes them (a key added): the form's raw UTF-8 bytes
    ('fährt') are read as UTF-8, so the translation is the one of the text as typed."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [line for line in readme.splitlines() if line.startswith("curl -s localhost:5000")]
    assert len(lines) == 2
    answers = []
    for line in lines:
        args = shlex.split(line.replace("localhost:5000", server))
        ran = subprocess.run([*args, "-H", "X-API-Key: k1"], capture_output=True, text=True,
                             timeout=60, check=True)
        answers.append(json.loads(ran.stdout))
    assert answers[0]["translations"][0]["text"] == expected.translate(
        ["Ein Hund läuft."], beam_size=5)[0]
    text = "Ein Mann fährt Fahrrad. Zwei Hunde spielen."
    assert answers[1]["translatedText"] == expected.translate([text], form="text")[0]
    kept = subprocess.run(["curl", "-s", server + "/translate", "-d", "q=<code>fährt</code>",
                           "-d", "format=html", "-d", "source=de", "-d", "target=en", "-d",
                           "api_key=k1"], capture_output=True, timeout=60, check=True)
    assert json.loads(kept.stdout)["translatedText"] == "<code>fährt</code>"  # as sent
    latin1 = subprocess.run(["curl", "-s", server + "/translate", "--data-binary",
                             b"q=f\xe4hrt&source=de&target=en&api_key=k1", "-w", "%{http_code}"],
                            capture_output=True, timeout=60)
    assert latin1.stdout.endswith(b"400") and b"not UTF-8" in latin1.stdout


def test_a_file_with_curl_as_libretranslates_docs_show_it(server, expected, tmp_path):
    """``curl -F file=@...`` to /translate_file (the key in the form), then the URL it answers
    downloaded with curl: the subtitles translated (a sentence across two, shared out by the
    worker's attention), their timings kept, from a real server."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    from transformer_mt.translate.files import translate_file

    source = tmp_path / "film.srt"
    source.write_text("1\n00:00:01,000 --> 00:00:02,000\nEin Hund läuft\n\n"  # runs on
                      "2\n00:00:02,100 --> 00:00:03,000\nüber die Wiese.\n\n", encoding="utf-8")
    ran = subprocess.run(["curl", "-s", server + "/translate_file", "-F", f"file=@{source}",
                          "-F", "source=de", "-F", "target=en", "-F", "api_key=k1"],
                         capture_output=True, text=True, timeout=60, check=True)
    url = json.loads(ran.stdout)["translatedFileUrl"]
    target = tmp_path / "film.en.srt"
    subprocess.run(["curl", "-s", "-o", str(target), url], timeout=60, check=True)
    assert target.read_bytes() == translate_file(expected, "film.srt", source.read_bytes())
    assert b"00:00:01,000 --> 00:00:02,000" in target.read_bytes()
