# The two commands: `make demo` and `make test`. Each creates .venv if missing;
# `make demo` installs the project with torch/triton, `make test` adds its test extras.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.installed-test-stamp
TORCH_STAMP := $(VENV)/.installed-torch-stamp
LINTED := attest ledger client verifier
DEMO   := demo
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck unit slow test-loop faults browser-deps postgresql-deps bench clean mutation

$(STAMP): pyproject.toml setup.py ledger/vindex/_ctrie.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e .
	@touch $(STAMP)

# Runtimes torch/triton: torch==2.13.0 is the CPU build (about 1 GB); a bare `torch` would
# pull a CUDA build of several GB. Installed before the extra so its lower bounds are met.
$(TORCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check torch==2.13.0 triton
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[torch]'
	@touch $(TORCH_STAMP)

$(TEST_STAMP): $(TORCH_STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,torch]'
	@touch $(TEST_STAMP)

# Debian's chromium for the browser tests (no browser download); best effort as root.
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; browser tests will be skipped"; \
	  else echo "note: chromium not found; browser tests will be skipped"; fi; }

# Debian's postgresql for the PostgreSQL tests (each starts a throwaway cluster of its own;
# no service is needed); best effort as root.
postgresql-deps:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's postgresql for the PostgreSQL tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
	      || echo "warning: could not install postgresql; PostgreSQL tests will be skipped"; \
	  else echo "note: PostgreSQL not found; PostgreSQL tests will be skipped"; fi; }

lint: $(TEST_STAMP)
	$(BIN)/ruff check $(LINTED) $(DEMO) tests benchmarks

typecheck: $(TEST_STAMP)
	$(BIN)/mypy --strict $(LINTED) $(DEMO)

# `make test` leaves out the slow end-to-end tests (@pytest.mark.slow; `make slow` runs them,
# and CI runs both) and the fault injection (`make faults`).
unit: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -n 2 -m 'not slow and not faults' --durations=25 $(PYTEST_ARGS)

test: $(TEST_STAMP) browser-deps postgresql-deps lint typecheck unit

slow: $(TEST_STAMP) browser-deps postgresql-deps
	$(BIN)/python -m pytest -q -n 2 -m 'slow and not faults' $(PYTEST_ARGS)

# `make test` RUNS times in a row on a fresh clone of HEAD while another process keeps one
# core busy; stops at the first failure (see benchmarks/test_loop.sh).
test-loop:
	benchmarks/test_loop.sh $(or $(RUNS),10)

# Mutation testing of the verification core (slow; not part of `make test`).
# One module at a time: `make mutation MODULE=ledger/tlog/note.py`; JOBS=2 runs two mutants at once.
mutation: $(TEST_STAMP)
	PYTHONPATH=tests $(BIN)/python -m mutation.run $(if $(MODULE),--module $(MODULE),) $(if $(JOBS),--jobs $(JOBS),)

# Fault injection with real processes (disk full, strace-injected I/O errors, 100 SIGKILLs).
faults: $(TEST_STAMP)
	KTL_FAULT_KILLS=$${KTL_FAULT_KILLS:-100} $(BIN)/python -m pytest -q -m faults --timeout 3600 tests/test_faults.py

demo: $(TORCH_STAMP)
	$(BIN)/python -m demo.run $(if $(DEMO_EXIT),--exit,)

clean:
	rm -rf $(VENV) .mutation .mypy_cache .ruff_cache .pytest_cache .hypothesis demo-data screenshots tests/screenshots
