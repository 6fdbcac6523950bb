"""Benchmarks of the worker engine (not part of the test suite); see docs/performance.md."""
