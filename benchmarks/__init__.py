"""Benchmarks: print figures, assert nothing about speed (see the README)."""
