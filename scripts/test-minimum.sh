#!/usr/bin/env bash
# The declared minimum of every runtime dependency (constraints/minimum.txt, the floors
# in pyproject.toml): a second venv with exactly those versions, and on it the policy
# unit tests (their doctests and tests/test_policy_*.py), the dependency checks and a
# few real crawls (the access log; the resolver, which pins private Scrapy and Twisted
# names). Run by `make test-minimum`, which CI runs after `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV=.venv-min
STAMP="$VENV/.installed-$(cat pyproject.toml constraints/minimum.txt | sha1sum | cut -c1-12)"
if [ ! -e "$STAMP" ]; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    # The test tools are not pinned: they are not the project's dependencies.
    "$VENV/bin/pip" install --quiet -c constraints/minimum.txt -e . \
        'pytest>=8' 'pytest-twisted>=1.14' 'hypothesis>=6.100' 'http-sfv>=0.9.9' \
        2> >(grep -vE "^WARNING: Location '.*' is ignored" >&2)
    touch "$STAMP"
fi
# Exactly the pinned versions, or the check checks nothing.
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
from packaging.utils import canonicalize_name
pins = {}
for line in open("constraints/minimum.txt", encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if line:
        name, _, version = line.partition("==")
        pins[canonicalize_name(name)] = version
wrong = {n: md.version(n) for n, v in pins.items() if md.version(n) != v}
if wrong:
    raise SystemExit(f"test-minimum: installed versions are not the pinned minimum: {wrong}")
print(f"test-minimum: {len(pins)} runtime dependencies at their declared minimum")
PY
exec "$VENV/bin/python" -m pytest -q polite_crawler/policy tests/test_policy_*.py \
    tests/test_dependencies.py tests/test_accesslog.py tests/test_resolver.py
