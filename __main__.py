"""Pulumi entry point: read the validated config, build the enabled experiments, export outputs."""

import pulumi

from stacks.config import load_config
from stacks.program import build

for output_name, value in build(load_config()).items():
    pulumi.export(output_name, value)
