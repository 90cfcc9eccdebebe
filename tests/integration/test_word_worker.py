"""The word worker (``data/word_worker.py``): spaCy and sacremoses in a process of their own for
``mt translate``, giving the tokens and text the tokenizer gives in-process; where it fails or
is gone, the tokenizer does the work itself; the checkpoint's data settings read without torch
and without running anything a file holds."""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from types import SimpleNamespace

import pytest

from transformer_mt.checkpoint import load_checkpoint
from transformer_mt.data import word_worker, words
from transformer_mt.data.tokenize import WordTokenizer
from transformer_mt.data.word_worker import WordWorker, peek_data_config
from transformer_mt.errors import DataError

TEXTS = ["Ein Mann fährt Fahrrad.", "„Zwei Männer“ (z. B. in Köln) spielen Fußball!",
         "", "   ", "Eine Frau, 3,5 km/h, schreibt an info@example.de über https://x.de/a?b=1.",
         "Drei\tKinder  spielen\n im Schnee 🙂", "ÄRZTE untersuchen 2019er Proben – gut?",
         "2-3 Hunde - und ein Röntgen-Bild"]
OUTPUTS = [["A", "man", "'s", "bike", "(", "red", ")", "."], ["\"", "Hello", "\"", ",", "you", "!"],
           [], ["3.5", "km", "/", "h", "-", "fine", "?"], ["a", "t", "@-@", "shirt", "-", "x"]]


@pytest.fixture
def worker(monkeypatch):
    """A worker for German and English, the one WordTokenizer asks."""
    running = WordWorker(["de", "en"])
    monkeypatch.setattr(word_worker, "_worker", running)
    yield running
    running.close()


@pytest.mark.parametrize("lowercase, mark_hyphens", [(False, True), (True, False)])
def test_the_worker_gives_the_tokens_and_text_of_the_tokenizer(worker, monkeypatch, lowercase,
                                                               mark_hyphens):
    in_process = WordTokenizer("de", lowercase, mark_hyphens)
    monkeypatch.setattr(word_worker, "_worker", None)
    expected = list(in_process.tokenize(TEXTS))
    texts = [WordTokenizer("en").detokenize(tokens) for tokens in OUTPUTS]
    monkeypatch.setattr(word_worker, "_worker", worker)
    # and the worker, not this process, did the work
    monkeypatch.setattr(words, "spacy_words", lambda *args: 1 / 0)
    monkeypatch.setattr(words, "moses_detokenizer", lambda *args: 1 / 0)
    assert list(WordTokenizer("de", lowercase, mark_hyphens).tokenize(TEXTS)) == expected
    assert expected[-1][:3] == ["2", "@-@" if mark_hyphens else "-", "3"]
    assert [WordTokenizer("en").detokenize(tokens) for tokens in OUTPUTS] == texts
    assert expected[0][:2] == (["ein", "mann"] if lowercase else ["Ein", "Mann"])


def test_where_the_worker_fails_or_is_gone_the_tokenizer_does_the_work(worker, monkeypatch):
    """A language spaCy lacks: the worker answers with an error and the tokenizer's own
    one-line error is what the user sees; an answer that is not one a text is not used; a
    worker that died is not asked again."""
    with pytest.raises(DataError, match="spaCy cannot tokenize 'qq'"):
        list(WordTokenizer("qq").tokenize(["Hallo"]))
    with monkeypatch.context() as patch:
        patch.setattr(worker, "ask", lambda request: [["nur", "eins"]])  # not one a text
        assert list(WordTokenizer("de").tokenize(["Hallo Welt!", "Hund."])) == [
            ["Hallo", "Welt", "!"], ["Hund", "."]]
    worker.process.kill()
    worker.process.wait()
    assert word_worker.current() is worker
    assert worker.ask({"op": "words", "lang": "de", "texts": ["Hallo Welt"]}) is None
    assert list(WordTokenizer("de").tokenize(["Hallo Welt!"])) == [["Hallo", "Welt", "!"]]


def test_the_data_settings_are_read_without_torch_or_running_anything(trained_run, tmp_path):
    checkpoint = trained_run[0] / "best.pt"
    assert peek_data_config(checkpoint) == load_checkpoint(checkpoint)["config"]["data"]
    marker = tmp_path / "ran"

    class Payload:  # a pickle that would run a command where its classes are built
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    forged = tmp_path / "forged.pt"
    with zipfile.ZipFile(forged, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(
            {"config": {"data": {"tokenizer": "spacy"}}, "x": Payload()}))
    assert peek_data_config(forged) is None and not marker.exists()
    (tmp_path / "text.pt").write_text("not a checkpoint")
    for path in (tmp_path / "text.pt", tmp_path / "missing.pt", tmp_path):
        assert peek_data_config(path) is None


def test_only_a_word_model_starts_a_worker(trained_run, tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(word_worker, "WordWorker",
                        lambda langs: started.append(langs) or SimpleNamespace(close=None))
    monkeypatch.setattr(word_worker, "_worker", None)
    monkeypatch.setattr(word_worker.atexit, "register", lambda *args: None)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    word_worker.start_for(trained_run[0] / "best.pt")
    assert not started  # no core to spare
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    subword = tmp_path / "sp.pt"
    with zipfile.ZipFile(subword, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(
            {"config": {"data": {"tokenizer": "sentencepiece", "src_lang": "de",
                                 "tgt_lang": "en"}}}))
    word_worker.start_for(subword)
    assert not started
    word_worker.start_for(trained_run[0] / "best.pt")
    assert started == [["de", "en"]]


def test_the_worker_answers_until_its_input_closes():
    """serve() in this process, on lines: an answer a request, an error for a bad one."""
    out = io.StringIO()
    requests = ('{"op": "words", "lang": "de", "texts": ["Ein Hund."]}\n'
                'not json\n'
                '{"op": "text", "lang": "en", "tokens": ["A", "dog", "."]}\n')
    word_worker.serve(["de", "en"], io.StringIO(requests), out)
    answers = out.getvalue().splitlines()
    assert answers[0] == '{"result": [["Ein", "Hund", "."]]}'
    assert answers[1].startswith('{"error": "JSONDecodeError')
    assert answers[2] == '{"result": "A dog."}'
