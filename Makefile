# Two commands do all set-up: `make demo` and `make test`. Each creates .venv if missing and
# installs once (the stamp file makes re-runs fast).
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
EXTRAS  ?= dev,aic
PYTEST_ARGS ?=

.PHONY: demo test bench lint install clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/coral demo

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m benchmarks.run

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy planning catalog_db

clean:
	rm -rf $(VENV) out coral.duckdb
