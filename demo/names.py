"""Names for loopback crawls run as separate processes: a table of host names and the
addresses they resolve to, read by the crawler's injectable lookup
(``POLITE_DNS_LOOKUP=demo.names.dns_lookup``), so many names can share one 127.x
address without editing the system's files or asking a DNS server.

The table is a JSON file (name -> list of addresses) named by the environment variable
``DEMO_DNS_TABLE``, read once per process; a name not in it resolves to nothing. The
benches (``bench.shared_servers``) and the tests that start crawler processes
(``tests/test_cluster_shared_server_crawl.py``) write it and set the variable.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

# The environment variable naming the table's file.
DNS_TABLE_ENV = "DEMO_DNS_TABLE"


@functools.cache
def table() -> dict[str, list[str]]:
    """The table named by ``DEMO_DNS_TABLE`` (empty when it is not set)."""
    path = os.environ.get(DNS_TABLE_ENV, "")
    found: dict[str, list[str]] = json.loads(Path(path).read_text()) if path else {}
    return found


def dns_lookup(name: str, port: int) -> list[str]:
    """The addresses of ``name`` in the table (``POLITE_DNS_LOOKUP``'s signature: the
    port is not used); [] for a name not in it."""
    return list(table().get(name.lower().rstrip("."), []))


def write_table(path: Path, names: dict[str, list[str]]) -> dict[str, str]:
    """Write the table to ``path``; the environment entry a process needs to read it."""
    path.write_text(json.dumps(names))
    return {DNS_TABLE_ENV: str(path)}
