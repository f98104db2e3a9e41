"""The stack's shared data on the spot cluster: one encrypted EFS file system, reachable by
NFS from the cluster's nodes only, mounted through the EFS CSI driver in every Ray pod."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.iam_documents import EFS_CLIENT_ACTIONS, EFS_CSI_DESCRIBES
from launch.offline import MOCK_ACCOUNT, OfflineRun, run_offline
from launch.plan import render_plan
from stacks import outputs
from stacks.config import parse_config
from stacks.costs import SHARED_STORAGE_ITEM, hourly_cost
from stacks.fields import ConfigError
from vocab.prices import load_price_table
from vocab.shared_data import SHARED_ENV, SHARED_MOUNT_PATH

FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SUBNET = "aws:ec2/subnet:Subnet"
ADDON = "aws:eks/addon:Addon"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
VOLUME = "kubernetes:core/v1:PersistentVolume"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
CLUSTER_SG = "spotburst-dev-spot-eks-sg"
"""What the mocked EKS reports as its cluster security group: the managed nodes' group."""


def _spot_file_systems(run: OfflineRun) -> list[Any]:
    return [fs for fs in run.of_type(FILE_SYSTEM) if not fs.name.startswith("burst-")]


def _with_spot(dev_config: dict[str, str], **changes: Any) -> dict[str, str]:
    spot = json.loads(dev_config["spotburst:spotCluster"])
    return {**dev_config, "spotburst:spotCluster": json.dumps({**spot, **changes})}


def test_one_encrypted_file_system_with_a_mount_target_in_each_private_subnet(
    dev_run: OfflineRun,
) -> None:
    (file_system,) = _spot_file_systems(dev_run)
    assert file_system.inputs["encrypted"] is True
    assert file_system.inputs["throughputMode"] == "elastic"
    assert {"transitionToIa": "AFTER_30_DAYS"} in file_system.inputs["lifecyclePolicies"]
    private = sorted(s.resource_id for s in dev_run.of_type(SUBNET)
                     if s.name.startswith("spot-cluster-private-"))
    assert len(private) == dev_run.config.spot_cluster.az_count  # type: ignore[union-attr]
    targets = [t for t in dev_run.of_type(MOUNT_TARGET)
               if t.inputs["fileSystemId"] == file_system.resource_id]
    assert sorted(t.inputs["subnetId"] for t in targets) == private
    assert dev_run.outputs[outputs.SHARED_FILE_SYSTEM] == file_system.resource_id


def test_nfs_is_admitted_only_from_the_node_security_group(dev_run: OfflineRun) -> None:
    (file_system,) = _spot_file_systems(dev_run)
    groups = {
        group
        for t in dev_run.of_type(MOUNT_TARGET)
        if t.inputs["fileSystemId"] == file_system.resource_id
        for group in t.inputs["securityGroups"]
    }
    (nfs,) = [g for g in dev_run.of_type(SECURITY_GROUP) if g.resource_id in groups]
    (rule,) = nfs.inputs["ingress"]
    assert (rule["protocol"], rule["fromPort"], rule["toPort"]) == ("tcp", 2049, 2049)
    assert rule["securityGroups"] == [CLUSTER_SG]
    assert not rule.get("cidrBlocks") and not rule.get("ipv6CidrBlocks")


def test_the_csi_driver_runs_with_a_role_scoped_to_this_file_system(
    dev_run: OfflineRun,
) -> None:
    (file_system,) = _spot_file_systems(dev_run)
    (access_point,) = dev_run.of_type(ACCESS_POINT)
    assert access_point.inputs["fileSystemId"] == file_system.resource_id
    assert access_point.inputs["posixUser"] == {"uid": 1000, "gid": 100}
    (addon,) = dev_run.of_type(ADDON)
    assert addon.inputs["addonName"] == "aws-efs-csi-driver"
    node_groups = {group.urn for group in dev_run.of_type("eks:index:ManagedNodeGroup")}
    assert node_groups and node_groups <= set(addon.dependencies)  # its pods need nodes
    assert addon.inputs["clusterName"] == "spotburst-dev-spot"
    (role,) = [r for r in dev_run.of_type(ROLE)
               if addon.inputs["serviceAccountRoleArn"].endswith(f":{r.name}")]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    subjects = [v for k, v in trust["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    assert subjects == ["system:serviceaccount:kube-system:efs-csi-controller-sa"]
    (policy,) = [p for p in dev_run.of_type(ROLE_POLICY) if p.inputs["role"] == role.resource_id]
    def arn(resource: Any) -> str:  # as the mocks make ARNs
        return f"arn:aws:efs:{dev_run.config.region}:{MOCK_ACCOUNT}:{resource.name}"

    statements = json.loads(policy.inputs["policy"])["Statement"]
    granted = {action for s in statements for action in s["Action"]}
    assert granted == {*EFS_CSI_DESCRIBES, *EFS_CLIENT_ACTIONS}
    for statement in statements:
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        assert set(resources) <= {arn(file_system), arn(access_point)}, statement
        if set(statement["Action"]) & set(EFS_CLIENT_ACTIONS):
            pinned = statement["Condition"]["ArnEquals"]["elasticfilesystem:AccessPointArn"]
            assert pinned == arn(access_point)


def test_every_raycluster_pod_mounts_a_read_write_many_claim(dev_run: OfflineRun) -> None:
    (file_system,) = _spot_file_systems(dev_run)
    (access_point,) = dev_run.of_type(ACCESS_POINT)
    (storage_class,) = dev_run.of_type(STORAGE_CLASS)
    assert storage_class.inputs["provisioner"] == "efs.csi.aws.com"
    volumes = {v.inputs["spec"]["claimRef"]["namespace"]: v for v in dev_run.of_type(VOLUME)}
    claims = {c.inputs["metadata"]["namespace"]: c for c in dev_run.of_type(CLAIM)}
    rayclusters = dev_run.of_type(RAYCLUSTER)
    assert set(volumes) == set(claims) == {rc.inputs["metadata"]["namespace"]
                                           for rc in rayclusters}
    for namespace, claim in claims.items():
        volume = volumes[namespace].inputs["spec"]
        assert volume["accessModes"] == claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
        assert volume["csi"] == {"driver": "efs.csi.aws.com",
                                 "volumeHandle": f"{file_system.resource_id}::"
                                                 f"{access_point.resource_id}"}
        assert volume["claimRef"]["name"] == claim.inputs["metadata"]["name"]
        assert claim.inputs["spec"]["volumeName"] == volumes[namespace].inputs["metadata"]["name"]
    for rc in rayclusters:
        claim = claims[rc.inputs["metadata"]["namespace"]]
        assert claim.urn in rc.dependencies
        spec = rc.inputs["spec"]
        pods = [spec["headGroupSpec"]["template"]["spec"]] + [
            group["template"]["spec"] for group in spec["workerGroupSpecs"]]
        for pod in pods:
            (volume,) = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
            assert volume["persistentVolumeClaim"]["claimName"] == claim.inputs["metadata"]["name"]
            ray = pod["containers"][0]
            (mount,) = [m for m in ray["volumeMounts"] if m["name"] == volume["name"]]
            assert mount == {"name": volume["name"], "mountPath": SHARED_MOUNT_PATH}
            assert {"name": SHARED_ENV, "value": SHARED_MOUNT_PATH} in ray["env"]
            assert pod["securityContext"]["runAsUser"] == 1000
            for other in pod["containers"][1:]:  # the notice agent needs no data
                assert volume["name"] not in [m["name"] for m in other.get("volumeMounts", [])]


def test_shared_storage_none_declares_no_file_system_and_mounts_nothing(
    dev_config: dict[str, str],
) -> None:
    run = run_offline(_with_spot(dev_config, sharedStorage="none"), "dev")
    assert _spot_file_systems(run) == []
    assert run.of_type(ADDON) == run.of_type(VOLUME) == run.of_type(CLAIM) == []
    assert outputs.SHARED_FILE_SYSTEM not in run.outputs
    for rc in run.of_type(RAYCLUSTER):
        assert "persistentVolumeClaim" not in json.dumps(rc.inputs["spec"])
    assert SHARED_STORAGE_ITEM not in [line.item for line in hourly_cost(
        run.config, load_price_table()).lines]


def test_bursting_throughput_and_no_lifecycle_are_declared_as_configured(
    dev_config: dict[str, str],
) -> None:
    run = run_offline(
        _with_spot(dev_config, sharedThroughputMode="bursting", sharedInfrequentAccessDays=0),
        "dev",
    )
    (file_system,) = _spot_file_systems(run)
    assert file_system.inputs["throughputMode"] == "bursting"
    assert not file_system.inputs.get("lifecyclePolicies")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"sharedStorage": "nfs"}, r"^spotburst:spotCluster\.sharedStorage: 'nfs' is not allowed; "
                                   r"expected efs or none$"),
        ({"sharedThroughputMode": "provisioned"},
         r"^spotburst:spotCluster\.sharedThroughputMode: 'provisioned' is not allowed"),
        ({"sharedInfrequentAccessDays": 45},
         r"^spotburst:spotCluster\.sharedInfrequentAccessDays: 45 is not allowed; EFS moves"),
        ({"sharedInfrequentAccessDays": "30"},
         r"^spotburst:spotCluster\.sharedInfrequentAccessDays: '30'"),
    ],
)
def test_bad_shared_storage_config_is_one_line_naming_the_key(
    dev_config: dict[str, str], changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(_with_spot(dev_config, **changes), "dev")


def test_the_plan_prices_the_file_system_per_gb(dev_run: OfflineRun) -> None:
    cost = hourly_cost(dev_run.config, load_price_table())
    (line,) = [line for line in cost.lines if line.item == SHARED_STORAGE_ITEM]
    assert (line.unit_price, line.count_min, line.count_max) == (0.0, 1, 1)
    text = render_plan(dev_run, cost)
    assert ("  shared data: one encrypted EFS (elastic throughput, Infrequent Access after 30 "
            "days) at /mnt/shared in every Ray pod (SPOTBURST_SHARED)") in text.splitlines()
    assert ("plus EFS shared data: $0.30 per GB-month stored ($0.016 per GB-month for files "
            "untouched 30 days, $0.01 per GB read from them); elastic throughput $0.03 per GB "
            "read, $0.06 per GB written") in text
