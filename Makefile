# polite_crawler — every target creates .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test lint bench fuzz bot-page deploy scrapyd clean system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[test,dev,postgres,scrapyd]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# Servers the tests start themselves (PostgreSQL); installed from Debian when
# missing and when we are root. Tests that need one skip with a reason otherwise.
system-deps:
	@bash scripts/system-deps.sh

demo: $(STAMP)
	$(BIN)/python -m polite_crawler.demo

test: $(STAMP) system-deps
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check polite_crawler tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench

fuzz: $(STAMP)
	$(BIN)/pip install --quiet -e '.[fuzz]'
	$(BIN)/python -m tests.fuzz

bot-page: $(STAMP)
	$(BIN)/python -m polite_crawler.botpage bot_page/index.html

scrapyd: $(STAMP)
	$(BIN)/python -m polite_crawler.scrapyd_local

deploy: $(STAMP)
	$(BIN)/scrapyd-deploy

clean:
	rm -rf build *.egg-info setup.py .pytest_cache .mypy_cache .ruff_cache demo-output
