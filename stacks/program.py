"""The whole stack program: the shared bucket, then every experiment the config enables."""

from __future__ import annotations

import pulumi

from components.data_bucket import DataBucket, DataBucketArgs
from stacks.burst import build_burst
from stacks.config import PROJECT, SpotburstConfig
from stacks.doll import build_doll

EXPERIMENTS = {"doll": build_doll, "burst": build_burst}


def build(config: SpotburstConfig) -> dict[str, pulumi.Input]:
    """Declare everything; return the stack outputs."""
    tags = {"project": PROJECT, "stack": config.stack}
    bucket = DataBucket(
        "data",
        DataBucketArgs(
            name_prefix=config.name_prefix,
            force_destroy=config.bucket.force_destroy,
            versioning=config.bucket.versioning,
            expire_results_after_days=config.bucket.expire_results_after_days,
            tags=tags,
        ),
    )
    outputs: dict[str, pulumi.Input] = {
        "region": config.region,
        "bucketName": bucket.bucket_name,
        "experiments": list(config.experiments),
        "rayVersion": config.ray_version,
    }
    for experiment in config.experiments:
        outputs.update(EXPERIMENTS[experiment](config, bucket, tags))
    return outputs
