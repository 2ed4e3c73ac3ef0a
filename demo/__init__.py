"""The demo crawls and the demo and test web (not installed with the crawler).

``python -m demo`` (``make demo``) crawls the demo web (:mod:`demo.crawl`);
``python -m demo.cluster`` (``make cluster-demo``) crawls it with two workers
sharing a Redis frontier. :mod:`demo.web` is the multi-host web on loopback the demo
and the tests crawl. The installed package, ``polite_crawler``, holds the crawler only.
"""
