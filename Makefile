# Two commands do all the set-up on a fresh machine:
#   make run    create .venv, install xlalint, lint the bundled examples
#   make test   install the test and verify extras (torch, torch_xla) and run the whole suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export PJRT_DEVICE ?= CPU

.PHONY: run test bench fuzz clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test,verify]'
	touch $@

run: $(VENV)/.installed
	@echo "== xlalint examples/slow_train.py (the slow script: expect findings)"
	@# exit 1 means findings, which this script has; 2 would be an error
	@$(BIN)/xlalint --isolated --output-format concise examples/slow_train.py || test $$? -eq 1
	@echo
	@echo "== xlalint examples/fast_train.py (its fixed twin: expect none)"
	@$(BIN)/xlalint --isolated examples/fast_train.py
	@echo
	@echo "Next: lint your own code with $(BIN)/xlalint (or put $(abspath $(BIN)) on your PATH):"
	@echo "  $(BIN)/xlalint path/to/train.py                 # each finding with its source lines"
	@echo "  $(BIN)/xlalint --fix --unsafe-fixes --diff path/to/train.py   # what --fix would change"
	@echo "  make test                                       # + torch 2.9 and torch_xla 2.9 for --verify"

# Both cores (pytest-xdist); --dist loadfile keeps a file's tests on one worker, so a file's session
# fixtures (the pre-commit hook's environment) are built once. -v prints one line per test as it ends.
PYTEST_JOBS ?= auto
test: $(VENV)/.installed-test
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || echo "chromium missing: tests/test_verify_html.py will skip (fail under CI=true)"
	$(BIN)/python -m pytest -n $(PYTEST_JOBS) --dist loadfile -v --durations=10 $(PYTEST_ARGS)

bench: $(VENV)/.installed-test
	$(BIN)/python bench/run.py
	$(BIN)/python bench/verify_overhead.py

clean:
	rm -rf $(VENV) .xlalint_cache .pytest_cache build dist *.egg-info

# A long soak of the generated-program property (tests/test_generated.py); a counterexample is written
# as a fixture with `# expect:` marks to tests/fixtures/generated/. FUZZ_EXAMPLES=N for a longer run.
# tests/test_crash_sweep.py soaks too: generated project layouts, never an internal error (XLA902).
FUZZ_EXAMPLES ?= 3000
fuzz: $(VENV)/.installed-test
	XLALINT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_generated.py tests/test_metamorphic.py tests/test_crash_sweep.py
