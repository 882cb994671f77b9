# LSB Explorer: `make run` serves the dashboard, `make test` runs the whole suite.
# Both create .venv and install the pinned requirements on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: run test lint bench browser clean reproduction gpu-cache kernels

$(VENV)/.runtime: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --editable .
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

run: $(VENV)/.runtime
	$(PY) -m streamlit run app/streamlit_app.py --server.port $(PORT)

# The end-to-end tests drive Debian's Chromium (Playwright's own browser download does not
# work on these machines): install it when missing and we are root, else say what to install.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "The browser tests need Chromium: install Debian's 'chromium' package (apt-get install chromium)."; \
	    exit 1; \
	  fi; }

# numba's disk cache filled on both cores at once (the warm-up's sections, then the learning
# kernels' parallel twins, by target): 70 s on a fresh clone, 7 s once filled.
# Without it each of the suite's two workers compiled every kernel itself (81 s each).
kernels: $(VENV)/.runtime
	{ $(PY) -m lsbcore.samplers.warmup lattice network && \
	  $(PY) -m lsbcore.samplers.twin_warmup rbm; } & first=$$!; \
	$(PY) -m lsbcore.samplers.warmup rbm && $(PY) -m lsbcore.samplers.twin_warmup lattice network; \
	second=$$?; wait $$first && exit $$second

# Two parts: the tests that start no browser, server or cluster on both cores, then those alone
# (tests/conftest.py, SERIAL_FILES); `pytest -q` alone still runs everything in one process.
test: $(VENV)/.dev browser kernels
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not serial"
	$(PY) -m pytest -q -m serial

lint: $(VENV)/.dev
	$(PY) -m ruff check . && $(PY) -m ruff format --check . && $(VENV)/bin/lint-imports --no-cache

# docs/reproduction.md from runs of the current code (about 25 minutes on 2 cores)
reproduction: $(VENV)/.runtime
	$(PY) -m lsbcore.studies.reproduce --seeds 5

bench: $(VENV)/.runtime
	$(PY) -m lsbcore.studies.benchmarks.samplers

# A lent GPU's kernels compiled ahead, here (tools/gpu, README "A lent GPU's window"): the device
# tests' launches and the GPU benchmark's, compiled for sm_90 under the GPU machines' Triton
# 3.6 and Python 3.12 into .gpu/cache, and the two packages those machines lack, which the
# device call carries (tools/gpu/device.sh)
GPU_TESTS := tests/test_device_balanced.py tests/test_device_learning.py \
	tests/test_device_syncs.py tests/test_device_checkerboard.py
gpu-cache: $(VENV)/.dev
	rm -rf .gpu/cache .gpu/tests.jsonl .gpu/bench.jsonl && mkdir -p .gpu
	$(PY) -m tools.gpu.launches --out .gpu/tests.jsonl -- -q -p no:cacheprovider $(GPU_TESTS) \
	  -k "not locally_balanced_matches_the_exact_posterior"  # 2,048 lanes here, 1 on a GPU
	$(PY) -m tools.gpu.launches --out .gpu/bench.jsonl --dry -- bench-gpu \
	  --workloads block-gibbs paper photo
	$(PY) -m tools.gpu.cache --launches .gpu/tests.jsonl .gpu/bench.jsonl --out .gpu/cache \
	  --triton 3.6.0 --python 3.12
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
	  --implementation cp --platform manylinux2014_x86_64 -d .gpu/wheels-gpu \
	  PyMaxflow==1.3.2 zuko==1.6.0

clean:
	rm -rf $(VENV) .pytest_cache
