# Two entry points (see README):  make lab   and   make test
# Both create .venv with the pinned versions of requirements/ci.txt on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The second Triton whose interpreter runs the kernel tests (the newest, with the strictest masks).
TRITON_NEXT := 3.9.0

.PHONY: lab test lint test-unit test-notebooks test-triton-next test-browser student figures bench clean

$(STAMP): pyproject.toml requirements/ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c requirements/ci.txt -e ".[lab,test,browser]"
	touch $@

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/00_setup_and_tour.ipynb

test: lint test-unit test-notebooks test-triton-next test-browser

# The linter first: seconds, and it catches a broken import before the long stages.
lint: $(STAMP)
	$(BIN)/ruff check .

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q tests --ignore=tests/browser

test-notebooks: $(STAMP)
	$(BIN)/python -m pytest -q --nbval-lax --nbval-current-env \
		--nbval-sanitize-with notebooks/sanitize.cfg notebooks

# Kernel tests again under the newest Triton's interpreter, installed beside the pinned one.
test-triton-next: $(STAMP)
	$(BIN)/python -m pip install -q --no-deps --target $(VENV)/triton-next triton==$(TRITON_NEXT)
	PYTHONPATH=$(VENV)/triton-next $(BIN)/python -c "import triton; assert triton.__version__ == '$(TRITON_NEXT)', triton.__version__"
	PYTHONPATH=$(VENV)/triton-next $(BIN)/python -m pytest -q tests/test_kernels.py

# Every notebook in JupyterLab, in Debian's Chromium (apt-get install -y chromium; never
# `playwright install`). Skipped with a reason if Chromium is missing, unless
# LABKIT_REQUIRE_BROWSER=1 (as .ci/run sets).
test-browser: $(STAMP)
	$(BIN)/python -m pytest -q -rs tests/browser

student: $(STAMP)
	$(BIN)/python -m labkit student-edition --src notebooks --out student

figures: $(STAMP)
	$(BIN)/python -m labkit figures

bench: $(STAMP)
	$(BIN)/python -m labkit repro

clean:
	rm -rf $(VENV) .pytest_cache
