# durq: every target sets itself up; only Python 3.11+ and make are assumed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test bench lint clean clean-demo

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,postgres]'
	@rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)
	$(PY) -m examples.podcast_mirror

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples bench
	$(VENV)/bin/ruff format --check src tests examples bench
	$(VENV)/bin/mypy

clean-demo:
	rm -rf .demo

clean:
	rm -rf .demo $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
