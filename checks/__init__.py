"""Checks: runs that pass or fail (exit status 1 on a failure), where the benchmarks only print figures."""
