"""Every stack output, named once, and read back typed.

The stack program (stacks/*.py) exports under these names; `launch/` reads a deployed stack's
outputs (`pulumi stack output --json`) through the readers below, which check shape and name
the output that is missing or malformed in one line. Pure: no Pulumi import, so reading
outputs never needs the Pulumi engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vocab.burst import ROLE_LOGIN, ROLES, SITE_CLOUD, SITE_ONPREM, SITES
from vocab.errors import UserError

REGION = "region"
BUCKET_NAME = "bucketName"
EXPERIMENTS = "experiments"
RAY_VERSION = "rayVersion"

SPOT_CLUSTER_NAME = "spotClusterName"
"""The shared EKS cluster's name."""
SPOT_CLUSTER_POOLS = "spotClusterNodePools"
"""Node pool name -> {capacity, instanceTypes, minSize, maxSize}."""
SPOT_INTERRUPTION_TEMPLATES = "spotInterruptionTemplates"
"""Spot node pool name -> the id of its AWS FIS experiment template, which interrupts one
running spot instance of the pool per start (`invoke preempt`)."""

SHARED_FILE_SYSTEM = "sharedFileSystem"
"""The id of the spot cluster's shared EFS file system (absent with `sharedStorage: none`)."""

BURST_INSTANCE_IDS = "burstInstanceIds"
BURST_PRIVATE_IPS = "burstPrivateIps"
BURST_HEAD_ADDRESS = "burstHeadAddress"
BURST_SITE_CIDRS = "burstSiteCidrs"
BURST_EFS = "burstEfs"
BURST_TOKEN_PARAMETER = "burstTokenParameter"
"""SSM SecureString parameter holding the burst cluster's Ray token."""


def kubeconfig(experiment: str) -> str:
    """The spot cluster's kubeconfig (secret), repeated per experiment for its run path."""
    return f"{experiment}Kubeconfig"


def namespace(experiment: str) -> str:
    return f"{experiment}Namespace"


def raycluster_name(experiment: str) -> str:
    return f"{experiment}RayClusterName"


def head_service(experiment: str) -> str:
    """`<name>-head-svc`: dashboard and Jobs API (8265), reached through a port-forward."""
    return f"{experiment}HeadService"


def token_secret(experiment: str) -> str:
    """Kubernetes Secret in the experiment's namespace; key `auth_token` holds the Ray token."""
    return f"{experiment}TokenSecret"


def ray_cluster_outputs(experiment: str) -> tuple[str, ...]:
    """What a `--stack` run of an EKS experiment needs."""
    return (
        kubeconfig(experiment),
        namespace(experiment),
        head_service(experiment),
        token_secret(experiment),
    )


Outputs = Mapping[str, Any]


class StackOutputsError(UserError, ValueError):
    """A stack output a task needs is missing or has the wrong shape."""


@dataclass(frozen=True)
class RayClusterOutputs:
    """What a `--stack` run of an experiment on its Kubernetes RayCluster needs."""

    kubeconfig: str
    """The cluster's kubeconfig as JSON text (a secret)."""
    namespace: str
    head_service: str
    token_secret: str
    """Kubernetes Secret (in `namespace`) whose key `auth_token` holds the Ray token."""
    bucket_name: str
    region: str


@dataclass(frozen=True)
class BurstOutputs:
    instance_ids: dict[str, tuple[str, ...]]
    """Role -> its instances' ids; exactly one login node."""
    site_cidrs: dict[str, str]
    bucket_name: str
    region: str
    token_parameter: str | None
    """SSM SecureString parameter holding the burst cluster's Ray token (needed to submit
    a run, not to shape the nodes)."""

    @property
    def login_instance(self) -> str:
        return self.instance_ids[ROLE_LOGIN][0]


def read_ray_cluster_outputs(outputs: Outputs, stack: str, experiment: str) -> RayClusterOutputs:
    """The outputs a run of `experiment` on its RayCluster needs (read with secrets shown,
    for the kubeconfig)."""
    _require(outputs, stack, (kubeconfig(experiment), namespace(experiment),
                              head_service(experiment), token_secret(experiment),
                              BUCKET_NAME, REGION),
             f"is {experiment} enabled and deployed (with token auth)?")
    config = outputs[kubeconfig(experiment)]
    if isinstance(config, dict):
        config = json.dumps(config)
    return RayClusterOutputs(
        kubeconfig=_text(outputs, kubeconfig(experiment), config),
        namespace=_text(outputs, namespace(experiment)),
        head_service=_text(outputs, head_service(experiment)),
        token_secret=_text(outputs, token_secret(experiment)),
        bucket_name=_text(outputs, BUCKET_NAME),
        region=_text(outputs, REGION),
    )


def read_interruption_templates(outputs: Outputs, stack: str) -> dict[str, str]:
    """Spot pool -> its FIS experiment template's id."""
    _require(outputs, stack, (SPOT_INTERRUPTION_TEMPLATES,),
             "is an EKS experiment with a spot pool enabled and deployed?")
    value = outputs[SPOT_INTERRUPTION_TEMPLATES]
    if not isinstance(value, dict) or not all(
            isinstance(pool, str) and isinstance(template, str) and template
            for pool, template in value.items()):
        raise StackOutputsError(f"stack output {SPOT_INTERRUPTION_TEMPLATES} must map spot "
                                f"pools to experiment template ids, got {value!r}")
    return {str(pool): str(template) for pool, template in value.items()}


def read_burst_outputs(outputs: Outputs, stack: str) -> BurstOutputs:
    """The outputs a burst run and `invoke netem` need."""
    _require(outputs, stack, (BURST_INSTANCE_IDS, BURST_SITE_CIDRS, BUCKET_NAME, REGION),
             "is the burst experiment enabled and deployed?")
    return BurstOutputs(
        instance_ids=parse_burst_instance_ids(outputs[BURST_INSTANCE_IDS]),
        site_cidrs=parse_burst_site_cidrs(outputs[BURST_SITE_CIDRS]),
        bucket_name=_text(outputs, BUCKET_NAME),
        region=_text(outputs, REGION),
        token_parameter=(_text(outputs, BURST_TOKEN_PARAMETER)
                         if outputs.get(BURST_TOKEN_PARAMETER) is not None else None),
    )


def parse_burst_instance_ids(value: Any) -> dict[str, tuple[str, ...]]:
    """The one reader of burstInstanceIds: {login: [id], hpc: [ids], cloud: [ids]}, every
    role present, exactly one login node, ids non-empty strings."""
    expected = f"an object mapping {', '.join(ROLES)} to lists of instance ids"
    if not isinstance(value, dict):
        raise StackOutputsError(f"stack output {BURST_INSTANCE_IDS} must be {expected}, "
                                f"got {value!r}")
    ids: dict[str, tuple[str, ...]] = {}
    for role in ROLES:
        listed = value.get(role)
        if not isinstance(listed, list) or not all(isinstance(i, str) and i for i in listed):
            raise StackOutputsError(f"stack output {BURST_INSTANCE_IDS}.{role} must be a list "
                                    f"of instance ids, got {listed!r}")
        ids[role] = tuple(listed)
    if len(ids[ROLE_LOGIN]) != 1:
        raise StackOutputsError(f"stack output {BURST_INSTANCE_IDS}.{ROLE_LOGIN} must list "
                                f"exactly one instance, got {len(ids[ROLE_LOGIN])}")
    return ids


def parse_burst_site_cidrs(value: Any) -> dict[str, str]:
    if (not isinstance(value, dict) or set(value) != set(SITES)
            or not all(isinstance(cidr, str) and cidr for cidr in value.values())):
        raise StackOutputsError(f"stack output {BURST_SITE_CIDRS} must map {SITE_ONPREM} and "
                                f"{SITE_CLOUD} to CIDRs, got {value!r}")
    return {site: str(value[site]) for site in SITES}


def _require(outputs: Outputs, stack: str, names: tuple[str, ...], hint: str) -> None:
    missing = [name for name in names if outputs.get(name) in (None, "", [], {})]
    if missing:
        raise StackOutputsError(
            f"stack {stack!r} has no output {', '.join(missing)} "
            f"(found: {', '.join(sorted(outputs)) or 'none'}); {hint}"
        )


def _text(outputs: Outputs, name: str, value: Any = None) -> str:
    value = outputs[name] if value is None else value
    if not isinstance(value, str) or not value:
        raise StackOutputsError(f"stack output {name} must be a non-empty string, got {value!r}")
    return value
