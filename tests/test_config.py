from __future__ import annotations

import os

import pytest

from tests.conftest import run_cli
from transformer_mt.config import Config, config_from_dict, load_config
from transformer_mt.errors import ConfigError


def test_shipped_configs_load():
    from tests.conftest import REPO

    for path in sorted((REPO / "config").glob("*.yaml")):
        cfg = load_config(path)
        assert isinstance(cfg, Config)


def test_defaults_and_overrides_with_types():
    cfg = config_from_dict({"model": {"d_model": 128}},
                           ["train.lr=0.002", "train.max_steps=10", "data.max_pairs=null",
                            "train.betas=[0.9, 0.99]"])
    assert cfg.model.d_model == 128
    assert cfg.train.lr == 0.002 and cfg.train.max_steps == 10
    assert cfg.train.betas == (0.9, 0.99)
    assert cfg.data.max_pairs is None
    assert isinstance(config_from_dict({"train": {"lr": 1}}).train.lr, float)  # int widens
    assert config_from_dict({}, ["train.lr=1e-3"]).train.lr == 0.001  # YAML 1.1 says str


@pytest.mark.parametrize("data, overrides, message", [
    ({"model": {"d_modle": 8}}, [], "unknown config key 'model.d_modle'; did you mean "
                                     "'model.d_model'?"),
    ({"modle": {}}, [], "did you mean 'model'"),
    ({}, ["model.d_model=abc"], "'model.d_model' must be of type int"),
    ({}, ["model.dropout=-0.1"], "'model.dropout' must be in [0, 1)"),
    ({}, ["model.n_heads=3"], "'model.n_heads' must divide model.d_model"),
    ({}, ["model.norm=middle"], "'model.norm' must be one of 'pre', 'post'"),
    ({}, ["train.max_tokens=0"], "'train.max_tokens' must be positive"),
    ({}, ["train.device=tpu"], "'train.device' must be auto, cpu, cuda or cuda:N"),
    ({}, ["model.d_model"], "must look like section.key=value"),
    ({}, ["train.use_amp=true"], "unknown config key 'train.use_amp'"),
    ({"model": 3}, [], "config section 'model' must be a mapping"),
    ({}, ["train.shuffle.x=1"], "unknown config key 'train.shuffle'"),
])
def test_config_errors_name_the_key(data, overrides, message):
    with pytest.raises(ConfigError) as err:
        config_from_dict(data, overrides)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_yaml_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  d_model: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(scalar)


@pytest.mark.parametrize("content, extra, expected", [
    ("model:\n  d_modle: 8\n", [], "did you mean 'model.d_model'"),
    ("model: {n_heads: 3}\n", [], "must divide"),
    ("model: [\n", [], "not valid YAML"),
    ("{}\n", ["--set", "model.dropout=-1"], "'model.dropout' must be in [0, 1)"),
    (None, [], "config file"),
])
def test_cli_config_errors_are_one_line_without_traceback(tmp_path, content, extra, expected):
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_text(content)
    result = run_cli(["train", "--config", str(path), "--run-dir", str(tmp_path / "run"),
                      *extra])
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mt train: error:") and expected in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()  # nothing was written


def test_training_on_the_cpu_bounds_onednn_kernel_caches(monkeypatch, tmp_path):
    """`mt train` caps oneDNN's per-shape kernel caches (they grew a run to 5 GB), but a value
    the user chose is kept."""
    from transformer_mt.train.trainer import Trainer

    names = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
    for name in names:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "64")
    Trainer(config_from_dict({}, ["train.device=cpu"]), tmp_path / "run")
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "8"
    assert os.environ["LRU_CACHE_CAPACITY"] == "64"
