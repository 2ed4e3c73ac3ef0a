"""Scrapy extensions of polite_crawler."""
