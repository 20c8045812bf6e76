"""Benchmarks: they print figures (``--json PATH`` also writes them as JSON) and assert nothing about
speed; runs that pass or fail are in ``checks/``, and what both share is in ``benchmarks/harness/``."""
