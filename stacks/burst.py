"""The burst experiment: the on-prem/cloud site pair with Ray nodes managed through SSM."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.burst_sites import BurstSites, BurstSitesArgs
from components.data_bucket import DataBucket
from stacks import outputs
from stacks.config_types import SpotburstConfig
from vocab.burst import SITE_CLOUD, SITE_ONPREM
from vocab.ports import GCS_PORT


def build_burst(
    config: SpotburstConfig, bucket: DataBucket, tags: dict[str, str], provider: aws.Provider
) -> dict[str, pulumi.Input]:
    """Declare the burst sites; return the stack outputs the run and netem tasks need."""
    burst = config.burst
    assert burst is not None, "parse_config requires the burst section when burst is on"
    sites = BurstSites(
        "burst",
        BurstSitesArgs(
            onprem_cidr=burst.onprem_cidr,
            cloud_cidr=burst.cloud_cidr,
            instance_type=burst.instance_type,
            hpc_workers=burst.hpc_workers,
            cloud_nodes=burst.cloud_nodes,
            login_disk_gb=burst.login_disk_gb,
            worker_disk_gb=burst.worker_disk_gb,
            admin_cidrs=list(config.admin_cidrs),
            bucket_arn=bucket.bucket_arn,
            packages=list(config.node_packages),
            region=config.region,
            token_parameter_name=f"/{config.name_prefix}/burst/ray-token",
            tags=tags,
        ),
        opts=pulumi.ResourceOptions(providers={"aws": provider}),
    )
    return {
        outputs.BURST_INSTANCE_IDS: sites.instance_ids,
        outputs.BURST_PRIVATE_IPS: sites.private_ips,
        outputs.BURST_HEAD_ADDRESS: sites.head_ip.apply(lambda ip: f"{ip}:{GCS_PORT}"),
        outputs.BURST_SITE_CIDRS: {SITE_ONPREM: burst.onprem_cidr, SITE_CLOUD: burst.cloud_cidr},
        outputs.BURST_TOKEN_PARAMETER: sites.token_parameter_name,
        outputs.BURST_EFS: {
            site: {"fileSystemId": sites.file_system_ids[site], "mountIp": sites.mount_ips[site]}
            for site in (SITE_ONPREM, SITE_CLOUD)
        },
    }
