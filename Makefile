# Two commands do all the set-up on a fresh machine:
#   make run    create .venv, install xlalint, lint the bundled examples
#   make test   install the test and verify extras (torch, torch_xla) into .venv and run the whole suite
# Neither changes anything outside the clone. `make browser` installs the one system package a test uses.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export PJRT_DEVICE ?= CPU

.PHONY: run test browser bench fuzz clean

$(BIN)/python:
	@echo "== creating $(VENV) (a virtualenv in the clone) and installing xlalint into it"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	@$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	@echo "== installing the test and verify extras into $(VENV) (torch and torch_xla: about 7 GB)"
	@# pip unpacks in TMPDIR and installs in the clone: say how much room there is before it starts,
	@# so that a full disk reads as one (no wheel cache: it would hold a second copy of torch)
	@free=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); \
	if [ "$$free" -lt 9 ]; then echo "warning: $$free GB free on $$(df -P . | awk 'NR==2 {print $$6}'); torch and torch_xla need about 8 GB"; fi
	@$(BIN)/python -m pip install --quiet --no-cache-dir -e '.[test,verify]'
	@touch $@

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
# fixtures (the pre-commit hook's environment) are built once; --no-loadscope-reorder keeps the order of
# tests/conftest.py (the longest files first). -v prints one line per test as it ends.
PYTEST_JOBS ?= auto
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n $(PYTEST_JOBS) --dist loadfile --no-loadscope-reorder -v --durations=10 $(PYTEST_ARGS)

# The browser of tests/test_verify_html.py, which renders the `--verify --html` page headless: Debian's
# chromium package with what it needs and no recommended extras (25 packages, about 120 MB to download,
# 400 MB on disk), by apt-get, as root. .ci/run runs it; without a browser `make test` skips that one
# test and says why (under CI=true it fails). A Chromium or Chrome already on the PATH, or named by
# XLALINT_BROWSER, is used as it is.
BROWSERS := chromium chromium-browser google-chrome google-chrome-stable
browser:
	@found="$${XLALINT_BROWSER:-$$(command -v $(BROWSERS) 2>/dev/null | head -n 1)}"; \
	if [ -n "$$found" ]; then echo "a browser is already there: $$found"; \
	elif [ "$$(id -u)" != 0 ]; then echo "make browser installs Debian's chromium with apt-get: run it as root (sudo make browser)"; exit 1; \
	else apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
	  && echo "installed $$(chromium --version 2>/dev/null)"; fi

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
