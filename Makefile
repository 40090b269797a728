# Two commands do all the set-up on a fresh machine:
#   make run    create .venv, install xlalint, lint the bundled examples
#   make test   install the test and verify extras (torch, torch_xla) and run the whole suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export PJRT_DEVICE ?= CPU

.PHONY: run test bench clean

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
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || echo "chromium missing: tests/test_verify_html.py will skip (fail under CI=true)"
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(VENV)/.installed-test
	$(BIN)/python bench/run.py
	$(BIN)/python bench/verify_overhead.py

clean:
	rm -rf $(VENV) .xlalint_cache .pytest_cache build dist *.egg-info
