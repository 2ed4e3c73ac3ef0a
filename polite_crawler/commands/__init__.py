"""Scrapy commands for the operator: ``crawl`` (checked before it starts), ``explain``,
``forget``, ``history``, ``report`` and ``unblock``.

Registered through the ``scrapy.commands`` entry point (pyproject.toml), so they
work in any project that installs polite_crawler, and through ``COMMANDS_MODULE``
in this project's settings. Every command reads the same shared state the crawl
uses (``POLITE_STATE_DIR``: the origin store, the robots.txt cache, the page store
or ``POLITE_STORE``, the access logs), prints plain text, or JSON with ``--json``.

Bad input (an origin that is not http(s), a missing or locked store, a job that does
not exist) is one line on stderr and exit status 2, and nothing is changed.

The shared parts live in :mod:`polite_crawler.commands._base`; every other module
of this package holds exactly one command, named as the module (Scrapy's rule for a
``COMMANDS_MODULE``).
"""
