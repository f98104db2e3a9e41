"""What is still billable after `pulumi destroy`, with the AWS CLI command that deletes it.

A resource is the stack's when it carries the stack's tag (`vocab/tags.py`) or the name of
one of its EKS clusters: Kubernetes tags the load balancers and volumes it creates on its own
with `kubernetes.io/cluster/<name>`, which Pulumi never sees and so never deletes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from launch.account.aws import AwsAccount, paginate, tag_map
from vocab.tags import STACK_TAG_KEY, carries_stack_tag

# Tags that name the cluster a resource was made for, as each AWS/Kubernetes creator writes it.
_CLUSTER_VALUE_TAGS = ("eks:cluster-name", "aws:eks:cluster-name", "elbv2.k8s.aws/cluster",
                       "KubernetesCluster")
_ELB_TAG_BATCH = 20  # DescribeTags takes at most 20 load balancers per call


@dataclass(frozen=True)
class Leftover:
    kind: str
    resource_id: str
    state: str
    why: str  # which tag or cluster name makes it the stack's
    delete_command: str


@dataclass
class LeftoverReport:
    region: str
    stack: str
    cluster_names: tuple[str, ...]
    leftovers: list[Leftover] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # kinds that could not be listed, why

    @property
    def clean(self) -> bool:
        return not self.leftovers and not self.unchecked


def belongs_to(tags: Mapping[str, str], stack: str, cluster_names: Sequence[str]) -> str | None:
    """Why a resource with `tags` is the stack's, or None when it is not."""
    if carries_stack_tag(tags, stack):
        return f"tag {STACK_TAG_KEY}={stack}" if STACK_TAG_KEY in tags else f"tag stack={stack}"
    for cluster in cluster_names:
        if f"kubernetes.io/cluster/{cluster}" in tags or any(
            tags.get(key) == cluster for key in _CLUSTER_VALUE_TAGS
        ):
            return f"cluster {cluster}{_kubernetes_object(tags)}"
    return None


def _kubernetes_object(tags: Mapping[str, str]) -> str:
    """The Kubernetes object that made the resource, as its creator tagged it."""
    claim = tags.get("kubernetes.io/created-for/pvc/name")
    if claim:
        namespace = tags.get("kubernetes.io/created-for/pvc/namespace")
        return f", made for PVC {namespace + '/' if namespace else ''}{claim}"
    service = tags.get("kubernetes.io/service-name")
    return f", made for Service {service}" if service else ""


def find_leftovers(account: AwsAccount, stack: str, cluster_names: Sequence[str]) -> LeftoverReport:
    """Everything billable in the account's region that is the stack's (see `belongs_to`)."""
    if not account.region:
        raise ValueError("the leftover listing needs the stack's region (aws:region)")
    report = LeftoverReport(account.region, stack, tuple(cluster_names))
    listers: list[tuple[str, Callable[[], Iterator[Leftover]]]] = [
        ("EC2 instances", lambda: _instances(account, stack, cluster_names)),
        ("NAT gateways", lambda: _nat_gateways(account, stack, cluster_names)),
        ("Elastic IPs", lambda: _elastic_ips(account, stack, cluster_names)),
        ("load balancers", lambda: _load_balancers(account, stack, cluster_names)),
        ("classic load balancers", lambda: _classic_load_balancers(account, stack, cluster_names)),
        ("EBS volumes", lambda: _volumes(account, stack, cluster_names)),
        ("EKS clusters", lambda: _eks_clusters(account, stack, cluster_names)),
        ("EFS file systems", lambda: _file_systems(account, stack, cluster_names)),
    ]
    for kind, lister in listers:
        try:
            report.leftovers.extend(lister())
        except (ConnectionClosedError, EndpointConnectionError, ConnectTimeoutError,
                ReadTimeoutError):
            raise  # the endpoint itself does not answer: the listing ends in one line
        except (BotoCoreError, ClientError) as error:
            report.unchecked.append(f"{kind}: {error}")
    return report


def render_leftovers(report: LeftoverReport) -> str:
    owner = f"stack {report.stack!r}" + "".join(
        f" / cluster {name}" for name in report.cluster_names
    )
    if report.clean:
        return (
            f"nothing left: no EC2 instance, NAT gateway, Elastic IP, load balancer, EBS volume, "
            f"EKS cluster or EFS file system of {owner} in {report.region}"
        )
    lines = []
    if report.leftovers:
        lines.append(f"still billable in {report.region}, left by {owner}:")
        for item in report.leftovers:
            lines.append(f"  {item.kind} {item.resource_id} ({item.state}; {item.why})")
            lines.append(f"    delete: {item.delete_command}")
    for unchecked in report.unchecked:
        lines.append(f"  not checked, list it yourself: {unchecked}")
    return "\n".join(lines)


# --- one lister per kind ----------------------------------------------------------------------


def _owned(
    items: Iterable[Any], stack: str, clusters: Sequence[str]
) -> Iterator[tuple[Any, str]]:
    """Each item (with EC2-style `Tags`) that is the stack's, and why."""
    for item in items:
        why = belongs_to(tag_map(item.get("Tags")), stack, clusters)
        if why:
            yield item, why


def _instances(account: AwsAccount, stack: str, clusters: Sequence[str]) -> Iterator[Leftover]:
    reservations = paginate(account.client("ec2"), "describe_instances", "Reservations")
    instances = (instance for reservation in reservations for instance in reservation["Instances"])
    for instance, why in _owned(instances, stack, clusters):
        state = instance["State"]["Name"]
        if state != "terminated":
            instance_id = instance["InstanceId"]
            yield Leftover("EC2 instance", instance_id, state, why,
                           f"aws ec2 terminate-instances --region {account.region} "
                           f"--instance-ids {instance_id}")


def _nat_gateways(account: AwsAccount, stack: str, clusters: Sequence[str]) -> Iterator[Leftover]:
    gateways = paginate(account.client("ec2"), "describe_nat_gateways", "NatGateways")
    for gateway, why in _owned(gateways, stack, clusters):
        if gateway["State"] not in ("deleted", "failed"):
            gateway_id = gateway["NatGatewayId"]
            yield Leftover("NAT gateway", gateway_id, gateway["State"], why,
                           f"aws ec2 delete-nat-gateway --region {account.region} "
                           f"--nat-gateway-id {gateway_id}")


def _elastic_ips(account: AwsAccount, stack: str, clusters: Sequence[str]) -> Iterator[Leftover]:
    addresses = account.client("ec2").describe_addresses()["Addresses"]
    for address, why in _owned(addresses, stack, clusters):
        allocation = address["AllocationId"]
        release = (f"aws ec2 release-address --region {account.region} "
                   f"--allocation-id {allocation}")
        association = address.get("AssociationId")
        if association:
            release = (f"aws ec2 disassociate-address --region {account.region} "
                       f"--association-id {association} && {release}")
        state = "associated" if association else "unassociated"
        yield Leftover("Elastic IP", f"{address.get('PublicIp', '?')} ({allocation})", state,
                       why, release)


def _load_balancers(account: AwsAccount, stack: str, clusters: Sequence[str]) -> Iterator[Leftover]:
    elbv2 = account.client("elbv2")
    balancers = list(paginate(elbv2, "describe_load_balancers", "LoadBalancers"))
    arns = [balancer["LoadBalancerArn"] for balancer in balancers]
    tags: dict[str, dict[str, str]] = {}
    for start in range(0, len(arns), _ELB_TAG_BATCH):
        described = elbv2.describe_tags(ResourceArns=arns[start : start + _ELB_TAG_BATCH])
        for entry in described["TagDescriptions"]:
            tags[entry["ResourceArn"]] = tag_map(entry.get("Tags"))
    for balancer in balancers:
        arn = balancer["LoadBalancerArn"]
        why = belongs_to(tags.get(arn, {}), stack, clusters)
        if why:
            kind = f"{balancer.get('Type', 'application')} load balancer"
            yield Leftover(kind, balancer["LoadBalancerName"],
                           balancer.get("State", {}).get("Code", "?"), why,
                           f"aws elbv2 delete-load-balancer --region {account.region} "
                           f"--load-balancer-arn {arn}")


def _classic_load_balancers(
    account: AwsAccount, stack: str, clusters: Sequence[str]
) -> Iterator[Leftover]:
    elb = account.client("elb")
    names = [
        balancer["LoadBalancerName"]
        for balancer in paginate(elb, "describe_load_balancers", "LoadBalancerDescriptions")
    ]
    for start in range(0, len(names), _ELB_TAG_BATCH):
        described = elb.describe_tags(LoadBalancerNames=names[start : start + _ELB_TAG_BATCH])
        for entry, why in _owned(described["TagDescriptions"], stack, clusters):
            name = entry["LoadBalancerName"]
            yield Leftover("classic load balancer", name, "active", why,
                           f"aws elb delete-load-balancer --region {account.region} "
                           f"--load-balancer-name {name}")


def _volumes(account: AwsAccount, stack: str, clusters: Sequence[str]) -> Iterator[Leftover]:
    volumes = paginate(account.client("ec2"), "describe_volumes", "Volumes")
    for volume, why in _owned(volumes, stack, clusters):
        state = volume["State"]
        if state in ("deleting", "deleted"):
            continue
        volume_id = volume["VolumeId"]
        delete = f"aws ec2 delete-volume --region {account.region} --volume-id {volume_id}"
        if state == "in-use":
            delete = (f"aws ec2 detach-volume --region {account.region} --volume-id {volume_id} "
                      f"&& aws ec2 wait volume-available --region {account.region} "
                      f"--volume-ids {volume_id} && {delete}")
        yield Leftover("EBS volume", f"{volume_id} ({volume['Size']} GiB)", state, why, delete)


def _eks_clusters(account: AwsAccount, stack: str, clusters: Sequence[str]) -> Iterator[Leftover]:
    eks = account.client("eks")
    for name in paginate(eks, "list_clusters", "clusters"):
        cluster = eks.describe_cluster(name=name)["cluster"]
        why = f"cluster {name}" if name in clusters else belongs_to(
            cluster.get("tags") or {}, stack, clusters
        )
        if not why:
            continue
        region = account.region
        steps = []
        for group in paginate(eks, "list_nodegroups", "nodegroups", clusterName=name):
            steps.append(f"aws eks delete-nodegroup --region {region} --cluster-name {name} "
                         f"--nodegroup-name {group}")
            steps.append(f"aws eks wait nodegroup-deleted --region {region} --cluster-name {name} "
                         f"--nodegroup-name {group}")
        steps.append(f"aws eks delete-cluster --region {region} --name {name}")
        yield Leftover("EKS cluster", name, cluster.get("status", "?"), why, " && ".join(steps))


def _file_systems(account: AwsAccount, stack: str, clusters: Sequence[str]) -> Iterator[Leftover]:
    efs = account.client("efs")
    for system, why in _owned(paginate(efs, "describe_file_systems", "FileSystems"), stack,
                              clusters):
        state = system["LifeCycleState"]
        if state in ("deleting", "deleted"):
            continue
        system_id = system["FileSystemId"]
        region = account.region
        targets = efs.describe_mount_targets(FileSystemId=system_id)["MountTargets"]
        steps = [f"aws efs delete-mount-target --region {region} --mount-target-id "
                 f"{target['MountTargetId']}" for target in targets]
        if targets:  # the file system can go only once its mount targets are gone
            steps.append(
                f"until [ \"$(aws efs describe-mount-targets --region {region} --file-system-id "
                f"{system_id} --query 'length(MountTargets)')\" = 0 ]; do sleep 5; done"
            )
        steps.append(f"aws efs delete-file-system --region {region} --file-system-id {system_id}")
        # Data is what the stack's shared folder held: gone with the file system.
        size = (system.get("SizeInBytes") or {}).get("Value")
        if size is not None:
            state = f"{state}, holding {int(size)} bytes of data"
        yield Leftover("EFS file system", system_id, state, why, " && ".join(steps))
