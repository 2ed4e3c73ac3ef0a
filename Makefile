# polite_crawler — every target creates .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test test-minimum docs lint bench fuzz bot-page bot-key deploy scrapyd clean system-deps cluster-demo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[test,dev,docs,postgres,redis,scrapyd]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# Servers the tests start themselves (PostgreSQL, nginx), Chromium (the report and render tests)
# and python3-doc (pages nginx serves); from Debian when missing and when we are root. Tests
# that need one skip with a reason otherwise (fail under CI=true: tests/services.py).
system-deps:
	@bash scripts/system-deps.sh

demo: $(STAMP)
	$(BIN)/python -m demo

# Two workers sharing a Redis frontier crawl the demo web (docs/CLUSTER.md): redis-server
# and PostgreSQL started on loopback, the per-host summary and which worker served each
# host, everything stopped at the end.
cluster-demo: $(STAMP) system-deps
	$(BIN)/python -m demo.cluster

test: $(STAMP) system-deps
	$(BIN)/python -m pytest

# The declared minimum of every runtime dependency (constraints/minimum.txt) in a second
# venv, .venv-min, and the policy tests on it (scripts/test-minimum.sh). CI runs it.
test-minimum:
	bash scripts/test-minimum.sh

# The manual (docs/, Sphinx): built offline, every warning an error; the settings
# reference is generated from polite_crawler/defaults.py. Open build/docs/html/index.html.
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs build/docs/html

lint: $(STAMP)
	$(BIN)/ruff check polite_crawler tests bench demo scripts
	$(BIN)/mypy

bench: $(STAMP)
	bash scripts/system-deps.sh bench
	$(BIN)/python -m bench

fuzz: $(STAMP)
	$(BIN)/pip install --quiet -e '.[fuzz]'
	$(BIN)/python -m tests.fuzz

bot-page: $(STAMP)
	$(BIN)/python -m polite_crawler.botpage bot_page/index.html

# A new Ed25519 key for signing requests (Web Bot Auth), mode 0600; never overwrites
# one. Then set POLITE_SIGNING_KEY to it and run make bot-page (it also writes the key
# directory, bot_page/.well-known/http-message-signatures-directory).
BOT_KEY ?= secrets/bot-key.pem
bot-key: $(STAMP)
	$(BIN)/python -m polite_crawler.botkey $(BOT_KEY)

# A local scrapyd on 127.0.0.1:6800 with ./scrapyd.conf (state under var/). With
# SCRAPYD_USERNAME and SCRAPYD_PASSWORD set, it requires them.
scrapyd: $(STAMP)
	$(BIN)/python scripts/scrapyd_local.py

# Build the egg and deploy it to scrapy.cfg's [deploy] url, with the same
# SCRAPYD_USERNAME / SCRAPYD_PASSWORD (unset: none, or ~/.netrc).
deploy: $(STAMP)
	SCRAPYD_USERNAME="$${SCRAPYD_USERNAME-}" SCRAPYD_PASSWORD="$${SCRAPYD_PASSWORD-}" \
		$(BIN)/scrapyd-deploy

clean:
	rm -rf build *.egg-info setup.py .pytest_cache .mypy_cache .ruff_cache demo-output .venv-min
