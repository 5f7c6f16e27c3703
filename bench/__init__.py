"""Benchmarks of the engine on a real broker: `python bench/run.py SCENARIO [--quick]`."""
