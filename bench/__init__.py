"""Reproducible benchmarks: each prints its figures and the machine it ran on."""
