"""Run the real stack program offline, under Pulumi mocks: no CLI, no cloud, no credentials.

Used by `invoke plan` and by the infrastructure tests. Every registered resource is recorded
with its parent, so callers can walk the tree the program would create. Pulumi's resource
deserialisation is patched only when `run_offline` runs (never on import), so nothing that
merely imports this module (or reads stack config) runs with Pulumi patched.
"""

from __future__ import annotations

import asyncio
import json
import runpy
import threading
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi import Resource
from pulumi.runtime import mocks, rpc
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from launch.stack_config import PROJECT_DIR
from stacks.config import parse_config
from stacks.config_types import PROJECT, SpotburstConfig

MOCK_ACCOUNT = "123456789012"

# Resource references deserialised off the main thread rehydrate on another event loop and
# hang or fail at random (pulumi issues 6465/6561); under mocks, keep them as URN strings there.
_deserialize_resource = rpc.deserialize_resource


def _urn_off_main_thread(ref_struct: Any, keep_unknowns: bool | None = None) -> Resource | str:
    if threading.current_thread() is not threading.main_thread():
        return str(ref_struct["urn"])
    return _deserialize_resource(ref_struct, keep_unknowns)


def _patch_for_mocks() -> None:
    """Only for a mocked run in this process (idempotent)."""
    rpc.deserialize_resource = _urn_off_main_thread


@dataclass(frozen=True)
class DeclaredResource:
    urn: str
    resource_id: str
    type: str
    name: str
    parent_urn: str
    custom: bool
    inputs: dict[str, Any]
    dependencies: tuple[str, ...]
    provider: str = ""
    """The provider reference (`urn::id`) of a custom resource; "" for the default provider."""
    providers: tuple[tuple[str, str], ...] = ()
    """A component's provider references by package (what remote components receive)."""


@dataclass
class OfflineRun:
    config: SpotburstConfig
    resources: list[DeclaredResource]
    outputs: dict[str, Any]
    secret_outputs: set[str]

    def of_type(self, resource_type: str) -> list[DeclaredResource]:
        return [resource for resource in self.resources if resource.type == resource_type]

    def one(self, resource_type: str, name_suffix: str = "") -> DeclaredResource:
        found = [r for r in self.of_type(resource_type) if r.name.endswith(name_suffix)]
        if len(found) != 1:
            raise LookupError(
                f"expected one {resource_type} named *{name_suffix}, found {len(found)}"
            )
        return found[0]

    def children_of(self, urn: str) -> list[DeclaredResource]:
        return [resource for resource in self.resources if resource.parent_urn == urn]


class _CloudMocks(pulumi.runtime.Mocks):
    """Plausible provider answers: ids, ARNs, and the outputs multi-language components return."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.addresses_given = 0

    def _next_ip(self) -> str:
        """A distinct documentation address (TEST-NET-2) for each mocked interface."""
        self.addresses_given += 1
        return f"198.51.100.{self.addresses_given}"

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        resource_id = f"{args.name}-id"
        if args.typ == "eks:index:Cluster":
            state.update(self._eks_cluster_outputs(args.name, state.get("name", args.name)))
        elif args.typ == "aws:s3/bucket:Bucket":
            bucket = f"{state.get('bucketPrefix', args.name)}mock"
            state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}")
            resource_id = bucket
        elif args.typ == "aws:efs/mountTarget:MountTarget":
            state["ipAddress"] = self._next_ip()
        elif args.typ == "aws:ec2/instance:Instance":
            state["privateIp"] = self._next_ip()
        elif args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state["latestVersion"] = 1
        elif args.typ == "aws:elasticache/replicationGroup:ReplicationGroup":
            state["primaryEndpointAddress"] = (
                f"master.{args.name}.mock.{self.region}.cache.amazonaws.com"
            )
        if args.typ.startswith("aws:"):
            service = args.typ.split(":")[1].split("/")[0]
            state.setdefault("arn", f"arn:aws:{service}:{self.region}:{MOCK_ACCOUNT}:{args.name}")
            state.setdefault("name", args.name)
        return resource_id, state

    def _eks_cluster_outputs(self, name: str, cluster_name: str) -> dict[str, Any]:
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{name.upper()}"
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {"server": "https://mock.eks"}}],
        }
        return {
            "kubeconfig": kubeconfig,
            "kubeconfigJson": json.dumps(kubeconfig),
            "oidcProviderArn": f"arn:aws:iam::{MOCK_ACCOUNT}:oidc-provider/{issuer}",
            "oidcIssuer": issuer,
            "nodeSecurityGroupId": f"{name}-node-sg",
            "clusterSecurityGroupId": f"{name}-cluster-sg",
        }

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            zones = [f"{self.region}{letter}" for letter in "abcdef"]
            return {"names": zones, "zoneIds": [f"use1-az{i}" for i in range(1, 7)]}, []
        if args.token == "aws:ec2/getInstanceType:getInstanceType":
            return {"instanceType": args.args["instanceType"], "defaultVcpus": 16}, []
        if args.token == "aws:ec2/getAmi:getAmi":
            return {"id": "ami-0123456789abcdef0", "architecture": "x86_64"}, []
        if args.token == "aws:eks/getCluster:getCluster":
            name = args.args["name"]
            return {"name": name, "vpcConfig": {"clusterSecurityGroupId": f"{name}-eks-sg"}}, []
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": MOCK_ACCOUNT, "arn": f"arn:aws:iam::{MOCK_ACCOUNT}:root"}, []
        return {}, []


class _RecordingMonitor(mocks.MockMonitor):
    def __init__(self, cloud_mocks: _CloudMocks) -> None:
        super().__init__(cloud_mocks)
        self.declared: list[DeclaredResource] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.declared.append(
                DeclaredResource(
                    urn=response.urn,
                    resource_id=response.id,
                    type=request.type,
                    name=request.name,
                    parent_urn=request.parent,
                    custom=request.custom,
                    inputs=rpc.deserialize_properties(request.object),
                    dependencies=tuple(request.dependencies),
                    provider=request.provider,
                    providers=tuple(sorted(request.providers.items())),
                )
            )
        return response


def _mocked_monitor(raw_config: dict[str, str], stack: str, region: str) -> _RecordingMonitor:
    _patch_for_mocks()
    _fresh_run()
    monitor = _RecordingMonitor(_CloudMocks(region))
    mocks.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(raw_config)
    return monitor


def _fresh_run() -> None:
    """Each mocked run on an event loop of its own and under a new root stack: Pulumi keeps
    its root resource for the process, so a later run in the same process (a test session,
    an earlier run that stopped half-way, an `asyncio.run` in between that left no loop) would
    otherwise wait on futures of an earlier run that may never resolve (seen as a test
    session hanging in the program's run)."""
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi_settings.ROOT.set(None)


def run_entry_point(
    raw_config: dict[str, str], stack: str = "dev"
) -> tuple[list[DeclaredResource], Exception | None]:
    """Run `__main__.py` as `pulumi up` would, config and all, under mocks: what it declared,
    and the exception that stopped it (None when it ran to the end)."""
    monitor = _mocked_monitor(raw_config, stack, raw_config.get("aws:region", "us-east-1"))

    def entry_point() -> None:
        runpy.run_path(str(PROJECT_DIR / "__main__.py"))

    try:
        _sync_await(run_pulumi_func(entry_point))
    except Exception as error:  # noqa: BLE001 (handed to the caller)
        return list(monitor.declared), error
    return list(monitor.declared), None


def run_offline(raw_config: dict[str, str], stack: str = "dev") -> OfflineRun:
    """Validate the config, then run the stack program under mocks and wait for every resource."""
    from stacks.program import build

    config = parse_config(raw_config, stack)
    monitor = _mocked_monitor(raw_config, stack, config.region)
    declared_outputs: dict[str, Any] = {}

    def program() -> None:
        declared_outputs.update(build(config))

    _sync_await(run_pulumi_func(program))
    outputs: dict[str, Any] = {}
    secret_outputs: set[str] = set()
    for key, value in declared_outputs.items():
        output = pulumi.Output.from_input(value)
        outputs[key] = _sync_await(output.future())
        if _sync_await(output.is_secret()):
            secret_outputs.add(key)
    return OfflineRun(config, list(monitor.declared), outputs, secret_outputs)
