"""Spiders. Every spider here (or in any project with the add-on) inherits the politeness."""
