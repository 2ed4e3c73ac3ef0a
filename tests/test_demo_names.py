"""The names table crawler processes read through POLITE_DNS_LOOKUP=demo.names.dns_lookup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from demo import names

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_the_table_written_is_the_one_the_lookup_reads(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    env = names.write_table(tmp_path / "dns.json", {"s01.test": ["127.0.77.1"]})
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    names.table.cache_clear()
    try:
        assert names.dns_lookup("S01.test.", 80) == ["127.0.77.1"]  # case, final dot
        assert names.dns_lookup("other.test", 80) == []
    finally:
        names.table.cache_clear()


def test_no_table_resolves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(names.DNS_TABLE_ENV, raising=False)
    names.table.cache_clear()
    try:
        assert names.dns_lookup("s01.test", 80) == []
    finally:
        names.table.cache_clear()
