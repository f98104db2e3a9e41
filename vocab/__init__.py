"""The cluster vocabulary shared by stacks, components, labs and workloads.

Pure constants and functions (no Ray, no Pulumi): node roles and labels (`burst`), every
port a Ray node uses (`ports`), the `ray start` line (`ray_start`) and the two kinds of
error every task ends with (`errors`).
"""
