"""Benchmarks: figures for the notes, never timed tests. ``make bench`` runs them all."""
