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
	@$(BIN)/xlalint --isolated examples/slow_train.py || test $$? -eq 1
	@echo
	@echo "== xlalint examples/fast_train.py (its fixed twin: expect none)"
	@$(BIN)/xlalint --isolated examples/fast_train.py

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(VENV)/.installed-test
	$(BIN)/python bench/run.py
	$(BIN)/python bench/verify_overhead.py

clean:
	rm -rf $(VENV) .xlalint_cache .pytest_cache build dist *.egg-info

# A long soak of the generated-program property (tests/test_generated.py); a counterexample is written
# as a fixture with `# expect:` marks to tests/fixtures/generated/. FUZZ_EXAMPLES=N for a longer run.
FUZZ_EXAMPLES ?= 3000
fuzz: $(VENV)/.installed-test
	XLALINT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_generated.py tests/test_metamorphic.py
