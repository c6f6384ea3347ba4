"""Helpers to generate Kineto traces for tests and benchmarks (no GPU needed)."""
