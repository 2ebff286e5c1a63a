# durq: every target sets itself up; only Python 3.11+ and make are assumed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HASH := $(shell cksum pyproject.toml | cut -d' ' -f1)
DEV := $(VENV)/.dev-$(HASH)
DEMO := $(VENV)/.demo-$(HASH)
BENCH := $(VENV)/.bench-$(HASH)

.PHONY: demo examples test bench lint soak powercut clean clean-demo

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# durq itself, its PostgreSQL driver, the dashboard, OpenTelemetry and Playwright (the
# browser tests), the test and lint tools, and what examples/ needs.
$(DEV): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev,postgres,examples,dashboard,otel,browser]'
	@rm -f $(VENV)/.dev-* && touch $@

# The peers the benchmarks compare with (SqliteHuey, persist-queue, procrastinate, pgqueuer).
$(BENCH): pyproject.toml $(DEV)
	$(PY) -m pip install --quiet -e '.[dev,postgres,examples,dashboard,otel,browser,bench]'
	@rm -f $(VENV)/.bench-* && touch $@

# durq and what the demo needs only (the `demo` extra): no test or lint tools.
$(DEMO): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[demo]'
	@rm -f $(VENV)/.demo-* && touch $@

demo: $(DEMO)
	$(PY) -m examples.podcast_mirror

# Every example application's demo, one after the other (each says what it shows).
examples: $(DEV)
	$(PY) -m examples.podcast_mirror --feeds podcasting20,cre
	$(PY) -m examples.podcast_import demo
	$(PY) -m examples.delivery_gateway demo
	$(PY) -m examples.media_bot demo
	$(PY) -m examples.generation_bot demo

test: $(DEV)
	$(PY) -m pytest $(PYTEST_ARGS)

# BENCH_QUICK=1 make bench: smaller counts (a couple of minutes); BENCH_ARGS for any other option.
bench: $(BENCH)
	$(PY) -m bench $(if $(BENCH_QUICK),--quick) $(BENCH_ARGS)

# Long run: `durq soak` (mixed jobs, workers killed at random, retention on; see
# docs/guarantees.md), then the model test with many more examples than `make test` runs.
# SOAK_SECONDS=120 make soak for a short one; SOAK_URL=postgresql://...?schema=soak for PostgreSQL.
SOAK_SECONDS ?= 600
SOAK_URL ?= sqlite:///.soak/soak.db
SOAK_MODEL_EXAMPLES ?= 600
# Power cuts (tests/powercut): producers and workers on a database in a FUSE filesystem
# that drops every write not fsynced; POWERCUT_CUTS cuts under synchronous=FULL (no loss),
# then under NORMAL (only the last commits may vanish). Needs /dev/fuse, fusermount and
# libfuse 2 (Debian: apt-get install fuse3 libfuse2).
POWERCUT_CUTS ?= 200
powercut: $(DEV)
	$(PY) -m tests.powercut.cuts --cuts $(POWERCUT_CUTS) --sync full
	$(PY) -m tests.powercut.cuts --cuts $(POWERCUT_CUTS) --sync normal

soak: $(DEV)
	@mkdir -p .soak && rm -f .soak/soak.db .soak/soak.db-wal .soak/soak.db-shm
	$(PY) -m durq soak --db '$(SOAK_URL)' --seconds $(SOAK_SECONDS) $(SOAK_ARGS)
	DURQ_MODEL_EXAMPLES=$(SOAK_MODEL_EXAMPLES) $(PY) -m pytest -q -p no:cacheprovider tests/model

lint: $(DEV)
	$(VENV)/bin/ruff check src tests examples bench
	$(VENV)/bin/ruff format --check src tests examples bench
	$(VENV)/bin/mypy

clean-demo:
	rm -rf .demo

clean:
	rm -rf .demo .soak $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
