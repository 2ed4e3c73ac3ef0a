"""Scrapy glue: thin components that read settings, call polite_crawler.policy and record stats."""
