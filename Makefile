# `make demo`: set up, train the CPU-sized quickstart model and translate a sentence.
# `make test`: set up and run the test suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA_DIR ?= $(firstword $(wildcard ../shared/data/multi30k))
export MT_DATA_DIR ?= $(DATA_DIR)

.PHONY: setup demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# the torch build that fits the machine first (CUDA only where an NVIDIA GPU is): a bare
	# `pip install torch` pulls gigabytes of CUDA packages even where there is no GPU
	bash scripts/install_torch.sh $(PY)
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/mt train --config config/quickstart.yaml --run-dir runs/quickstart
	$(VENV)/bin/mt translate --checkpoint runs/quickstart/best.pt "Ein Mann fährt Fahrrad." \
		"Zwei Hunde spielen im Schnee."

test: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check .

bench: setup  # ours against the tutorial baseline, one run (JSON with a ratio)
	$(PY) bench/train_speed.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
