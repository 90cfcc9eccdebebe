"""mt serve under requests that used to hurt it (#30): a full queue, a late or abandoned
request, seeds in a shared batch, sentences too long, inspection beyond its budget, hosts and
origins that are not its own, limits per key, the cache (test_serve_connections.py: idle, slow
and abandoned connections, a stop past the grace period, in real server processes)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import pytest
import torch

pytest.importorskip("fastapi")

from tests.helpers import local_client
from transformer_mt.serve.app import create_app
from transformer_mt.serve.batcher import Batcher
from transformer_mt.serve.settings import Limits, ServeOptions


class Gate:
    """Holds the decoding worker inside ``translate_ids`` until opened; counts what it got."""

    def __init__(self, translator, monkeypatch):
        self.open, self.inside, self.calls = threading.Event(), threading.Event(), []
        real = translator.translate_ids

        def held(ids, *args, **kwargs):
            self.calls.append(len(ids))
            self.inside.set()
            assert self.open.wait(60)
            return real(ids, *args, **kwargs)

        monkeypatch.setattr(translator, "translate_ids", held)


def _in_thread(fn):
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def test_a_late_request_is_504_and_never_decoded(translator, monkeypatch):
    gate = Gate(translator, monkeypatch)
    options = ServeOptions(Limits(timeout_s=1.0), cache_size=0)
    with local_client(create_app(translator, options)) as client:
        first, _ = _in_thread(lambda: client.post("/v1/translate", json={"text": "Ein Hund."}))
        assert gate.inside.wait(30)  # the worker holds the first request
        late = client.post("/v1/translate", json={"text": "Zwei Hunde."})  # queued, 1 s
        assert late.status_code == 504 and "within 1 s" in late.json()["error"]
        assert client.app.state.service.batcher.waiting() == 0  # it left the queue
        gate.open.set()
        first.join(30)
        assert client.post("/v1/translate", json={"text": "Drei Hunde."}).status_code == 200
    assert gate.calls == [1, 1]  # the first and the third: the late one was never decoded


def test_a_full_queue_is_429(translator, monkeypatch):
    gate = Gate(translator, monkeypatch)
    options = ServeOptions(max_queue=1, cache_size=0)
    with local_client(create_app(translator, options)) as client:
        first, answers = _in_thread(lambda: client.post("/v1/translate",
                                                        json={"text": "Ein Hund."}))
        assert gate.inside.wait(30)  # the worker holds the first request
        waiting, more = _in_thread(lambda: client.post(
            "/v1/translate", json={"text": "Drei Hunde."}))
        time.sleep(0.3)  # it is queued: the queue (of one) is full
        full = client.post("/v1/translate", json={"text": "Vier Hunde."})
        assert full.status_code == 429 and full.headers["Retry-After"] == "1"
        assert full.json()["error"].startswith("Slowdown")
        gate.open.set()
        first.join(30)
        waiting.join(30)
        assert answers[0].status_code == 200 and more[0].status_code == 200


def test_a_cancelled_request_stops_its_decoding_between_chunks(translator, monkeypatch):
    """A request of many sentences is decoded a chunk at a time; once it is cancelled (its
    time is up, or its client left) the chunks left are not decoded."""
    gate = Gate(translator, monkeypatch)
    cfg = translator.settings(batch_size=2)

    async def run():
        batcher = Batcher(translator)
        ids = translator.encode([f"Ein Hund {i}." for i in range(10)])
        task = asyncio.ensure_future(batcher.translate(ids, cfg))
        await asyncio.to_thread(gate.inside.wait, 30)
        task.cancel()
        await asyncio.sleep(0.05)
        gate.open.set()
        await batcher.close()

    asyncio.run(run())
    assert gate.calls == [2]  # 1 chunk of 5 decoded, the rest dropped


def test_a_cancelled_request_stops_its_chunk_between_decoding_steps(translator):
    """A chunk whose requests were all cancelled stops at the next decoding step (it kept
    the worker 25-70 s under a heavy request before); the hooks are gone after, and the next
    request translates as ever."""
    from transformer_mt.model.embedding import TokenEmbedding

    cfg = translator.settings(beam_size=1)
    loop_and_task: list = []
    embeddings: list[int] = []  # the encoder's once, then the decoder's once a step

    def count(module, args):
        if isinstance(module, TokenEmbedding):
            embeddings.append(1)
            if len(embeddings) == 4:  # the third step: the request is cancelled meanwhile
                loop, task = loop_and_task
                loop.call_soon_threadsafe(task.cancel)
                time.sleep(0.3)

    async def run():
        batcher = Batcher(translator)
        ids = translator.encode(["Ein Hund läuft über die grüne Wiese und bellt."])
        task = asyncio.ensure_future(batcher.translate(ids, cfg))
        loop_and_task.extend([asyncio.get_running_loop(), task])
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.05)
        after = await batcher.translate(translator.encode(["Zwei Hunde."]), cfg)
        await batcher.close()
        return after

    hook = torch.nn.modules.module.register_module_forward_pre_hook(count)
    try:
        after = asyncio.run(run())
    finally:
        hook.remove()
    assert len(embeddings) == 4 + 1 + len(after[0][0].ids) + 1  # stopped; then all of one
    assert after[0][0].text == translator.translate(["Zwei Hunde."], beam_size=1)[0]


def test_a_seeded_request_gets_the_same_translation_alone_or_among_others(translator):
    body = {"text": ["Ein Hund läuft über die Wiese.", "Zwei Männer."], "sample_topk": 20,
            "seed": 7}
    options = ServeOptions(max_wait_ms=300)
    with local_client(create_app(translator, options)) as client:
        alone = client.post("/v1/translate", json=body).json()
        crowd = [{**body, "text": [f"Ein Mann {i} liest."] * 3} for i in range(6)]
        threads = [_in_thread(lambda b=b: client.post("/v1/translate", json=b))
                   for b in [*crowd[:3], body, *crowd[3:]]]
        for thread, _ in threads:
            thread.join(60)
        together = threads[3][1][0].json()
    assert together == alone


def test_too_long_sentences_are_translated_in_parts_and_too_much_inspection_refused(
        translator):
    with local_client(create_app(translator, ServeOptions(
            Limits(max_inspect_values=20_000)))) as client:
        text = "Hund " * (translator.max_source_tokens + 5)
        long = client.post("/translate", json={"q": text, "source": "de", "target": "en"})
        assert long.status_code == 200, long.text  # the whole text, as mt translate gives it
        assert long.json()["translatedText"] == translator.translate([text], form="text")[0]
        many = client.post("/v1/translate", json={"text": ["Ein Hund läuft schnell."] * 100,
                                                  "attention": True, "topk": 5})
        assert many.status_code == 422 and "at most 20,000" in many.json()["error"]
        few = client.post("/v1/translate", json={"text": "Ein Hund.", "attention": True})
        assert few.status_code == 200


def test_hosts_origins_and_cors(translator):
    body = {"q": "Ein Hund.", "source": "de", "target": "en"}
    with local_client(create_app(translator, ServeOptions())) as client:
        # DNS rebinding: a page at evil.example resolved to 127.0.0.1
        assert client.post("/translate", json=body,
                           headers={"Host": "evil.example:8000"}).status_code == 400
        # a page elsewhere, sending to localhost (a form: no preflight)
        assert client.post("/translate", data=body,
                           headers={"Origin": "https://evil.example"}).status_code == 403
        assert client.post("/translate", json=body,
                           headers={"Origin": "http://localhost:8000"}).status_code == 200
    options = ServeOptions(cors_origins=("https://app.example",))
    with local_client(create_app(translator, options)) as client:
        preflight = client.options("/translate", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"})
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        answer = client.post("/translate", json=body, headers={"Origin": "https://app.example"})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "https://app.example"


def test_rate_and_character_limits_per_key(translator):
    options = ServeOptions(api_keys=("a", "b"), rate_limit=2, char_rate_limit=1000)
    with local_client(create_app(translator, options)) as client:
        def send(key, text="Ein Hund."):
            return client.post("/translate", json={"q": text, "source": "de", "target": "en",
                                                   "api_key": key}).status_code
        assert client.post("/translate", content=b'{"q": "Hund.", "source": "de", '
                           b'"target": "en", "api_key": "\\ud800"}',
                           headers={"Content-Type": "application/json"}).status_code == 403
        assert [send("a"), send("a"), send("a")] == [200, 200, 429]
        assert send("b") == 200  # another key, its own count
        assert send("b", "Hund. " * 200) == 429  # 1,200 characters in a minute


def test_any_host_allowed_still_refuses_pages_elsewhere(translator):
    """--allowed-host '*' answers any Host, but a page elsewhere is still refused (403) unless
    --cors-origin allows it; the server's own page (same host) is answered."""
    body = {"q": "Ein Hund.", "source": "de", "target": "en"}
    with local_client(create_app(translator, ServeOptions(allowed_hosts=("*",)))) as client:
        evil = client.post("/translate", data=body, headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403 and "--cors-origin" in evil.json()["error"]
        own = client.post("/translate", json=body, headers={
            "Origin": "http://mt.example:8000", "Host": "mt.example:8000"})
        assert own.status_code == 200


def test_made_up_keys_share_their_address_limit_where_keys_are_not_checked(translator):
    """No --api-key-file: a key is not checked, so it names no client; every request of an
    address counts against that address, whatever key it sends (/detect too)."""
    options = ServeOptions(rate_limit=3, char_rate_limit=60)
    with local_client(create_app(translator, options)) as client:
        codes = [client.post("/translate", json={"q": "Ein Hund.", "source": "de",
                                                 "target": "en", "api_key": f"made-up-{i}"},
                             headers={"X-API-Key": f"other-{i}"}).status_code
                 for i in range(3)]
        assert codes == [200, 200, 200]
        refused = client.post("/detect", json={"q": "Ein Hund.", "api_key": "made-up-9"})
        assert refused.status_code == 429 and "at most 3 requests" in refused.json()["error"]
    with local_client(create_app(translator, options)) as client:
        sent = [client.post("/v1/translate", json={"text": "Ein Hund rennt schnell."},
                            headers={"Authorization": f"Bearer made-up-{i}"}).status_code
                for i in range(3)]
        assert sent == [200, 200, 429]  # 23 + 23 + 23 characters > 60 a minute


def test_cache_answers_a_repeated_sentence_without_decoding(translator, monkeypatch):
    with local_client(create_app(translator, ServeOptions())) as client:
        first = client.post("/v1/translate", json={"text": "Ein Hund rennt."}).json()
        monkeypatch.setattr(translator, "translate_ids", lambda *a, **k: 1 / 0)
        again = client.post("/v1/translate", json={"text": "Ein Hund rennt."}).json()
        assert again == first
        metrics = client.get("/metrics").text
        assert "mt_cache_hits_total 1.0" in metrics


def test_splitting_a_large_request_does_not_stop_the_server(translator, monkeypatch):
    """A request whose texts take long to split (a large HTML page) is split off the event
    loop: /health and other requests are answered meanwhile."""
    from transformer_mt import translate  # (Translator.split's)

    split = translate.split_document

    def slow(text, *args):
        if "langsam" in text:
            time.sleep(2.0)
        return split(text, *args)

    monkeypatch.setattr(translate, "split_document", slow)
    with local_client(create_app(translator, ServeOptions())) as client:
        answers: list = []
        sender = threading.Thread(target=lambda: answers.append(client.post(
            "/translate", json={"q": "<p>Ein langsam Hund.</p>", "source": "de",
                                "target": "en", "format": "html"})))
        sender.start()
        time.sleep(0.3)  # the slow request is being split
        start = time.perf_counter()
        assert client.get("/health").status_code == 200
        assert time.perf_counter() - start < 1.0
        sender.join(30)
        assert answers and answers[0].status_code == 200


def test_the_cache_is_bounded_by_what_its_entries_hold(translator):
    """An entry weighs one unit per 64 output tokens of its n-best: a few requests of a wide
    n-best of long outputs cannot fill memory that --cache-size sentences of one-best would
    not."""
    from transformer_mt.serve.storage import cache_units

    app = create_app(translator, ServeOptions(cache_size=8))
    with local_client(app) as client:
        for i in range(6):
            sent = client.post("/v1/translate", json={
                "text": f"Ein Hund rennt {i} mal über die Wiese.", "beam": 8, "nbest": 8,
                "max_len_a": 0, "max_len_b": 40})
            assert sent.status_code == 200
        cache = app.state.service.storage._cache
        assert 0 < cache.currsize <= cache.maxsize == 8
        assert sum(cache_units(v) for v in cache.values()) == cache.currsize
        assert len(cache) < 6  # the early ones went: each weighed several units


@pytest.mark.parametrize("kwargs, status, message", [
    ({"content": b'{"q": "x", "source": "\\ud800", "target": "en"}'}, 400, "lone surrogate"),
    ({"content": b'{"q": "x", "source": "de", "target": "en", "api_key": "\\udfff"}'}, 400,
     "lone surrogate"),
    ({"content": b'{"q": "x", "source": "de", "target": "en", "alternatives": 99}'}, 400,
     "alternatives parameter must be <= 8"),
    ({"content": b'{"q": "x", "source": "de", "target": "en", "format": "pdf"}'}, 400,
     "'format'"),
    ({"content": b'{"q": "x", "source": "de", "target": "fr"}'}, 400, "translates de into en"),
    ({"content": b'{"q": "x", "source": "de", "target": " "}'}, 400,
     "Invalid request: missing target parameter"),
    ({"content": b'{"text": "x", "source": "de", "target": "en"}'}, 400, "missing q parameter "
     "('text' is the field of POST /v1/translate; this route takes 'q')"),
    ({"content": b"q=x&source=de&target=en", "headers": {"Content-Type": "text/csv"}}, 400,
     "is not one of them"),
])
def test_libretranslate_bad_requests_are_400_with_its_error_body(translator, kwargs, status,
                                                                 message):
    headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
    with local_client(create_app(translator, ServeOptions())) as client:
        answer = client.post("/translate", headers=headers, **kwargs)
        assert answer.status_code == status, answer.text
        assert message in answer.json()["error"] and "\n" not in answer.json()["error"]
        assert client.post("/v1/translate", content=b'{"text": "x"}',
                           headers={"Content-Type": "text/plain"}).status_code == 415
        # a POST where none is taken: what the route says, not a complaint about the body
        assert client.post("/v1/info").json()["error"] == "/v1/info does not take POST; see /docs"
        assert client.post("/v1/nowhere").status_code == 404
        assert client.get("/nowhere").json()["error"].startswith("there is no /nowhere")
        assert client.put("/translate").status_code == 405
        assert client.post("/translate_file").status_code == 400
        assert client.post("/translate_file", data={"file": "letter.txt"}).json() == {
            "error": "'file': send a file, as an upload (curl: -F 'file=@NAME')"}


