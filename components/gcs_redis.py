"""The Redis a RayCluster's GCS keeps its state in (KubeRay `gcsFaultToleranceOptions`), so
the cluster survives the loss of its head: the new head reloads actors, placement groups and
nodes from Redis, and running workers and actors carry on meanwhile.

ElastiCache for Redis, private: a primary and a replica in two zones with automatic failover
(Ray's docs ask for an HA Redis), encrypted in transit (TLS, `rediss://`) and at rest, an AUTH
password generated per stack, reachable on its port only from the spot cluster's private
subnets (where every node and pod of the cluster lives), never from outside the VPC.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_random as random

REDIS_PORT = 6379
PASSWORD_LENGTH = 48
NODE_TYPE = "cache.t4g.small"
NODE_COUNT = 2
"""A primary and a replica (automatic failover needs one); each is billed per node-hour,
priced by `vocab/prices.json`'s `elasticache` table in the plan and the maxHourlyUsd ceiling."""
"""ElastiCache AUTH tokens: 16 to 128 printable characters; letters and digits only here."""


@dataclass
class GcsRedisArgs:
    vpc_id: pulumi.Input[str]
    subnet_ids: list[pulumi.Output[str]]
    client_cidrs: list[str]
    """The only sources that may open a connection: the cluster's private subnets."""
    node_type: str = NODE_TYPE
    engine_version: str = "7.1"
    tags: dict[str, str] = field(default_factory=dict)


def redis_address(host: str) -> str:
    """Ray's Redis address; the `rediss` scheme makes the GCS speak TLS."""
    return f"rediss://{host}:{REDIS_PORT}"


class GcsRedis(pulumi.ComponentResource):
    address: pulumi.Output[str]
    password: pulumi.Output[str]

    def __init__(self, name: str, args: GcsRedisArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotburst:kuberay:GcsRedis", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        password = random.RandomPassword(
            f"{name}-password", length=PASSWORD_LENGTH, special=False, opts=child
        )
        group = aws.ec2.SecurityGroup(
            name,
            vpc_id=args.vpc_id,
            description="GCS Redis: its port from the spot cluster's private subnets only",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp",
                    from_port=REDIS_PORT,
                    to_port=REDIS_PORT,
                    cidr_blocks=list(args.client_cidrs),
                    description="Ray GCS of the spot cluster",
                )
            ],
            egress=[],
            tags=args.tags,
            opts=child,
        )
        subnets = aws.elasticache.SubnetGroup(
            name,
            subnet_ids=args.subnet_ids,
            description="Private subnets of the spot cluster",
            tags=args.tags,
            opts=child,
        )
        replication = aws.elasticache.ReplicationGroup(
            name,
            description="GCS fault tolerance of a RayCluster",
            engine="redis",
            engine_version=args.engine_version,
            node_type=args.node_type,
            port=REDIS_PORT,
            num_cache_clusters=NODE_COUNT,
            automatic_failover_enabled=True,
            multi_az_enabled=True,
            transit_encryption_enabled=True,
            at_rest_encryption_enabled=True,
            auth_token=password.result,
            subnet_group_name=subnets.name,
            security_group_ids=[group.id],
            apply_immediately=True,
            tags=args.tags,
            opts=child,
        )
        self.address = replication.primary_endpoint_address.apply(redis_address)
        self.password = pulumi.Output.secret(password.result)
        self.register_outputs({"address": self.address})
