"""Benchmarks: scripts that print measured ratios, run from the project's environment as
`python -m benchmarks.<name>` (doll_cost, burst_speedup)."""
