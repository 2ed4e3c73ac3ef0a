"""Durable state: where it lives, and the page store."""
