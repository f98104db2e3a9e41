"""Ray programs runnable as `python -m workloads.<name>`, identically on any target."""
