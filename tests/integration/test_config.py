from __future__ import annotations

import os

import pytest

from tests.helpers import run_cli, tiny_train_args
from transformer_mt.config import Config
from transformer_mt.config.file import config_from_dict, load_config
from transformer_mt.errors import ConfigError


def test_shipped_configs_load():
    from tests.helpers import REPO

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
    ({}, ["train.device=tpu"], "'train.device' must be auto, cpu, cuda, cuda:N or mps"),
    ({}, ["model.d_model"], "must look like section.key=value"),
    ({}, ["train.use_amp=true"], "unknown config key 'train.use_amp'"),
    ({"model": 3}, [], "config section 'model' must be a mapping"),
    ({}, ["train.shuffle.x=1"], "unknown config key 'train.shuffle'"),
    ({}, ["train.lr=.inf"], "'train.lr' must be a finite number"),
    ({}, ["train.label_smoothing=.nan"], "'train.label_smoothing' must be a finite number"),
    ({}, ["train.adam_eps=-1e-9"], "'train.adam_eps' must be positive"),
    ({}, ["train.weight_decay=-0.1"], "'train.weight_decay' must be >= 0"),
    ({}, [f"train.seed={2**63}"], "'train.seed' must be in [0, 2^32)"),
    ({}, ["train.seed=-1"], "'train.seed' must be in [0, 2^32)"),
    ({}, ["name=/abs/path"], "'name' must be a plain name"),
    ({}, ["name=../up"], "'name' must be a plain name"),
    ({}, ["model.max_positions=2"], "'model.max_positions' must be at least 3"),
    ({"train": {"max_steps": None, "max_epochs": 3}}, ["train.lr_schedule=linear"],
     "'train.lr_schedule' linear decays to zero at train.max_steps: set train.max_steps"),
    ({"train": {"max_steps": 100, "warmup_steps": 100}}, ["train.lr_schedule=linear"],
     "train.max_steps must exceed train.warmup_steps"),
    ({}, ["train.lr_schedule=cosine"], "'train.lr_schedule' must be one of"),
    ({}, ["train.max_minutes=0"], "'train.max_minutes' must be positive"),
    ({"train": {"max_steps": None, "max_epochs": None}}, [], "set train.max_steps, "
     "train.max_epochs or train.max_minutes, or training never stops"),
])
def test_config_errors_name_the_key(data, overrides, message):
    with pytest.raises(ConfigError) as err:
        config_from_dict(data, overrides)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True))


@pytest.mark.parametrize("text, message", [
    (BOMB, "expands to more than 10,000 values"),
    ("a: &a [*a]\n", "recursive YAML alias"),
    ("model:\n  d_model: 8\n  d_model: 16\n", "duplicate key 'd_model' at line 3"),
    ("train: {seed: 1, seed: 2}\n", "duplicate key 'seed'"),
    ("[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
])
def test_hostile_yaml_is_refused_quickly_in_one_line(tmp_path, text, message):
    import time

    path = tmp_path / "c.yaml"
    path.write_text(text)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=message) as err:
        load_config(path)
    assert time.perf_counter() - start < 5
    assert "\n" not in str(err.value) and str(path) in str(err.value)
    with pytest.raises(ConfigError, match="recursive"):  # overrides go through the same loader
        config_from_dict({}, ["name=&a [*a]"])


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


@pytest.mark.parametrize(("precision", "chosen"), [("bf16", None), ("bf16", "64"),
                                                   ("fp32", None)])
def test_training_on_the_cpu_bounds_onednn_kernel_caches(monkeypatch, tmp_path, precision,
                                                         chosen):
    """`mt train` caps the kernel cache in front of oneDNN's (ideep's); oneDNN's own keeps the
    few shapes of bf16 training's products (``training/row_buckets.py``), and is capped too
    where the products are not padded; a value the user chose is kept."""
    from transformer_mt.training.trainer import Trainer

    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    if chosen is None:
        monkeypatch.delenv("LRU_CACHE_CAPACITY", raising=False)
    else:
        monkeypatch.setenv("LRU_CACHE_CAPACITY", chosen)
    trainer = Trainer(config_from_dict({}, ["train.device=cpu", f"train.precision={precision}"]),
                      tmp_path / "run")
    # the constructor only checks: the environment and the process are changed by setup/train
    assert os.environ.get("LRU_CACHE_CAPACITY") == chosen
    assert not hasattr(trainer, "device") and not (tmp_path / "run").exists()
    trainer._start()  # what setup and train begin with
    assert os.environ["LRU_CACHE_CAPACITY"] == (chosen or "8")
    assert os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY") == (
        None if precision == "bf16" else "8")


def test_tensorboard_key_without_the_package_is_a_clear_error(tmp_path):
    import importlib.util

    if importlib.util.find_spec("tensorboard") is not None:
        pytest.skip("tensorboard is installed here")
    result = run_cli(tiny_train_args(tmp_path / "run", "train.tensorboard=true"))
    assert result.returncode != 0
    assert "pip install 'transformer_mt[tensorboard]'" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("overrides, message", [
    (["model.d_model=1000000", "model.n_heads=1"], "GiB for its weights, gradients"),
    (["model.max_positions=4"], "model.max_positions=4"),
])
def test_training_settings_that_cannot_work_are_refused_before_allocating(tmp_path, overrides,
                                                                          message):
    result = run_cli(tiny_train_args(tmp_path / "run", *overrides), timeout=120)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert message in result.stderr.strip().splitlines()[-1]
    assert "data.max_len" not in result.stderr.strip().splitlines()[-1]


def test_the_parameter_count_is_known_before_building():
    """The memory check counts the parameters on the meta device: the same model, no memory."""
    from transformer_mt.build import count_parameters
    from transformer_mt.model.transformer import Transformer

    for changes in ({}, ["model.tie_embeddings=false"], ["model.norm=post"],
                    ["data.shared_vocab=true"]):
        cfg = config_from_dict({}, ["model.d_model=32", "model.n_heads=2", "model.d_ff=48",
                                    *changes])
        sizes = (40, 40) if cfg.data.shared_vocab else (50, 40)
        model = Transformer(cfg.model, *sizes, pad_id=1, shared_vocab=cfg.data.shared_vocab)
        assert count_parameters(cfg, *sizes) == model.num_parameters(), changes
