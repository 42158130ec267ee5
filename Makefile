# proactive_rl — the commands a new user runs. `make test` is what CI runs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch and torchvision are pinned: these builds lie on the project's machines' disk, and a plain
# `torch` requirement would download several GB.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
STAMP  := $(VENV)/.installed
# DeepSpeed's CPU comm extension is compiled on first use; keep it per venv (a shared ~/.cache build is
# rebuilt, under a lock, by every venv with other include paths).
export TORCH_EXTENSIONS_DIR ?= $(CURDIR)/$(VENV)/torch_extensions

.PHONY: install test test-fast lint format demo demo-quick bench clean

install: $(STAMP)

$(STAMP): pyproject.toml rewards/pyproject.toml eval/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_PINS)
	$(PY) -m pip install -q $(TORCH_PINS) -e ./rewards -e "./eval[judge,plots,video]" -e ".[train,video,judge,wandb,dev]"
	touch $(STAMP)

test: install
	$(PY) -m pytest

test-fast: install
	$(PY) -m pytest -m "not slow and not distributed"

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

demo: install
	$(PY) -m proactive_rl.cli demo --out demo_out

demo-quick: install
	$(PY) -m proactive_rl.cli demo --quick --out demo_out_quick

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
