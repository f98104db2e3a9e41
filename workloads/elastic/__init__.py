"""Elastic data-parallel training on spot nodes (issue 12): Ray Train V2 with the spot notice
wired into the training loop (workloads/elastic/loop.py is the script's contract)."""
