"""Corrections that come back (#58): LibreTranslate's ``POST /suggest`` keeps a user's corrected
translation in SQLite (``mt serve --suggestions FILE``), in LibreTranslate's own table; the
store reads as a training corpus, and a model fine-tuned on it translates the sentence as the
user corrected it."""

from __future__ import annotations

import sqlite3

import pytest

from tests.helpers import local_client, run_cli, tiny_train_args
from transformer_mt.config.data import CorpusConfig
from transformer_mt.data.corpus import Corpus
from transformer_mt.errors import DataError

SOURCE, CORRECTED = "Ein alter Mann läuft.", "An old man swims in the park."


def test_the_store_reads_as_a_corpus_and_libretranslate_s_too(tmp_path):
    from transformer_mt.data.suggestions import SuggestionStore

    ours = SuggestionStore(tmp_path / "ours.db")
    ours.add("Ein Hund.", "A dog.", "de", "en")
    ours.add("A dog.", "Ein Hund.", "en", "de")  # another direction: not this corpus's
    ours.add("Zwei  Hunde\nspielen.", "Two dogs\tplay.", "de", "en")  # one line a side
    ours.close()
    corpus = Corpus.from_config(CorpusConfig(suggestions=str(tmp_path / "ours.db")),
                                "data.train[0]", "de", "en")
    assert list(corpus.lines("src")) == ["Ein Hund.", "Zwei Hunde spielen."]
    assert list(corpus.lines("tgt")) == ["A dog.", "Two dogs play."]
    before = corpus.fingerprint("tgt")
    store = SuggestionStore(tmp_path / "ours.db")
    store.add("Ein Mann.", "A man.", "de", "en")  # the server adds one: not read as stale
    assert corpus.fingerprint("tgt") != before and len(list(corpus.lines("tgt"))) == 3
    # a store LibreTranslate made (its suggestions.py's table)
    with sqlite3.connect(tmp_path / "lt.db") as db:
        db.execute('CREATE TABLE IF NOT EXISTS suggestions ("q" TEXT NOT NULL, "s" TEXT NOT '
                   'NULL, "source" TEXT NOT NULL, "target" TEXT NOT NULL);')
        db.execute("INSERT INTO suggestions VALUES ('Hallo Welt!', 'Hello world!', 'de', 'en')")
    lt = Corpus.from_config(CorpusConfig(suggestions=str(tmp_path / "lt.db")), "k", "de", "en")
    assert list(lt.lines("tgt")) == ["Hello world!"]


@pytest.mark.parametrize(("make", "says"), [
    (lambda p: p.write_text("not a database, a text file\n" * 20), "is not a store of sugg"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE other (x TEXT)").connection.commit(),
     "no such table: suggestions"),
    (lambda p: sqlite3.connect(p).execute(
        'CREATE TABLE suggestions ("q" TEXT, "s" TEXT, "source" TEXT, "target" TEXT)'
    ).connection.commit(), "holds no suggestion from de to en yet"),
])
def test_a_file_that_is_no_store_is_refused_in_one_line(tmp_path, make, says):
    make(tmp_path / "s.db")
    with pytest.raises(DataError, match=says) as caught:
        Corpus.from_config(CorpusConfig(suggestions=str(tmp_path / "s.db")), "k", "de", "en")
    assert "\n" not in str(caught.value)


@pytest.fixture
def serve_with_store(trained_run, tmp_path):
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions
    from transformer_mt.translate import Translator

    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    store = tmp_path / "suggestions.db"
    with local_client(create_app(translator, ServeOptions(suggestions=str(store)))) as client:
        yield client, store
    with local_client(create_app(translator, ServeOptions())) as off:
        answer = off.post("/suggest", data={"q": SOURCE, "s": CORRECTED, "source": "de",
                                            "target": "en"})
        assert answer.status_code == 403 and "disabled" in answer.json()["error"]
        assert off.get("/frontend/settings").json()["suggestions"] is False


def test_suggest_as_libretranslate_s_clients_send_it(serve_with_store):
    client, store = serve_with_store
    assert client.get("/frontend/settings").json()["suggestions"] is True
    # a form, as LibreTranslate's page posts it, and JSON
    form = client.post("/suggest", data={"q": SOURCE, "s": CORRECTED, "source": "de",
                                         "target": "en"})
    assert form.status_code == 200 and form.json() == {"success": True}
    answer = client.post("/suggest", json={"q": "Zwei Hunde.", "s": "Two dogs.",
                                           "source": "auto", "target": "en"})
    assert answer.json() == {"success": True}
    for body, status, says in (
            ({"q": SOURCE, "source": "de", "target": "en"}, 400, "missing s parameter"),
            ({"q": SOURCE, "s": " ", "source": "de", "target": "en"}, 400, "missing s"),
            ({"q": SOURCE, "s": "x", "source": "fr", "target": "en"}, 400, "translates de into en"),
            ({"q": SOURCE, "s": "x" * 6000, "source": "de", "target": "en"}, 400, "characters")):
        answer = client.post("/suggest", json=body)
        assert answer.status_code == status and says in answer.json()["error"], answer.json()
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT q, s, source, target FROM suggestions").fetchall() == [
            (SOURCE, CORRECTED, "de", "en"), ("Zwei Hunde.", "Two dogs.", "de", "en")]


def test_a_model_fine_tuned_on_its_users_corrections_translates_as_they_said(
        serve_with_store, trained_run, tmp_path):
    client, store = serve_with_store
    before = client.post("/translate", json={"q": SOURCE, "source": "de", "target": "en"})
    assert before.json()["translatedText"] != CORRECTED
    client.post("/suggest", json={"q": SOURCE, "s": CORRECTED, "source": "de", "target": "en"})
    tuned = tmp_path / "tuned"
    result = run_cli(tiny_train_args(
        tuned, f"train.init_from={trained_run[0] / 'best.pt'}",
        f"data.train=[{{suggestions: {store}, weight: 50}}]", "train.max_steps=40",
        "train.max_epochs=40", "train.lr=0.01", "train.warmup_steps=1", "train.eval_every=40",
        "train.save_every=40"))
    assert result.returncode == 0, result.stderr
    assert "suggestions in" in result.stderr  # the corpus named in the log
    after = run_cli(["translate", "--checkpoint", str(tuned / "best.pt"), SOURCE])
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == CORRECTED
