# `make demo`: set up, train the CPU-sized quickstart model and translate a sentence.
# `make test`: set up and run the test suite (`make test-fast`: all but the system tier).
PYTHON ?= python3
# the Python the venv is made from; not the scripts' PYTHON (the interpreter they run, the
# venv's by default), which `make test PYTHON=python3.13` would otherwise set for the tests
unexport PYTHON
VENV ?= .venv
PY := $(VENV)/bin/python
DATA_DIR ?= $(firstword $(wildcard ../shared/data/multi30k))
export MT_DATA_DIR ?= $(DATA_DIR)

.PHONY: setup demo test test-fast lint bench clean wheelhouse screenshots

# WHEELHOUSE=DIR: install from that folder only, with no network (`make wheelhouse` fills it);
# VENV_ARGS=--system-site-packages: use a torch the machine already has (a GPU image's)
WHEELHOUSE ?=
VENV_ARGS ?=
PIP_FROM := $(if $(WHEELHOUSE),--no-index --find-links $(abspath $(WHEELHOUSE)),)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_ARGS) $(VENV)
	# the torch build that fits the machine first (CUDA only where an NVIDIA GPU is): a bare
	# `pip install torch` pulls gigabytes of CUDA packages even where there is no GPU
	WHEELHOUSE="$(if $(WHEELHOUSE),$(abspath $(WHEELHOUSE)),)" bash scripts/install_torch.sh $(PY)
	$(PY) -m pip install --quiet $(PIP_FROM) -e ".[dev]"
	# argos-translate as LibreTranslate installs it (argos-translate-lt), for the argos export's
	# test; when online (a wheelhouse holds what the package itself needs)
	$(if $(WHEELHOUSE),,$(PY) -m pip install --quiet -e ".[argos]")
	touch $@

setup: $(VENV)/.installed

# every wheel the project needs, for a machine without internet: make wheelhouse
# [WHEELHOUSE=wheelhouse] [WHEEL_PYTHON=3.12] [WHEEL_PLATFORM=manylinux_2_28_x86_64]
# [WHEEL_TORCH=none|cpu|cu128]; then there: make setup WHEELHOUSE=wheelhouse
wheelhouse:
	$(if $(filter-out default file,$(origin PYTHON)),PYTHON=$(PYTHON) ,)bash scripts/wheelhouse.sh $(or $(WHEELHOUSE),wheelhouse) $(WHEEL_PYTHON) $(WHEEL_PLATFORM)

demo: setup
	$(VENV)/bin/mt train --config config/quickstart.yaml --run-dir runs/quickstart
	$(VENV)/bin/mt translate --checkpoint runs/quickstart/best.pt "Ein Mann fährt Fahrrad." \
		"Zwei Hunde spielen im Schnee."

# the test modules shared out to one process a core (pytest-xdist; TEST_WORKERS=0: one process),
# the longest first (tests/conftest.py)
TEST_WORKERS ?= auto
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: lint
	$(PYTEST)

# the edit-test loop: the unit and integration tiers (tests/conftest.py)
test-fast: lint
	$(PYTEST) -m "not system"

# ruff, mypy over the whole package ([tool.mypy] in pyproject.toml), and the size limits
# (the package's, the benchmarks' and the tests')
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) scripts/check_size.py
	$(PY) scripts/check_size.py bench
	$(PY) scripts/check_size.py tests

# the page's screenshots in docs/img, taken by its browser tests on the demo model (make demo
# first), compared with COMPARE (default: the demo run's checkpoint at step 200)
COMPARE ?= runs/quickstart/step_0000200.pt
screenshots: setup
	MT_PAGE_CHECKPOINT=runs/quickstart/best.pt MT_PAGE_COMPARE=$(COMPARE) \
		MT_TEST_ARTIFACTS=docs/img $(PY) -m pytest -q tests/system/test_page.py -k "steers or deeper or phone"

bench: setup  # ours against the tutorial baseline, one run (JSON with a ratio)
	$(PY) bench/train_speed.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
