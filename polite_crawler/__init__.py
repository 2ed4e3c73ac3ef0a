"""polite_crawler: a Scrapy crawler whose cost a site owner would not notice."""

__version__ = "0.1.0"
