"""The cluster vocabulary shared by stacks, components, labs and workloads.

Pure constants and functions (no Ray, no Pulumi): node roles and labels (`burst`), every
port a Ray node uses (`ports`) and the `ray start` line (`ray_start`).
"""
