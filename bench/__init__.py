"""Benchmarks: scripts that print figures and write JSON under bench/results/. Not tests."""
