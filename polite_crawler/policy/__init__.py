"""Pure politeness rules: no Scrapy import anywhere in this package.

Each module is a small set of functions or classes that the Scrapy glue calls.
``tests/test_policy_purity.py`` fails if any of them imports scrapy or twisted.
"""
