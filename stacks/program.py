"""The whole stack program: the shared bucket, then every experiment the config enables."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.data_bucket import DataBucket, DataBucketArgs
from stacks import outputs
from stacks.burst import build_burst
from stacks.config_types import PROJECT, SpotburstConfig
from stacks.spot_cluster import build_spot_cluster
from vocab.tags import stack_tags


def build(config: SpotburstConfig) -> dict[str, pulumi.Input]:
    """Declare everything; return the stack outputs."""
    tags = {"project": PROJECT, "stack": config.stack}
    # Every AWS resource goes through this provider, whose default tags mark it as the
    # stack's: the leftover listing after `invoke destroy` finds exactly what is ours.
    provider = aws.Provider(
        "aws",
        region=config.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=stack_tags(config.stack)),
    )
    on_aws = pulumi.ResourceOptions(providers={"aws": provider})
    bucket = DataBucket(
        "data",
        DataBucketArgs(
            name_prefix=config.name_prefix,
            force_destroy=config.bucket.force_destroy,
            versioning=config.bucket.versioning,
            expire_results_after_days=config.bucket.expire_results_after_days,
            tags=tags,
        ),
        opts=on_aws,
    )
    exported: dict[str, pulumi.Input] = {
        outputs.REGION: config.region,
        outputs.BUCKET_NAME: bucket.bucket_name,
        outputs.EXPERIMENTS: list(config.experiments),
        outputs.RAY_VERSION: config.ray_version,
    }
    if config.ray_clusters:
        exported.update(build_spot_cluster(config, bucket, tags, provider))
    if config.burst is not None and "burst" in config.experiments:
        exported.update(build_burst(config, bucket, tags, provider))
    return exported
