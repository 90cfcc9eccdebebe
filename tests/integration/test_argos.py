"""mt export --format argos: the argos-translate LibreTranslate installs (argos-translate-lt)
installs the package from the file with its own Python API and, with no network, translates as
mt translate --engine ctranslate2 does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from tests.helpers import TOY_DE_EN, run_cli, tiny_train_args
from transformer_mt.checkpoint import load_checkpoint, save_checkpoint

pytest.importorskip("argostranslate")

SENTENCES = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:20]
ARGOS = """
import json, sys
import argostranslate.package, argostranslate.translate
argostranslate.package.install_from_path(sys.argv[1])
codes = sorted(l.code for l in argostranslate.translate.get_installed_languages())
out = [argostranslate.translate.translate(s, "de", "en") for s in json.loads(sys.argv[2])]
print(json.dumps({"languages": codes, "translations": out}))
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("argos")
    result = run_cli(tiny_train_args(
        tmp / "run", "data.tokenizer=sentencepiece", "data.vocab_size=400",
        "data.shared_vocab=true", "model.d_model=64", "model.n_encoder_layers=2",
        "model.n_decoder_layers=2", "train.max_steps=150", "train.warmup_steps=30",
        "train.max_tokens=1000", "train.eval_every=150", "train.save_every=150"))
    assert result.returncode == 0, result.stderr
    result = run_cli(["export", "--format", "argos", str(tmp / "run" / "best.pt"),
                      str(tmp / "de_en.argosmodel")])
    assert result.returncode == 0, result.stderr
    return tmp / "de_en.argosmodel", tmp


@pytest.mark.system  # a fresh process with argos-translate
def test_argos_translate_installs_the_package_and_translates_as_we_do(package):
    path, tmp = package
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        z.extractall(tmp / "unzipped")
    assert {"de_en/metadata.json", "de_en/sentencepiece.model", "de_en/model/model.bin",
            "de_en/spacy/meta.json"} <= names
    closed = "http://127.0.0.1:9"  # every connection refused: nothing may be downloaded
    env = dict(os.environ, HOME=str(tmp / "home"), ARGOS_CHUNK_TYPE="SPACY",
               ARGOS_BEAM_SIZE="1", ARGOS_COMPUTE_TYPE="float32",
               XDG_DATA_HOME=str(tmp / "home" / "data"), HTTP_PROXY=closed, HTTPS_PROXY=closed,
               http_proxy=closed, https_proxy=closed, NO_PROXY="", no_proxy="")
    result = subprocess.run([sys.executable, "-c", ARGOS, str(path), json.dumps(SENTENCES)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    argos = json.loads(result.stdout.strip().splitlines()[-1])
    assert argos["languages"] == ["de", "en"]
    ours = run_cli(["translate", "--engine", "ctranslate2", "--checkpoint",
                    str(tmp / "unzipped" / "de_en" / "model"), "--beam-size", "1", *SENTENCES])
    assert ours.returncode == 0, ours.stderr
    assert argos["translations"] == ours.stdout.splitlines()
    assert any(argos["translations"])


def test_what_argos_cannot_carry_is_refused(package, trained_run, tmp_path):
    path, tmp = package
    words = str(trained_run[0] / "best.pt")  # spaCy words: no SentencePiece model
    mine = tmp_path / "notes.argosmodel"  # a file of the user's, not a package
    mine.write_text("mine")
    for args, message in (
            ([words, str(tmp_path / "x.argosmodel")], "one SentencePiece model"),
            ([words, str(tmp_path / "x.zip")], "is a .argosmodel file"),
            ([words, str(path)], "exists; pass --overwrite"),
            ([words, str(mine), "--overwrite"], "is not an Argos package")):
        result = run_cli(["export", "--format", "argos", *args])
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert message in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x.argosmodel").exists() and not (tmp_path / "x.zip").exists()
    assert mine.read_text() == "mine"
    again = run_cli(["export", "--format", "argos", str(tmp / "run" / "best.pt"), str(path),
                     "--overwrite"])  # an earlier package is replaced when asked
    assert again.returncode == 0, again.stderr
    lowercased = load_checkpoint(tmp / "run" / "best.pt")
    lowercased["config"]["data"]["lowercase"] = True
    save_checkpoint(lowercased, tmp_path / "lower.pt")
    refused = run_cli(["export", "--format", "argos", str(tmp_path / "lower.pt"),
                       str(tmp_path / "lower.argosmodel")])
    assert refused.returncode == 2 and "lowercased" in refused.stderr
