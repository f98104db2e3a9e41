"""Every declared RayCluster is valid against the real CRD of KubeRay 1.7.0 (the default chart).

Token auth (`authOptions`) needs KubeRay >= 1.6, so the 1.0.0 CRD the DOLL authors used no
longer describes what the stack declares; it is kept for the schema's own checks below.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from launch.offline import OfflineRun

CRD_DIR = Path(__file__).with_name("kuberay-crds")


@cache
def _validator(chart_version: str) -> jsonschema.protocols.Validator:
    """Checked once: `jsonschema.validate` re-checks the (large) schema on every call."""
    schema = _spec_schema(chart_version)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


@cache
def _spec_schema(chart_version: str) -> dict[str, Any]:
    text = (CRD_DIR / f"ray.io_rayclusters-v{chart_version}.yaml").read_text()
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (v1,) = [entry for entry in crd["spec"]["versions"] if entry["name"] == "v1"]
    schema: dict[str, Any] = v1["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _integral_floats_to_ints(value: Any) -> Any:
    """Mock inputs arrive with integers as floats; the CRD wants integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral_floats_to_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral_floats_to_ints(item) for item in value]
    return value


def _declared_spec(run: OfflineRun, experiment: str = "doll") -> dict[str, Any]:
    raycluster = run.one("kubernetes:ray.io/v1:RayCluster", f"{experiment}-raycluster")
    spec: dict[str, Any] = _integral_floats_to_ints(raycluster.inputs["spec"])
    return spec


@pytest.mark.parametrize("experiment", ["doll", "elastic", "rl", "inference"])
def test_every_declared_raycluster_is_valid_for_1_7_0(dev_run: OfflineRun, experiment: str) -> None:
    spec = _declared_spec(dev_run, experiment)
    _validator("1.7.0").validate(spec)
    assert spec["authOptions"] == {"mode": "token"}


@pytest.mark.parametrize(
    "break_spec",
    [
        lambda spec: spec.update(authOptions={"mode": "open"}),
        lambda spec: spec["autoscalerOptions"].update(upscalingMode="Fast"),
        lambda spec: spec["workerGroupSpecs"][0].update(resources={"spot": 3}),
        lambda spec: spec["workerGroupSpecs"][0].pop("maxReplicas"),
    ],
    ids=["auth-mode-unknown", "upscaling-mode-unknown", "resources-not-strings", "no-max"],
)
def test_the_1_7_0_schema_rejects_a_broken_spec(dev_run: OfflineRun, break_spec: Any) -> None:
    spec = copy.deepcopy(_declared_spec(dev_run, "rl"))
    break_spec(spec)
    with pytest.raises(jsonschema.ValidationError):
        _validator("1.7.0").validate(spec)


@pytest.mark.parametrize(
    "break_spec",
    [
        lambda spec: spec["workerGroupSpecs"][0].pop("rayStartParams"),
        lambda spec: spec["workerGroupSpecs"][0].pop("groupName"),
        lambda spec: spec["headGroupSpec"].pop("rayStartParams"),
        lambda spec: spec["workerGroupSpecs"][0].update(replicas="four"),
    ],
    ids=[
        "worker-without-rayStartParams",
        "worker-without-groupName",
        "head-without-rayStartParams",
        "replicas-not-integer",
    ],
)
def test_the_1_0_0_schema_rejects_a_broken_spec(dev_run: OfflineRun, break_spec: Any) -> None:
    spec = copy.deepcopy(_declared_spec(dev_run))
    break_spec(spec)
    with pytest.raises(jsonschema.ValidationError):
        _validator("1.0.0").validate(spec)
