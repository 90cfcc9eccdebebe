"""The private APIs of torch, uvicorn, FastAPI and ReportLab, each behind its module in
transformer_mt/internals/: on a version they were not tested on, the features that use them
are off, said once in a warning line, and the plain path runs: the same translations, never a
crash; pyproject.toml lets none newer than they were tested on be installed. And the compiled
graphs' cache key: what the graphs are made of, nothing else."""

from __future__ import annotations

import logging
import re

import pytest
import torch
from torch import nn

from tests.helpers import REPO, a_tested_version, run_cli
from tests.toy import make_model
from transformer_mt.decode import compiled
from transformer_mt.internals import (
    fastapi_private,
    reportlab_private,
    torch_private,
    uvicorn_private,
    versions,
)
from transformer_mt.precision import PackedLinear, for_decoding
from transformer_mt.translate import Translator

SENTENCES = ["Ein Hund läuft.", "Zwei Männer spielen im Schnee.", "Eine Frau liest."]


@pytest.fixture
def untested(monkeypatch):
    """Every adapter's tested versions made ones no installed package has."""
    monkeypatch.setattr(versions, "_warned", set())
    for module in (torch_private, uvicorn_private, fastapi_private, reportlab_private):
        monkeypatch.setattr(module, "TESTED", ("0.0",))


def test_an_untested_torch_decodes_the_plain_way_with_one_warning(trained_run, untested,
                                                                  caplog, monkeypatch):
    best = trained_run[0] / "best.pt"
    with caplog.at_level(logging.WARNING, logger="transformer_mt"):
        fallback = Translator.load(best, compile=True)  # --compile asked for: off, not a crash
        first = fallback.translate(SENTENCES, precision="fp32")
        again = fallback.translate(SENTENCES[:1], precision="fp32")
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([m for m in said if "--compile" in m]) == 1, said
    assert len([m for m in said if "the packed CPU layouts" in m]) == 1, said
    assert all("is not a version" in m and "tested on (0.0)" in m for m in said)
    assert not fallback.engine.compile
    copy = for_decoding(make_model(), "fp32", torch.device("cpu"))
    assert not any(isinstance(m, PackedLinear) for m in copy.modules())  # plain nn.Linear
    assert any(isinstance(m, nn.Linear) for m in copy.modules())
    monkeypatch.setattr(torch_private, "TESTED", ("0.0", torch.__version__[:4]))
    tested = Translator.load(best)  # the packed layouts, as on a tested torch
    assert tested.translate(SENTENCES, precision="fp32") == first
    assert again == first[:1]


def test_bf16_decodes_where_onednn_cannot_pack_bf16(trained_run):
    """bf16's weights are packed for oneDNN only where oneDNN computes in bf16: capped at AVX2
    (``ONEDNN_MAX_CPU_ISA``, as on an AVX2 CPU) a bf16 decoding keeps ``nn.Linear`` layers
    and translates, in a fresh process (oneDNN reads the cap once), as it does uncapped."""
    best = str(trained_run[0] / "best.pt")
    args = ["translate", "--checkpoint", best, "--precision", "bf16", *SENTENCES]
    capped = run_cli(args, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}, fresh_process=True)
    assert capped.returncode == 0, capped.stderr
    assert capped.stdout == run_cli(args).stdout  # (uncapped: this process's oneDNN)
    assert capped.stdout.count("\n") == len(SENTENCES)


def test_an_untested_uvicorn_serves_without_the_header_deadline(untested, caplog):
    with caplog.at_level(logging.WARNING, logger="transformer_mt"):
        assert uvicorn_private.timed_protocol(5.0) == "h11"
    assert "--header-timeout" in caplog.text and "uvicorn" in caplog.text


@pytest.mark.skipif(not a_tested_version("uvicorn", uvicorn_private.TESTED),
                    reason="the installed uvicorn is not one the timed protocol was tested on")
def test_a_tested_uvicorn_gets_the_timed_protocol():
    protocol = uvicorn_private.timed_protocol(5.0)
    assert isinstance(protocol, type) and protocol.header_timeout_s == 5.0


@pytest.mark.parametrize("tested", [True, False])
def test_fastapi_s_endpoints_are_read_ahead_only_where_tested(monkeypatch, tested):
    from transformer_mt.serve.app import create_app

    if tested and not a_tested_version("fastapi", fastapi_private.TESTED):
        pytest.skip("the installed FastAPI is not one its endpoints' read-ahead was tested on")
    if not tested:
        monkeypatch.setattr(fastapi_private, "TESTED", ("0.0",))
    read = []
    monkeypatch.setattr("fastapi.routing._extract_endpoint_context", read.append, raising=tested)
    from fastapi import FastAPI

    app = FastAPI()
    app.get("/x")(lambda: {})
    fastapi_private.read_endpoints(app)
    assert bool(read) is tested
    assert callable(create_app)


@pytest.mark.parametrize("tested", [True, False])
def test_reportlab_lets_go_of_a_font_only_where_tested(monkeypatch, tested, caplog):
    """A font no document draws with any more (``translate/pdf_fonts.py``) leaves ReportLab's
    registry on a tested ReportLab; elsewhere it stays, said once."""
    pytest.importorskip("reportlab")
    from reportlab.pdfbase import pdfmetrics

    if tested and not a_tested_version("reportlab", reportlab_private.TESTED):
        pytest.skip("the installed ReportLab is not one its registry was tested on")
    if not tested:
        monkeypatch.setattr(versions, "_warned", set())
        monkeypatch.setattr(reportlab_private, "TESTED", ("0.0",))
    pdfmetrics.registerFont(pdfmetrics.Font("MT-let-go", "Helvetica", "WinAnsiEncoding"))
    with caplog.at_level(logging.WARNING, logger="transformer_mt"):
        reportlab_private.forget("MT-let-go")
        reportlab_private.forget("MT-let-go")
    assert ("MT-let-go" in pdfmetrics.getRegisteredFontNames()) is not tested
    assert caplog.text.count("they stay in memory") == (0 if tested else 1)
    monkeypatch.undo()
    reportlab_private.forget("MT-let-go")


@pytest.mark.parametrize("package, adapter", [("torch", torch_private),
                                              ("uvicorn", uvicorn_private),
                                              ("fastapi", fastapi_private),
                                              ("reportlab", reportlab_private)])
def test_pyproject_caps_each_package_just_above_its_newest_tested_version(package, adapter):
    """A release newer than the adapter's versions installs only once it is tested (and
    added): the cap in pyproject.toml is the next minor version after the newest of them."""
    cap = re.search(rf'"{package}>=[0-9.]+,<([0-9]+)\.([0-9]+)"',
                    (REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert cap is not None, f"{package} has no upper bound in pyproject.toml"
    major, minor = max(tuple(int(part) for part in v.split(".")) for v in adapter.TESTED)
    assert (int(cap[1]), int(cap[2])) == (major, minor + 1)


def test_the_compiled_key_is_the_graphs_sources_weights_and_machine():
    model = make_model()
    key = compiled.model_key(model, "fp32")
    sources = [str(p) for p in compiled.graph_sources()]
    assert any(s.endswith("model/attention.py") for s in sources)
    assert any(s.endswith("decode/incremental.py") for s in sources)
    assert not any("/serve/" in s or "/cli/" in s for s in sources)  # no recompiling
    with torch.no_grad():  # a checkpoint rewritten at the same path: other weights
        model.decoder.project.weight[0, 0] += 1e-3
    assert compiled.model_key(model, "fp32") != key
    assert compiled.model_key(model, "bf16") != compiled.model_key(model, "fp32")
