# proactive_rl — the commands a new user runs. `make test` is what CI runs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch and torchvision are pinned: these builds lie on the project's machines' disk, and a plain
# `torch` requirement would download several GB. The other libraries: constraints.txt (the versions checked).
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
STAMP  := $(VENV)/.installed
# DeepSpeed's CPU comm extension is compiled on first use; keep it per venv (a shared ~/.cache build is
# rebuilt, under a lock, by every venv with other include paths).
export TORCH_EXTENSIONS_DIR ?= $(CURDIR)/$(VENV)/torch_extensions

.PHONY: install test test-fast lint format demo demo-quick bench clean crosscheck-env

install: $(STAMP)

$(STAMP): pyproject.toml rewards/pyproject.toml eval/pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_PINS)
	$(PY) -m pip install -q -c constraints.txt $(TORCH_PINS) -e ./rewards -e "./eval[judge,plots,video]" -e ".[train,video,judge,wandb,dev]"
	touch $(STAMP)

# Two pytest workers, one test file each at a time (module fixtures built once): much of the suite waits on the
# subprocesses it launches. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: install
	$(PY) -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

test-fast: install
	$(PY) -m pytest -m "not slow and not distributed"

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# `make demo SEEDS=3`: seeds 0..2 (demo_out/seed<k>), a mean ± sd table in demo_out/report/seeds.md, and the same
# file as docs/results.md (the results page the README links to is written by this command, never by hand).
SEEDS ?= 1
demo: install
	$(PY) -m proactive_rl.cli demo --out demo_out $(if $(filter-out 1,$(SEEDS)),--seeds $(SEEDS) --doc docs/results.md)

demo-quick: install
	$(PY) -m proactive_rl.cli demo --quick --out demo_out_quick

bench: install
	$(PY) -m benchmarks.run_all

# The authors' ProactiveBench package (Python >= 3.12) for tests/eval/test_authors_crosscheck.py, which skips
# without it. Any Python >= 3.12 on the machine will do (PY312=... to choose one).
PY312 ?= $(shell for p in python3.13 python3.12 $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3; do \
	$$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && echo $$p && break; done)
crosscheck-env:
	@test -n "$(PY312)" || (echo "no Python >= 3.12 found; set PY312=/path/to/python3.12" && exit 1)
	$(PY312) -m venv .cache/proactivebench-py312
	.cache/proactivebench-py312/bin/pip install -q --no-deps proactivebench==0.1.1 jsonlines attrs pillow

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
