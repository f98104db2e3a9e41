"""HPC -> cloud bursting: the image and param-server workloads under two schedulers."""
