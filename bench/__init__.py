"""Benchmarks. Each writes its figures to a results file; no test ever times anything."""
