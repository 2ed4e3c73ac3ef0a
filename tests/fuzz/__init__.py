"""Fuzzing the pure parsers: ``python -m tests.fuzz`` (``make fuzz``).

Targets are in :mod:`tests.fuzz.targets`; :mod:`tests.fuzz.__main__` runs each
under atheris (libFuzzer) for a bounded time; hypothesis runs the same targets
in the test suite (``tests/test_fuzz_properties.py``).
"""
