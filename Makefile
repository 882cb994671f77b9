# LSB Explorer: `make run` serves the dashboard, `make test` runs the whole suite.
# Both create .venv and install the pinned requirements on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: run test lint bench clean

$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

run: $(VENV)/.runtime
	$(PY) -m streamlit run app/streamlit_app.py --server.port $(PORT)

test: $(VENV)/.dev
	$(PY) -m ruff check .
	$(PY) -m pytest -q

lint: $(VENV)/.dev
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

bench: $(VENV)/.runtime
	$(PY) -m lsbcore.bench

clean:
	rm -rf $(VENV) .pytest_cache
