# One command to set up and run each job; a second call reuses .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: reproduce test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/gmtheory reproduce --out reproduce-out

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check gmtheory tests

bench: $(STAMP)
	$(BIN)/gmtheory bench operator

clean:
	rm -rf $(VENV) results reproduce-out .pytest_cache
