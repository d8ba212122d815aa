# The two commands: `make demo` and `make test`. Each creates .venv if missing
# and installs the project with its test extras.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
LINTED := attest ledger client verifier
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck unit faults browser-deps bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

# Debian's chromium for the browser tests (no browser download); best effort as root.
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; browser tests will be skipped"; \
	  else echo "note: chromium not found; browser tests will be skipped"; fi; }

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED) tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy --strict $(LINTED)

unit: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 $(PYTEST_ARGS)

test: $(STAMP) browser-deps lint typecheck unit

# Fault injection with real processes (disk full, strace-injected I/O errors, 100 SIGKILLs).
faults: $(STAMP)
	KTL_FAULT_KILLS=$${KTL_FAULT_KILLS:-100} $(BIN)/python -m pytest -q -m faults --timeout 3600 tests/test_faults.py

demo: $(STAMP)
	$(BIN)/python -m client.demo $(if $(DEMO_EXIT),--exit,)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis demo-data screenshots tests/screenshots
