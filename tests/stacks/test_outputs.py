"""Stack outputs read back typed: one parser per output, one line naming what is wrong."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from stacks.outputs import (
    StackOutputsError,
    parse_burst_instance_ids,
    read_burst_outputs,
    read_ray_cluster_outputs,
)

BURST = {
    "burstInstanceIds": {"login": ["i-1"], "hpc": ["i-2", "i-3"], "cloud": ["i-4"]},
    "burstSiteCidrs": {"onprem": "10.0.0.0/16", "cloud": "10.1.0.0/16"},
    "bucketName": "b",
    "region": "eu-west-1",
    "burstTokenParameter": "/sb-dev/burst/ray-token",
}
DOLL = {
    "dollKubeconfig": {"apiVersion": "v1"},
    "dollNamespace": "doll",
    "dollHeadService": "doll-head-svc",
    "dollTokenSecret": "doll-ray-token",
    "bucketName": "b",
    "region": "ca-central-1",
}


def test_burst_outputs_read_typed() -> None:
    burst = read_burst_outputs(BURST, "dev")
    assert burst.login_instance == "i-1"
    assert burst.instance_ids == {"login": ("i-1",), "hpc": ("i-2", "i-3"), "cloud": ("i-4",)}
    assert burst.site_cidrs == {"onprem": "10.0.0.0/16", "cloud": "10.1.0.0/16"}
    assert (burst.bucket_name, burst.region) == ("b", "eu-west-1")
    assert burst.token_parameter == "/sb-dev/burst/ray-token"


def test_doll_kubeconfig_comes_back_as_json_text() -> None:
    doll = read_ray_cluster_outputs(DOLL, "dev", "doll")
    assert doll.kubeconfig == '{"apiVersion": "v1"}'
    assert (doll.namespace, doll.head_service, doll.region) == ("doll", "doll-head-svc",
                                                                "ca-central-1")
    assert doll.token_secret == "doll-ray-token"


@pytest.mark.parametrize(
    "value, message",
    [
        (["i-1"], r"burstInstanceIds must be an object mapping login, hpc, cloud"),
        ({"login": ["i-1"]}, r"burstInstanceIds.hpc must be a list of instance ids, got None"),
        ({"login": ["i-1"], "hpc": [""], "cloud": []}, r"burstInstanceIds.hpc must be a list"),
        ({"login": [], "hpc": [], "cloud": []}, r"burstInstanceIds.login must list exactly one"),
        ({"login": ["a", "b"], "hpc": [], "cloud": ["c"]}, r"exactly one instance, got 2"),
    ],
)
def test_one_parser_for_burst_instance_ids_names_the_bad_part(value: Any, message: str) -> None:
    with pytest.raises(StackOutputsError, match=message):
        parse_burst_instance_ids(value)


@pytest.mark.parametrize(
    "outputs, message",
    [
        ({"region": "r"}, r"stack 'dev' has no output burstInstanceIds, burstSiteCidrs, "
                          r"bucketName \(found: region\); is the burst experiment enabled"),
        ({**BURST, "burstSiteCidrs": {"onprem": "10.0.0.0/16"}}, "burstSiteCidrs must map"),
        ({**BURST, "region": 3}, "region must be a non-empty string, got 3"),
    ],
)
def test_missing_or_malformed_burst_outputs_are_named(outputs: Any, message: str) -> None:
    with pytest.raises(StackOutputsError, match=message):
        read_burst_outputs(outputs, "dev")


def test_missing_doll_outputs_are_named_with_what_was_found() -> None:
    with pytest.raises(StackOutputsError) as error:
        read_ray_cluster_outputs({"region": "us-east-1"}, "dev", "doll")
    expected = ("no output dollKubeconfig, dollNamespace, dollHeadService, dollTokenSecret, "
                "bucketName")
    assert expected in str(error.value)
    assert "(found: region)" in str(error.value)


@pytest.mark.subprocess
def test_reading_outputs_does_not_import_pulumi() -> None:
    code = "import sys, stacks.outputs; print('pulumi' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "False"


def test_the_stack_program_exports_under_the_named_outputs() -> None:
    from launch.offline import run_offline
    from launch.stack_config import read_stack_config
    from stacks import outputs
    from stacks.config import with_admin_cidr_placeholder
    from stacks.outputs import read_interruption_templates

    raw, _ = with_admin_cidr_placeholder(read_stack_config("dev"))
    raw["spotburst:experiments"] = '["doll", "burst"]'
    run = run_offline(raw, "dev")
    named = {outputs.REGION, outputs.BUCKET_NAME, outputs.EXPERIMENTS, outputs.RAY_VERSION,
             outputs.SPOT_CLUSTER_NAME, outputs.SPOT_CLUSTER_POOLS, outputs.BURST_INSTANCE_IDS,
             outputs.BURST_PRIVATE_IPS, outputs.BURST_HEAD_ADDRESS, outputs.BURST_SITE_CIDRS,
             outputs.BURST_EFS, outputs.BURST_TOKEN_PARAMETER,
             outputs.SPOT_INTERRUPTION_TEMPLATES, outputs.SHARED_FILE_SYSTEM}
    named |= {*outputs.ray_cluster_outputs("doll"), outputs.raycluster_name("doll")}
    assert set(run.outputs) == named
    assert set(read_interruption_templates(run.outputs, "dev")) == {"spot-cpu"}  # doll's pool
    read_ray_cluster_outputs(run.outputs, "dev", "doll")  # what launch reads, the program writes
    burst = read_burst_outputs(run.outputs, "dev")
    assert burst.instance_ids["cloud"]
