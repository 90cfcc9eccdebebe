"""``mt serve --glossary``'s file read again when it changes (serve/watched_file.py)."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tests.helpers import local_client
from transformer_mt.translate import Translator
from transformer_mt.translate.glossary import Glossary

SOURCES = ["Zwei Hunde schwimmen im Park.", "Ein Kind fährt Fahrrad."]


def _edit(path: Path, text: str | None, version: int) -> None:
    """The file written again (None: removed), its time set apart from the last version's
    (a filesystem's clock may not tick between two writes)."""
    if text is None:
        path.unlink()
        return
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(version * 10**9, version * 10**9))


def test_the_server_reads_its_glossary_again_when_the_file_changes(trained_run, tmp_path,
                                                                    caplog):
    """An edited termbase holds from the next request on, on every route, in /v1/info too;
    a sentence translated (and cached) while it held no term gets the term added for it; a
    file that no longer reads (a bad line, gone) leaves the terms read before in use, said
    in /v1/info and the log, every request answered; read again once it is fixed."""
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions
    from transformer_mt.serve.watched_file import WatchedFile

    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    path = tmp_path / "terms.tsv"
    _edit(path, "Hunde\thounds\n", 1)
    glossary, watched = WatchedFile.read("glossary", str(path), ("", ""))
    assert watched is not None and glossary.terms == {"Hunde": "hounds"}
    server = translator.with_settings(translator.config.decode, glossary)

    def expect(client, terms: dict[str, str], error: str | None = None) -> None:
        info = client.get("/v1/info").json()["glossary"]
        assert info == {"terms": len(terms), "keep_spans": True, **(
            {"error": info.get("error")} if error else {})}
        assert error is None or error in info["error"]
        r = client.post("/v1/translate", json={"text": SOURCES})
        assert r.status_code == 200, r.text
        assert [t["text"] for t in r.json()["translations"]] == [
            translator.translate([s], glossary=Glossary(terms))[0] for s in SOURCES]
        r = client.post("/translate", json={"q": SOURCES[1], "source": "de", "target": "en"})
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == translator.translate(
            [SOURCES[1]], glossary=Glossary(terms))[0]

    new = {"Hunde": "canines", "fährt Fahrrad": "cycles"}
    with local_client(create_app(server, ServeOptions(glossary_file=watched))) as client:
        expect(client, {"Hunde": "hounds"})  # the second sentence held no term: cached
        _edit(path, "Hunde\tcanines\nfährt Fahrrad\tcycles\n", 2)
        expect(client, new)  # (the second one no longer from the cache)
        assert "cycles" in translator.translate([SOURCES[1]], glossary=Glossary(new))[0]
        with caplog.at_level(logging.ERROR, "transformer_mt.serve.watched_file"):
            _edit(path, "Hunde\tcanines\nKatze\n", 3)
            expect(client, new, "line 2: a glossary line is 'source term<TAB>target term")
            assert "the 2 terms read before stay in use" in caplog.text
        _edit(path, None, 4)
        expect(client, new, "cannot read the glossary")
        _edit(path, "Kind\tchild\n", 5)
        expect(client, {"Kind": "child"})
