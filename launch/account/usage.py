"""How much of each quota other resources in the region already use.

A quota covers the whole account, so the stack gets only what the rest leaves. What already
belongs to the stack (an update of a deployed stack) is not counted: it is part of the need.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from launch.account.aws import AwsAccount, paginate, tag_map
from launch.account.leftovers import belongs_to
from launch.account.scale import (
    ELASTIC_IPS,
    NAT_GATEWAYS,
    VPCS,
    Capacity,
    Quota,
    load_vcpu_table,
    vcpu_quota,
)

_RUNNING = ("pending", "running")


def resolve_vcpus(ec2_client: Any, instance_types: Iterable[str]) -> dict[str, int]:
    """vCPUs per instance type: the dated table, and EC2's answer for types it lacks
    (types EC2 does not know stay missing: the quota check names them)."""
    table = load_vcpu_table()
    unknown = sorted(set(instance_types) - set(table))
    for name in unknown:
        try:
            found = ec2_client.describe_instance_types(InstanceTypes=[name])["InstanceTypes"]
        except ClientError:
            continue
        if found:
            table[name] = int(found[0]["VCpuInfo"]["DefaultVCpus"])
    return table


def usage_by_others(
    account: AwsAccount, stack: str, cluster_names: Sequence[str], vcpus: Mapping[str, int]
) -> Counter[Quota]:
    """Quota units in use in the region by resources that are not the stack's. An instance
    counts its type's default vCPUs (as the quotas do); a type EC2 cannot describe counts 0."""
    ec2 = account.client("ec2")
    usage: Counter[Quota] = Counter()
    instances = [
        instance
        for reservation in paginate(ec2, "describe_instances", "Reservations", Filters=[
            {"Name": "instance-state-name", "Values": list(_RUNNING)}
        ])
        for instance in reservation["Instances"]
    ]
    unknown = {str(i["InstanceType"]) for i in instances if i["InstanceType"] not in vcpus}
    vcpus = {**resolve_vcpus(ec2, unknown), **vcpus} if unknown else vcpus

    def others(items: Iterable[Any]) -> list[Any]:
        return [
            item for item in items
            if not belongs_to(tag_map(item.get("Tags")), stack, cluster_names)
        ]

    for instance in others(instances):
        capacity = (
            Capacity.SPOT if instance.get("InstanceLifecycle") == "spot" else Capacity.ON_DEMAND
        )
        quota = vcpu_quota(str(instance["InstanceType"]), capacity)
        if quota is not None:
            usage[quota] += vcpus.get(str(instance["InstanceType"]), 0)
    usage[VPCS] += len(others(paginate(ec2, "describe_vpcs", "Vpcs")))
    usage[ELASTIC_IPS] += len(others(ec2.describe_addresses()["Addresses"]))
    gateways = [
        gateway
        for gateway in others(paginate(ec2, "describe_nat_gateways", "NatGateways"))
        if gateway.get("State") in ("pending", "available")
    ]
    subnet_ids = sorted({str(gateway["SubnetId"]) for gateway in gateways})
    zone_of = {
        subnet["SubnetId"]: subnet["AvailabilityZone"]
        for subnet in (ec2.describe_subnets(SubnetIds=subnet_ids)["Subnets"] if subnet_ids else [])
    }
    per_zone = Counter(zone_of.get(str(gateway["SubnetId"]), "?") for gateway in gateways)
    # The stack's gateways may share the fullest zone: the worst case.
    usage[NAT_GATEWAYS] += max(per_zone.values(), default=0)
    return usage
