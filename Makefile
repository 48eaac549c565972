# One command to set up and run each job; a second call reuses .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: reproduce test lint bench docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/gmtheory reproduce --out reproduce-out

# Four xdist workers, each pinned to one core (tests/conftest.py): while one waits on a
# subprocess test, the others keep every core busy (docs/performance.md, "The test suite").
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 4 --dist loadgroup

$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,docs]'
	touch $(DOCS_STAMP)

# The documentation site, strict: a broken link or a missing page fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check gmtheory tests examples docs/hooks.py docs/notebooks

bench: $(STAMP)
	$(BIN)/gmtheory bench operator

clean:
	rm -rf $(VENV) results reproduce-out .pytest_cache site
