"""Run one target under atheris: ``python -m tests.fuzz.atheris_main NAME [libFuzzer flags]``.

The parser modules are imported inside :func:`atheris.instrument_imports`, so
libFuzzer is guided by their coverage.
"""

from __future__ import annotations

import sys

import atheris


def main() -> None:
    name = sys.argv[1]
    with atheris.instrument_imports(include=["polite_crawler", "w3lib", "protego"]):
        from tests.fuzz import targets
    if name not in targets.TARGETS:
        sys.exit(f"no target {name!r} (missing: {targets.MISSING.get(name, 'unknown name')})")
    atheris.Setup([sys.argv[0], *sys.argv[2:]], targets.TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
