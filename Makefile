# Two commands do all set-up on a fresh machine with Python >= 3.10:
#   make demo   installs kernscope and analyzes the bundled example trace
#   make test   installs kernscope (+ test deps, CPU torch) and runs the test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(VENV)/bin/pip
EXAMPLE = src/kernscope/examples/h200_gpt_train_step.pt.trace.json.gz
TORCH_CPU ?= torch==2.13.0
# triton's frontend compiles kernels to TTIR/PTX without a GPU: the intra-kernel rewrite tests use it
TRITON_CPU ?= triton==3.6.0
# bytecode for kernscope's own modules: an editable install writes none, and where the shell sets
# PYTHONDONTWRITEBYTECODE=1 (as this project's machines do) every command compiled all of them again
# (the bundled example's analyze: 0.86-0.96 s cold without bytecode, 0.58-0.66 s with it)
COMPILE = $(PY) -m compileall -q src/kernscope

.PHONY: install install-test install-browser demo test test-oldest lint bench-load clean

# the venv itself, with a current pip: both installs below start from it
$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

SOURCES = pyproject.toml src/kernscope/load/_xspace.c src/kernscope/load/_kineto.c src/kernscope/load/_sweep.c

$(VENV)/.installed: $(SOURCES) | $(VENV)/bin/python
	$(PIP) install -q -e .
	$(COMPILE)
	touch $@

install: $(VENV)/.installed

# torch, then triton only where torch brought none, into the venv $(1) with pip's options $(2): a CPU build of torch
# requires no triton (TRITON_CPU then), PyPI's CUDA builds pin their own (torch 2.13.0: triton 3.7.1; naming both
# versions was a conflict pip refused on every machine without the CPU wheel at hand, as on Python 3.10)
define torch_and_triton
	$(1)/bin/pip install -q "$(TORCH_CPU)" $(2)
	$(1)/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('triton') is None)" || \
	  $(1)/bin/pip install -q "$(TRITON_CPU)" $(2)
endef

# the test install writes no bytecode for its libraries (pip compiles every module of every wheel, one after the other:
# 35 + 22 + 8 s for the test extras, torch and triton on a fresh clone, against 15 + 6 + 4.5 s without): the suite runs
# with PYTHONDONTWRITEBYTECODE emptied (TEST_ENV), so the modules it imports are compiled once, as first imported
NO_COMPILE = --no-compile
# one install of the package with its test extras, not `pip install -e .` and then `-e ".[test]"`: pip builds an editable
# install of a local folder again each time it is named, so the compiled scanner was built twice on a fresh clone
# (13-15 s of the 15 s and 24 s the two took on this machine). The package is then installed as make install would
# have it: its stamp is touched too
$(VENV)/.installed-test: $(SOURCES) | $(VENV)/bin/python
	$(PIP) install -q $(NO_COMPILE) -e ".[test]"
	$(call torch_and_triton,$(VENV),$(NO_COMPILE))
	$(COMPILE)
	touch $@ $(VENV)/.installed

install-test: $(VENV)/.installed-test

# Debian's chromium for the browser tests (tests/test_browser.py drives it headless); make test calls this
install-browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  (echo "installing Debian's chromium for the browser tests"; \
	   (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	   (sudo -n apt-get update -qq && sudo -n DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	   echo "could not install chromium: the browser tests will fail")

demo: install
	$(COMPILE)
	mkdir -p out
	$(VENV)/bin/kernscope analyze $(EXAMPLE) --top 12
	$(VENV)/bin/kernscope report $(EXAMPLE) -o out/report.xlsx
	$(VENV)/bin/kernscope report $(EXAMPLE) -o out/report.html
	@echo "Reports: out/report.html (open it in a browser) and out/report.xlsx"

# the two mypy runs side by side (one per core, each its own cache): 76 s one after the other -> 49 s cold; with
# torch and triton not followed (Any: mypy read their 1,400 modules in each run) 47 -> 19 s cold
# mypy where numpy's stubs are those the types are written against (numpy >= 2.3: a bare ndarray is generic with
# defaults); Python 3.10 gets numpy 2.2 at most, whose stubs read 300 errors into the same code: ruff only there
lint: install-test
	$(VENV)/bin/ruff check src tests benchmarks examples
	@if $(PY) -c "import numpy, sys; sys.exit(tuple(int(x) for x in numpy.__version__.split('.')[:2]) < (2, 3))"; then \
	  $(VENV)/bin/mypy --cache-dir .mypy_cache/src src/kernscope & pkg=$$!; \
	  $(VENV)/bin/mypy --cache-dir .mypy_cache/tests --config-file tests/mypy.ini tests; rc=$$?; \
	  wait $$pkg && exit $$rc; \
	else \
	  echo "mypy not run: numpy $$($(PY) -c 'import numpy; print(numpy.__version__)') here; the types are checked against numpy >= 2.3 (Python >= 3.11)"; \
	fi

# the real traces (../shared/traces, or KERNSCOPE_TRACES) are required here: their tests fail, never skip.
# Two workers (pytest-xdist, one per core), a fixed terminal width for the tests that print tables without
# setting one: 7:51 serial -> 4:59 on this 2-core machine for the 1,058 tests then;
# 5:36-6:05 for the 1,368 tests of session 21, after lint (49 s cold); 4:09-4:57 for the 1,372-1,374 of session 22 on a
# faster machine, after lint (18 s cold); 4:07-4:24 for the 1,394 of session 23 (a gzip test of 29 s now takes 2 s).
# Tests, not files, handed out (--dist worksteal: each worker starts on its half in order, one that runs out takes
# tests from the other's end): the 2,022 tests of session 55 in 548 and 568 s, against 589 and 589 s with a file per
# worker (--dist loadfile); a trace kept for the next test of a file (conftest's scanned_once) is read again where
# that test runs on the other worker. Session 71: 518-527 s -> 451-471 s on a slow hour (small jobs in one process:
# their spawned workers' imports were 85 s of the run's CPU); the run keeps 184% of 2 cores busy (a third worker: no gain).
# Session 72: 292 -> 254 s on a fast hour (the C heap trimmed only where a load freed 16 MB: 108 -> 72 s of system time)
# Session 89: one polars thread a worker (POLARS_MAX_THREADS=1) measured, no gain (382.5 s against 379.6 s, interleaved)
# Session 91: each worker pinned to a core of its own (tests/conftest.py; kernscope sizes its pools by the affinity mask):
# 370 s -> 294-304 s, system time 100 -> 60 s (KERNSCOPE_PIN_WORKERS=0 runs them unpinned)
PYTEST_ARGS = -q -p no:cacheprovider -n 2 --dist worksteal
# the suite's environment (make test, make test-oldest). PYTHONDONTWRITEBYTECODE emptied: pytest keeps its
# assertion-rewritten test modules as bytecode (tests/__pycache__), where with the shell's =1 each worker rewrote all
# of them at every run (collection 15 s -> 4.3 s)
TEST_ENV = PYTHONDONTWRITEBYTECODE= COLUMNS=150 KERNSCOPE_REQUIRE_BROWSER=1 KERNSCOPE_REQUIRE_TRACES=1
test: lint install-browser
	$(COMPILE)
	$(TEST_ENV) $(PY) -m pytest $(PYTEST_ARGS)

# the suite on the oldest versions pyproject.toml allows (.ci/oldest.txt; Python 3.10 or 3.11), in a venv of its
# own: not part of make test (a second install), run when a lower bound moves
OLDEST = .venv-oldest
test-oldest: install-browser
	$(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/pip install -q --upgrade pip
	$(OLDEST)/bin/pip install -q -e ".[test]" -c .ci/oldest.txt
	$(call torch_and_triton,$(OLDEST),-c .ci/oldest.txt)
	$(TEST_ENV) $(OLDEST)/bin/python -m pytest $(PYTEST_ARGS)

bench-load: install
	$(PIP) install -q holistictraceanalysis
	$(PY) benchmarks/bench_load.py --size-mb 1000

clean:
	rm -rf $(VENV) $(OLDEST) out build *.egg-info
