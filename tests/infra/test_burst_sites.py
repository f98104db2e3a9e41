"""The burst site pair: two private networks joined both ways, storage per site, Ray nodes."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest

from launch.offline import DeclaredResource, OfflineRun, run_offline
from stacks.config_types import BurstConfig
from vocab.burst import TRANSFER_RESOURCE
from vocab.ports import RayPorts

INSTANCE = "aws:ec2/instance:Instance"


def _vpc(run: OfflineRun, site: str) -> DeclaredResource:
    return run.one("aws:ec2/vpc:Vpc", f"burst-{site}-vpc")


def _instances(run: OfflineRun, role: str) -> list[DeclaredResource]:
    return [r for r in run.of_type(INSTANCE) if r.inputs["tags"].get("spotburst-role") == role]


def _subnet_of(run: OfflineRun, instance: DeclaredResource) -> DeclaredResource:
    (subnet,) = [
        s
        for s in run.of_type("aws:ec2/subnet:Subnet")
        if s.resource_id == instance.inputs["subnetId"]
    ]
    return subnet


def _burst(run: OfflineRun) -> BurstConfig:
    burst = run.config.burst
    assert burst is not None, "the stack declares no burst sites"
    return burst


def test_two_vpcs_with_the_configured_private_cidrs(dev_run: OfflineRun) -> None:
    burst = _burst(dev_run)
    assert _vpc(dev_run, "onprem").inputs["cidrBlock"] == burst.onprem_cidr == "10.0.0.0/16"
    assert _vpc(dev_run, "cloud").inputs["cidrBlock"] == burst.cloud_cidr == "10.1.0.0/16"


def test_onprem_has_nat_egress_and_the_cloud_site_a_public_subnet_only(dev_run: OfflineRun) -> None:
    nat_subnets = {
        nat.inputs["subnetId"] for nat in dev_run.of_type("aws:ec2/natGateway:NatGateway")
    }
    assert "burst-onprem-public-0-id" in nat_subnets
    cloud_subnets = [
        s.name
        for s in dev_run.of_type("aws:ec2/subnet:Subnet")
        if s.inputs["vpcId"] == _vpc(dev_run, "cloud").resource_id
    ]
    assert cloud_subnets == ["burst-cloud-public-0"]


def test_peering_routes_go_both_ways_from_every_route_table(dev_run: OfflineRun) -> None:
    peering = dev_run.one("aws:ec2/vpcPeeringConnection:VpcPeeringConnection")
    assert peering.inputs["autoAccept"] is True
    assert {peering.inputs["vpcId"], peering.inputs["peerVpcId"]} == {
        _vpc(dev_run, "onprem").resource_id,
        _vpc(dev_run, "cloud").resource_id,
    }
    routes = {
        (route.inputs["routeTableId"], route.inputs["destinationCidrBlock"])
        for route in dev_run.of_type("aws:ec2/route:Route")
        if route.inputs.get("vpcPeeringConnectionId") == peering.resource_id
    }
    cidrs = {"onprem": _burst(dev_run).onprem_cidr, "cloud": _burst(dev_run).cloud_cidr}
    for site, peer in (("onprem", "cloud"), ("cloud", "onprem")):
        tables = [
            t.resource_id
            for t in dev_run.of_type("aws:ec2/routeTable:RouteTable")
            if t.inputs["vpcId"] == _vpc(dev_run, site).resource_id
        ]
        assert tables, f"{site} has no route table"
        for table in tables:
            assert (table, cidrs[peer]) in routes, f"{table} has no route to {peer}"


def test_each_site_has_its_own_encrypted_efs_reachable_from_that_site_only(
    dev_run: OfflineRun,
) -> None:
    cidrs = {"onprem": _burst(dev_run).onprem_cidr, "cloud": _burst(dev_run).cloud_cidr}
    for site, cidr in cidrs.items():
        file_system = dev_run.one("aws:efs/fileSystem:FileSystem", f"burst-{site}-efs")
        assert file_system.inputs["encrypted"] is True
        targets = [
            t
            for t in dev_run.of_type("aws:efs/mountTarget:MountTarget")
            if t.inputs["fileSystemId"] == file_system.resource_id
        ]
        assert len(targets) == 1  # one per used availability zone; each site uses one
        (subnet,) = [
            s
            for s in dev_run.of_type("aws:ec2/subnet:Subnet")
            if s.resource_id == targets[0].inputs["subnetId"]
        ]
        assert subnet.inputs["vpcId"] == _vpc(dev_run, site).resource_id
        (nfs_group,) = targets[0].inputs["securityGroups"]
        nfs = next(
            g
            for g in dev_run.of_type("aws:ec2/securityGroup:SecurityGroup")
            if g.resource_id == nfs_group
        )
        assert nfs.inputs["vpcId"] == _vpc(dev_run, site).resource_id
        assert [(r["fromPort"], r["toPort"], r["cidrBlocks"]) for r in nfs.inputs["ingress"]] == [
            (2049, 2049, [cidr])
        ]


@pytest.mark.parametrize(
    ("role", "subnet", "public_ip"),
    [
        ("login", "burst-onprem-public-0", True),
        ("hpc", "burst-onprem-private-0", False),
        ("cloud", "burst-cloud-public-0", True),
    ],
)
def test_nodes_per_role_are_hardened_and_placed_in_their_site(
    dev_run: OfflineRun, role: str, subnet: str, public_ip: bool
) -> None:
    burst = _burst(dev_run)
    expected_count = {"login": 1, "hpc": burst.hpc_workers, "cloud": burst.cloud_nodes}[role]
    nodes = _instances(dev_run, role)
    assert len(nodes) == expected_count
    for node in nodes:
        assert node.inputs["instanceType"] == burst.instance_type
        assert node.inputs["ami"] == "ami-0123456789abcdef0"  # the looked-up AL2023 image
        assert node.inputs["metadataOptions"]["httpTokens"] == "required"
        assert node.inputs["rootBlockDevice"]["encrypted"] is True
        assert _subnet_of(dev_run, node).name == subnet
        assert bool(node.inputs.get("associatePublicIpAddress")) is public_ip
        assert node.inputs["iamInstanceProfile"] == "burst-nodes"


def test_node_counts_and_type_follow_config(dev_config: dict[str, str]) -> None:
    burst = json.loads(dev_config["spotburst:burst"])
    burst.update(hpcWorkers=3, cloudNodes=2, instanceType="m5.4xlarge")
    run = run_offline({**dev_config, "spotburst:burst": json.dumps(burst)})
    assert [len(_instances(run, role)) for role in ("login", "hpc", "cloud")] == [1, 3, 2]
    assert {node.inputs["instanceType"] for node in run.of_type(INSTANCE)} == {"m5.4xlarge"}


def test_node_role_is_ssm_managed_and_reaches_only_the_stack_bucket(dev_run: OfflineRun) -> None:
    attached = {
        a.inputs["policyArn"]
        for a in dev_run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == "burst-nodes"
    }
    assert attached == {"arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"}
    policy = json.loads(
        dev_run.one("aws:iam/rolePolicy:RolePolicy", "burst-nodes-bucket").inputs["policy"]
    )
    bucket_arn = f"arn:aws:s3:::{dev_run.outputs['bucketName']}"
    assert {s["Resource"] for s in policy["Statement"]} == {bucket_arn, f"{bucket_arn}/*"}


def _ray_group(run: OfflineRun, site: str) -> DeclaredResource:
    return run.one("aws:ec2/securityGroup:SecurityGroup", f"burst-{site}-ray")


def test_ray_ports_are_open_between_the_site_cidrs_only_and_ssh_is_closed(
    dev_config: dict[str, str],
) -> None:
    # dev_run plans with the documentation-range adminCidrs (tests/infra/conftest.py); the
    # shipped default has none: SSH closed, as with apiEndpoint private and no adminCidrs.
    closed = {**dev_config, "spotburst:adminCidrs": "[]", "spotburst:apiEndpoint": "private"}
    run = run_offline(closed)
    cidrs = sorted([_burst(run).onprem_cidr, _burst(run).cloud_cidr])
    for site in ("onprem", "cloud"):
        ingress = _ray_group(run, site).inputs["ingress"]
        ranges = {(rule["fromPort"], rule["toPort"]) for rule in ingress}
        assert ranges == set(RayPorts().between_nodes())
        assert all(sorted(rule["cidrBlocks"]) == cidrs for rule in ingress)
        assert not any(rule["fromPort"] <= 22 <= rule["toPort"] for rule in ingress)


def test_ssh_opens_to_admin_cidrs_when_configured(dev_config: dict[str, str]) -> None:
    run = run_offline({**dev_config, "spotburst:adminCidrs": '["203.0.113.0/28"]'})
    for site in ("onprem", "cloud"):
        ssh = [r for r in _ray_group(run, site).inputs["ingress"] if r["fromPort"] == 22]
        assert [rule["cidrBlocks"] for rule in ssh] == [["203.0.113.0/28"]]


def _user_data(run: OfflineRun, role: str) -> str:
    user_data: str = _instances(run, role)[0].inputs["userData"]
    return user_data


def _ray_start(user_data: str) -> str:
    (line,) = [
        line for line in user_data.splitlines() if line.startswith("exec ") and " start " in line
    ]
    return line


@pytest.mark.parametrize(
    ("role", "site"), [("login", "onprem"), ("hpc", "onprem"), ("cloud", "cloud")]
)
def test_user_data_installs_the_pinned_ray_and_mounts_its_sites_efs_by_ip(
    dev_run: OfflineRun, role: str, site: str
) -> None:
    user_data = _user_data(dev_run, role)
    assert f"'ray[default]=={version('ray')}'" in user_data
    assert f"numpy=={version('numpy')}" in user_data
    mount_ip = dev_run.outputs["burstEfs"][site]["mountIp"]
    other_ip = dev_run.outputs["burstEfs"]["cloud" if site == "onprem" else "onprem"]["mountIp"]
    assert f"'{mount_ip}:/ /home/ec2-user/share nfs4" in user_data
    assert other_ip not in user_data
    assert json.dumps({"role": role, "site": site}) in user_data
    assert "systemctl enable --now spotburst-ray.service" in user_data
    assert "iproute-tc" in user_data and "kernel-modules-extra" in user_data  # for invoke netem
    assert "Restart=always" in user_data
    assert f"--labels=site={site},role={role}" in _ray_start(user_data)


def test_the_login_node_is_the_head_with_a_tunnel_only_dashboard(dev_run: OfflineRun) -> None:
    start = _ray_start(_user_data(dev_run, "login"))
    assert " --head " in start
    assert "--dashboard-host=127.0.0.1" in start
    assert TRANSFER_RESOURCE not in start


@pytest.mark.parametrize("role", ["hpc", "cloud"])
def test_other_nodes_join_the_head_with_one_transfer_slot(dev_run: OfflineRun, role: str) -> None:
    start = _ray_start(_user_data(dev_run, role))
    head_ip = dev_run.outputs["burstPrivateIps"]["login"][0]
    assert f"--address={head_ip}:6379" in start
    assert "--head" not in start
    (resources,) = re.findall(r"'--resources=(\{.*?\})'", start)
    assert json.loads(resources) == {TRANSFER_RESOURCE: 1}
    assert "--num-cpus=16" in start  # the instance type's vCPUs, looked up
    assert '--node-ip-address="$NODE_IP"' in start


def test_outputs_for_the_run_and_netem_tasks(dev_run: OfflineRun) -> None:
    outputs = dev_run.outputs
    ids, ips = outputs["burstInstanceIds"], outputs["burstPrivateIps"]
    assert set(ids) == set(ips) == {"login", "hpc", "cloud"}
    assert [len(ids[role]) for role in ("login", "hpc", "cloud")] == [1, 1, 1]
    assert outputs["burstHeadAddress"] == f"{ips['login'][0]}:6379"
    assert outputs["burstSiteCidrs"] == {"onprem": "10.0.0.0/16", "cloud": "10.1.0.0/16"}
    assert set(outputs["burstEfs"]) == {"onprem", "cloud"}
    assert {"bucketName", "region"} <= set(outputs)
