"""mt serve's refusals (#23): bad requests get a 4xx, one line saying why, and never hurt the
server (any body at all: the fuzz test); a key is asked for when set; ``mt serve``'s bad options
and a file that is not a checkpoint are one-line errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import assert_serving, local_client, run_cli

pytest.importorskip("fastapi")

from transformer_mt.serve.app import create_app
from transformer_mt.serve.settings import Limits, ServeOptions


@pytest.mark.parametrize("body, status, message", [
    (b"{bad json", 400, "not JSON"),
    (b'{"text": ["\\ud800"]}', 422, "lone surrogate"),
    (json.dumps([1, 2]), 422, "the body must be a JSON object holding 'text'"),
    (json.dumps({"text": 5}), 422, "a text or a list of texts"),
    (json.dumps({"text": ["a", 3]}), 422, "a text or a list of texts"),
    (json.dumps({"sentences": ["a"]}), 422, "missing text"),
    (json.dumps({"texts": ["a"]}), 422, "missing text parameter (the body has 'texts': did "
     "you mean 'text'?)"),
    (json.dumps({"q": "a", "source": "de", "target": "en"}), 422, "missing text parameter "
     "('q' is the field of LibreTranslate's POST /translate; this route takes 'text')"),
    (json.dumps({"text": ["a"], "checkpoint": "/etc/passwd"}), 422, "'checkpoint'"),
    (json.dumps({"text": []}), 422, "no text"),
    (json.dumps({"text": ["Ein Hund."] * 9}), 400, "at most 8"),
    (json.dumps({"text": "Ein Hund. " * 9}), 400, "at most 8"),
    (json.dumps({"text": ["a" * 101]}), 422, "at most 100"),
    (json.dumps({"text": ["a"], "beam": "5"}), 422, "'beam'"),
    (json.dumps({"text": ["a"], "beam": 0}), 422, "'decode.beam_size' must be in [1, 1000]"),
    (json.dumps({"text": ["a"], "beam_size": 0}), 422, "'decode.beam_size' must be in [1, 1000]"),
    (json.dumps({"text": ["a"], "beam": 2, "beam_size": 3}), 422, "name the same setting"),
    (json.dumps({"text": ["a"], "beam": 999}), 422, "too wide"),
    (json.dumps({"text": ["a"], "alpha": 1e9}), 422, "decode.alpha"),
    ('{"text": ["a"], "alpha": NaN}', 422, "finite"),
    (json.dumps({"text": ["a"], "temperature": 0.0, "sample_topk": 5}), 422, "temperature"),
    (json.dumps({"text": ["a"], "top_p": 0.0}), 422, "top_p"),
    (json.dumps({"text": ["a"], "top_p": 0.9, "beam_size": 4}), 422, "beam size 1"),
    (json.dumps({"text": ["a"], "topk": 500}), 422, "topk"),
    (b"{\"text\": [\"" + b"x" * 3000 + b"\"]}", 413, "at most 2,000"),
])
def test_bad_requests_get_a_4xx_and_the_server_keeps_serving(translator, body, status,
                                                              message):
    limits = Limits(max_body_bytes=2_000, max_sentences=8, max_chars=100, max_beam=20_000,
                    max_topk=20)
    with local_client(create_app(translator, ServeOptions(limits))) as client:
        answer = client.post("/v1/translate", content=body,
                             headers={"Content-Type": "application/json"})
        assert answer.status_code == status, answer.text
        error = answer.json()["error"]
        assert message in error and "\n" not in error and "Traceback" not in error
        assert_serving(client)


@pytest.mark.parametrize("path", ["/v1/translate", "/translate"])
def test_a_body_nested_past_what_json_parses_is_a_400(translator, path):
    """JSON nested deeper than Python's parser goes (up to 3.12 its recursion limit, ~1,000
    levels; from 3.13 the C stack's, thousands) is a 400 on both APIs, not a 500, and the
    server keeps serving."""
    depth = 200_000  # past every version's limit (400 KB, within the body's 1 MB)
    with local_client(create_app(translator, ServeOptions())) as client:
        answer = client.post(path, content=b"[" * depth + b"]" * depth,
                             headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, answer.text
        assert answer.json() == {"error": "the body could not be parsed as JSON (too deeply "
                                          "nested, or not JSON)"}
        assert_serving(client)


@pytest.mark.parametrize("path, status, fields", [
    ("/v1/translate", 422, "'text'"), ("/v1/score", 422, "'source', 'translation'"),
    ("/translate", 400, "'q', 'target'"), ("/detect", 400, "'q'")])
def test_a_body_that_is_no_object_is_told_the_fields_of_its_route(translator, path, status,
                                                                  fields):
    """A JSON body that is not an object (a list, a string) is told what its route's body
    holds: LibreTranslate's routes name 'q', not our API's 'text'."""
    with local_client(create_app(translator, ServeOptions())) as client:
        for body in ([1, 2], "Ein Hund."):
            answer = client.post(path, json=body)
            assert answer.status_code == status, answer.text
            assert answer.json() == {"error": f"the body must be a JSON object holding {fields}"}
        assert_serving(client)


def test_an_api_key_is_required_when_set(translator):
    options = ServeOptions(api_keys=("s3cret", "other"))
    with local_client(create_app(translator, options)) as client:
        body = {"text": ["Ein Hund."]}
        assert client.post("/v1/translate", json=body).status_code == 401
        assert client.post("/v1/translate", json=body,
                           headers={"Authorization": "Bearer wrong"}).status_code == 401
        for headers in ({"Authorization": "Bearer s3cret"}, {"X-API-Key": "other"}):
            assert client.post("/v1/translate", json=body, headers=headers).status_code == 200
        libre = {"q": "Ein Hund.", "source": "de", "target": "en"}
        assert client.post("/translate", json=libre).status_code == 403  # LibreTranslate's
        assert client.post("/translate", json={**libre, "api_key": "s3cret"}).status_code == 200
        assert client.post("/translate", data={**libre, "api_key": "s3cret"}).status_code == 200
        assert client.post("/translate", params={**libre, "api_key": "x"}).status_code == 403
        assert client.get("/health").status_code == 200  # health, info, page: no key


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                           | st.text(max_size=30),
                           lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=10)


FIELDS = ["text", "beam", "nbest", "alpha", "max_len_a", "max_len_b", "sample_topk", "top_p",
          "temperature", "seed", "attention", "topk", "other"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=5)
       | JSON_VALUES | st.binary(max_size=60))
def test_no_request_hurts_the_server(fuzz_client, body):
    """Any body (random JSON of the request's fields, any JSON, any bytes) gets an answer below
    500, as one line of JSON, and the server keeps serving."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = fuzz_client.post("/v1/translate", content=data,
                              headers={"Content-Type": "application/json"})
    assert answer.status_code < 500, (body, answer.text)
    if answer.status_code != 200:
        assert "\n" not in answer.json()["error"]


@pytest.fixture(scope="module")
def fuzz_client(translator):
    options = ServeOptions(Limits(max_sentences=4, max_chars=200, max_beam=4, timeout_s=30))
    with local_client(create_app(translator, options)) as c:
        yield c
        assert_serving(c)


@pytest.mark.parametrize("args, message", [
    (["--port", "0"], "--port must be a finite number at least 1"),
    (["--port", "70000"], "at most 65535"),
    (["--max-queue", "0"], "--max-queue must be a finite number at least 1"),
    (["--timeout", "0"], "--timeout must be a finite number more than 0"),
    (["--max-wait-ms", "nan"], "--max-wait-ms must be a finite number"),
    (["--max-wait-ms", "inf"], "--max-wait-ms must be a finite number"),
    (["--grace", "inf"], "--grace must be a finite number"),
    (["--header-timeout", "-1"], "--header-timeout must be"),
    (["--device", "tpu"], "device 'tpu' is not one"),
    (["--api-key-file", "LATIN1"], "is not UTF-8"),
    (["--api-key-file", "EMPTY"], "holds no key"),
    (["--api-key-file", "MISSING"], "not found"),
    (["--api-key-file", "UMLAUT"], "key 2 is not printable ASCII"),
    (["--precision", "fp64"], "invalid choice: 'fp64'"),
    (["--run-dir", "EMPTY_DIR"], "is not a run directory of mt train"),
    (["--run-dir", "MISSING"], "is not a run directory of mt train"),
    (["--compare", "MISSING"], "--compare '"),
    (["--suggestions", "EMPTY_DIR"], "cannot keep suggestions there"),
    (["--suggestions", "LATIN1"], "cannot keep suggestions there"),
    (["--glossary", "MISSING"], "cannot read the glossary"),
    (["--glossary", "LATIN1"], "cannot read the glossary"),
    (["--glossary", "UMLAUT"], "line 1: a glossary line is 'source term<TAB>target term"),
    (["--memory", "MISSING"], "cannot read the memory"),
    (["--memory", "LATIN1"], "cannot read the memory"),
    (["--memory", "EMPTY"], "holds no 'source<TAB>translation' line"),
    (["--beam-size", "0"], "--beam-size must be at least 1"),  # each request's default
    (["--no-repeat-ngram-size", "-1"], "decode.no_repeat_ngram_size' must be in [0, 1000]"),
    (["--glossary", "TERMS", "--sample-topk", "5"], "cannot be given together: drop --glos"),
])
def test_serve_refuses_bad_options_in_one_line(trained_run, tmp_path, args, message):
    (tmp_path / "EMPTY").write_text("\n# a comment\n")
    (tmp_path / "LATIN1").write_bytes("schlüssel".encode("latin-1"))
    (tmp_path / "UMLAUT").write_text("key\nschlüssel\n", encoding="utf-8")
    (tmp_path / "EMPTY_DIR").mkdir()
    (tmp_path / "TERMS").write_text("Hund\tdog\n", encoding="utf-8")
    args = [str(tmp_path / a) if a in ("EMPTY", "MISSING", "LATIN1", "UMLAUT", "EMPTY_DIR",
                                       "TERMS") else a for a in args]
    result = run_cli(["serve", "--checkpoint", str(trained_run[0] / "best.pt"), *args])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert message in result.stderr.strip().splitlines()[-1]


def test_serve_refuses_a_checkpoint_that_is_not_one(tmp_path):
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"not a checkpoint")
    result = run_cli(["serve", "--checkpoint", str(bad)])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert str(bad) in result.stderr.strip().splitlines()[-1]
