"""Looking inside over HTTP (serve/inside.py): /v1/lens, /v1/switch, /v1/run and /v1/compare
answer what transformer_mt/inside/lens.py computes, and a request they cannot answer gets a 422 in
one line while the server keeps serving."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import local_client

pytest.importorskip("fastapi")

from transformer_mt.inside.lens import (
    Switch,
    across_training,
    decode_switched,
    logit_lens,
    side_by_side,
)
from transformer_mt.serve.app import create_app
from transformer_mt.serve.settings import ServeOptions
from transformer_mt.translate import Translator

SENTENCE = "Ein Hund läuft über die Wiese."


@pytest.fixture(scope="module")
def models(trained_run, subword_run):
    return Translator.load(trained_run[0] / "best.pt", "cpu"), \
        Translator.load(subword_run / "best.pt", "cpu")


@pytest.fixture(scope="module")
def client(models, trained_run):
    options = ServeOptions(run_dir=str(trained_run[0]),
                           about={"checkpoint": "tiny/best.pt", "compare": "subword/best.pt"})
    with local_client(create_app(models[0], options, models[1])) as c:
        yield c


def test_the_lens_is_the_libraries(client, models):
    served = models[0]
    shown = client.post("/v1/translate", json={"text": SENTENCE, "beam_size": 3}).json()
    tokens = shown["translations"][0]["tokens"]  # the page asks about what it shows
    answer = client.post("/v1/lens", json={"text": SENTENCE, "tokens": tokens, "k": 2}).json()
    ids = [served.tgt_vocab.stoi[t] for t in tokens]
    lens = logit_lens(served, served.encode([SENTENCE])[0], ids, k=2)
    assert answer["output"] == [*tokens, "<eos>"] == lens.output
    assert answer["layers"] == lens.layers == ["embedding", "layer 1"]
    assert [[[w for w, _ in cell] for cell in layer] for layer in answer["top"]] == \
        lens.top_tokens
    assert torch.allclose(torch.tensor(answer["written"]), lens.written, atol=1e-6)
    greedy = client.post("/v1/lens", json={"text": SENTENCE}).json()  # no tokens: greedy's
    assert greedy["output"][:-1] == decode_switched(served, SENTENCE)[0].tokens


def test_a_switch_is_the_libraries_and_leaves_the_model_as_trained(client, models):
    specs = ["cross:1:1", "decoder-ffn:1=0.5"]
    answer = client.post("/v1/switch", json={"text": SENTENCE, "switches": specs}).json()
    after, cost = decode_switched(models[0], SENTENCE, [Switch.parse(s) for s in specs])
    trained, _ = decode_switched(models[0], SENTENCE)
    assert answer["switched"]["tokens"] == after.tokens
    assert answer["switched"]["log_prob"] == pytest.approx(after.score, abs=1e-5)
    assert answer["trained"]["text"] == trained.text
    assert answer["trained_scored"] == pytest.approx(cost, abs=1e-5)
    again = client.post("/v1/translate", json={"text": SENTENCE, "beam_size": 1}).json()
    assert again["translations"][0]["text"] == trained.text  # the hooks are gone


def test_the_sentence_across_the_run_and_beside_a_second_model(client, models, trained_run):
    info = client.get("/v1/info").json()
    assert info["look"] == {"run": ["best.pt", "step_0000003.pt", "step_0000006.pt"],
                            "compare": True}
    answer = client.post("/v1/run", json={"text": SENTENCE}).json()["checkpoints"]
    expected = across_training(trained_run[0], SENTENCE, "cpu")
    assert [(c["name"], c["step"], c["text"]) for c in answer] == \
        [(s.name, s.step, s.text) for s in expected]
    for shown, snap in zip(answer, expected, strict=True):
        assert [tuple(x) for x in shown["links"]] == snap.links
        assert all(i < len(shown["source_words"]) and j < len(shown["output_words"])
                   for i, j in shown["links"])
    sides = client.post("/v1/compare", json={"text": SENTENCE}).json()["models"]
    expected_sides = side_by_side(list(models), SENTENCE)
    assert [s["name"] for s in sides] == ["tiny/best.pt", "subword/best.pt"]
    assert [(s["text"], s["links"]) for s in sides] == \
        [(s.text, s.links) for s in expected_sides]
    assert [s["of_other"] is None for s in sides] == [s.of_other is None for s in expected_sides]


@pytest.mark.parametrize(("path", "body", "says"), [
    ("/v1/lens", {"text": "Ein Hund. Zwei Katzen."}, "holds 2 sentences; send one"),
    ("/v1/lens", {"text": SENTENCE, "tokens": ["no-such-word"]}, "neither in the model's vocab"),
    ("/v1/lens", {"text": SENTENCE, "k": 0}, "'k'"),
    ("/v1/switch", {"text": SENTENCE, "switches": ["cross:9:1"]}, "names layer 9"),
    ("/v1/switch", {"text": SENTENCE, "switches": ["head:1"]}, "cannot read the switch"),
    ("/v1/switch", {"text": SENTENCE, "switches": []}, "'switches'"),
    ("/v1/run", {"text": ""}, "holds 0 sentences"),
    ("/v1/compare", {"text": SENTENCE, "extra": 1}, "unknown field"),
])
def test_what_cannot_be_answered_is_a_422_in_one_line(client, path, body, says):
    answer = client.post(path, json=body)
    assert answer.status_code == 422 and says in answer.json()["error"]
    assert "\n" not in answer.json()["error"]
    assert client.post("/v1/lens", json={"text": SENTENCE}).status_code == 200


def test_a_server_without_a_run_or_a_second_model_says_how_to_start_one(models):
    with local_client(create_app(models[0], ServeOptions())) as bare:
        assert bare.get("/v1/info").json()["look"] == {"run": [], "compare": False}
        for path, flag in (("/v1/run", "--run-dir"), ("/v1/compare", "--compare")):
            answer = bare.post(path, json={"text": SENTENCE})
            assert answer.status_code == 422 and flag in answer.json()["error"]


def test_what_reads_one_model_is_a_422_from_an_ensemble_that_translates(trained_run):
    """Served as an ensemble, the requests that read one model's insides (attention, the next
    tokens' candidates, the beam's steps, the lens, switches) get a 422 naming what they read;
    translations, a forced prefix's alternatives and alignments (the members' last layers'
    attention averaged) are the ensemble's."""
    best = trained_run[0] / "best.pt"
    ensemble = Translator.load([best, best], "cpu")
    with local_client(create_app(ensemble, ServeOptions())) as client:
        for path, extra, what in (
                ("/v1/translate", {"attention": True}, "attention weights"),
                ("/v1/translate", {"topk": 2}, "attention weights"),
                ("/v1/translate", {"beam_steps": True, "beam_size": 2}, "the beam's steps"),
                ("/v1/lens", {}, "the logit lens"),
                ("/v1/switch", {"switches": ["cross:1:1"]}, "switches")):
            answer = client.post(path, json={"text": SENTENCE, **extra})
            assert answer.status_code == 422, (path, extra)
            assert answer.json()["error"] == f"{what}: not for an ensemble (2 models); load " \
                "one checkpoint"
        plain = client.post("/v1/translate", json={"text": SENTENCE})
        assert plain.status_code == 200
        assert plain.json()["translations"][0]["text"] == ensemble.translate([SENTENCE])[0]
        aligned = client.post("/v1/translate", json={"text": SENTENCE, "align": True})
        one = Translator.load(best, "cpu")  # two copies of one model: its own alignment
        best_one = one.translate([SENTENCE], nbest=1)[0][0]
        assert aligned.status_code == 200 and aligned.json()["translations"][0][
            "alignment"] == [list(p) for p in one.align(SENTENCE, best_one)]
