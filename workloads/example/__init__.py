"""The smallest whole workload, to copy when adding one (docs/adding-a-workload.md): π from
random points drawn by Ray tasks. Its options (one spec), its run (`python -m
workloads.example`, results through the one writer) and its launcher (`run_example`: the
local default, `--address` or `--stack`, as every run task has them)."""
