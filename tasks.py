"""spotburst's only command line: `invoke --list` shows every task.

Each task parses its flags, calls one function of `launch/` and prints the result.
"""

from __future__ import annotations

from invoke import task  # noqa: F401

# --- infrastructure (Pulumi) -------------------------------------------------------------

# --- DOLL ---------------------------------------------------------------------------------

# --- network emulation and the local two-site lab -----------------------------------------

# --- burst ----------------------------------------------------------------------------------
