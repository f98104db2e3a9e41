"""What the EKS experiments rely on: one shared cluster, node pools that match their pods,
autoscaling both ways, spot drains sized to the warning, per-experiment RayClusters."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

import pytest

from launch.offline import MOCK_ACCOUNT, DeclaredResource, OfflineRun, run_offline
from stacks import outputs
from stacks.spot_cluster import PROJECT_ROOT
from vocab.instances import load_instance_shapes
from vocab.shared_data import SHARED_ENV
from vocab.spot import NOTICE_AGENT_FILES, NOTICE_AGENT_MODULE, SPOT_WARNING_S
from vocab.spot_budget import AWS_BUDGET

NODE_GROUP = "eks:index:ManagedNodeGroup"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
HELM = "kubernetes:helm.sh/v3:Release"
EKS_EXPERIMENTS = ("doll", "elastic", "rl", "inference")
SPOT_TAINT = {"key": "spotburst.io/spot", "value": "true", "effect": "NO_SCHEDULE"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
SHAPES = load_instance_shapes()


def _spec(run: OfflineRun, experiment: str) -> dict[str, Any]:
    spec: dict[str, Any] = run.one(RAYCLUSTER, f"{experiment}-raycluster").inputs["spec"]
    return spec


def _pool(run: OfflineRun, name: str) -> dict[str, Any]:
    inputs: dict[str, Any] = run.one(NODE_GROUP, f"eks-{name}").inputs
    return inputs


def _groups(run: OfflineRun) -> list[tuple[str, dict[str, Any]]]:
    return [(e, g) for e in EKS_EXPERIMENTS for g in _spec(run, e)["workerGroupSpecs"]]


def _toleration(taint: dict[str, str]) -> dict[str, str]:
    return {
        "key": taint["key"],
        "operator": "Equal",
        "value": taint["value"],
        "effect": "NoSchedule",
    }


def test_one_cluster_one_operator_one_raycluster_per_experiment(dev_run: OfflineRun) -> None:
    assert len(dev_run.of_type("eks:index:Cluster")) == 1
    assert len(dev_run.of_type("aws:ec2/vpc:Vpc")) == 3  # the spot cluster's and burst's pair
    charts = sorted(r.inputs["chart"] for r in dev_run.of_type(HELM))
    assert charts == ["cluster-autoscaler", "kuberay-operator", "nvidia-device-plugin"]
    namespaces = {
        rc.inputs["metadata"]["namespace"]: rc.inputs["metadata"]["name"]
        for rc in dev_run.of_type(RAYCLUSTER)
    }
    assert namespaces == {e: e for e in EKS_EXPERIMENTS}
    operator = dev_run.one(HELM, "kuberay")
    for rc in dev_run.of_type(RAYCLUSTER):
        assert operator.urn in rc.dependencies


@pytest.mark.parametrize(
    ("pool", "capacity", "types", "sizes", "taints", "ami"),
    [
        ("head", "ON_DEMAND", ["m5.2xlarge"], (1, 2), None, "AL2023_x86_64_STANDARD"),
        (
            "spot-cpu",
            "SPOT",
            ["c5.xlarge", "c5a.xlarge", "c6i.xlarge"],
            (0, 24),
            [SPOT_TAINT],
            "AL2023_x86_64_STANDARD",
        ),
        ("learner-gpu", "ON_DEMAND", ["g4dn.xlarge"], (0, 1), [GPU_TAINT], "AL2023_x86_64_NVIDIA"),
        (
            "spot-gpu",
            "SPOT",
            ["g4dn.2xlarge"],
            (0, 4),
            [SPOT_TAINT, GPU_TAINT],
            "AL2023_x86_64_NVIDIA",
        ),
    ],
)
def test_node_pools_from_config(
    dev_run: OfflineRun,
    pool: str,
    capacity: str,
    types: list[str],
    sizes: tuple[int, int],
    taints: list[dict[str, str]] | None,
    ami: str,
) -> None:
    inputs = _pool(dev_run, pool)
    assert inputs["capacityType"] == capacity
    assert inputs["instanceTypes"] == types
    assert inputs["amiType"] == ami
    low, high = sizes
    # Created at the minimum (zero costs nothing); the Cluster Autoscaler owns the size after.
    assert inputs["scalingConfig"] == {"minSize": low, "desiredSize": low, "maxSize": high}
    assert inputs["ignoreScalingChanges"] is True
    assert inputs.get("taints") == taints
    assert inputs["labels"]["spotburst.io/node-pool"] == pool
    assert inputs["labels"]["capacity"] == ("spot" if capacity == "SPOT" else "on-demand")
    assert ("nvidia.com/gpu.present" in inputs["labels"]) == (ami == "AL2023_x86_64_NVIDIA")


def test_only_the_pools_enabled_experiments_use_are_declared(dev_config: dict[str, str]) -> None:
    run = run_offline({**dev_config, "spotburst:experiments": '["doll"]'})
    assert sorted(r.name for r in run.of_type(NODE_GROUP)) == ["eks-head", "eks-spot-cpu"]
    assert "nvidia-device-plugin" not in [r.inputs["chart"] for r in run.of_type(HELM)]
    assert len(run.of_type(RAYCLUSTER)) == 1
    assert run.of_type("aws:ec2/instance:Instance") == []


def test_heads_run_on_the_untainted_on_demand_pool(dev_run: OfflineRun) -> None:
    head_labels = _pool(dev_run, "head")["labels"]
    for experiment in EKS_EXPERIMENTS:
        head = _spec(dev_run, experiment)["headGroupSpec"]
        pod = head["template"]["spec"]
        assert head_labels.items() >= pod["nodeSelector"].items()
        assert "tolerations" not in pod
        assert head["serviceType"] == "ClusterIP"
        ports = {p["containerPort"] for p in pod["containers"][0]["ports"]}
        assert {6379, 8265, 10001} <= ports


def test_worker_groups_land_on_their_pool_and_tolerate_only_its_taints(
    dev_run: OfflineRun,
) -> None:
    for experiment, group in _groups(dev_run):
        pod = group["template"]["spec"]
        pool_name = pod["nodeSelector"]["spotburst.io/node-pool"]
        pool = _pool(dev_run, pool_name)
        assert pool["labels"].items() >= pod["nodeSelector"].items(), (experiment, group)
        expected = [_toleration(t) for t in pool.get("taints") or []]
        assert pod.get("tolerations", []) == expected, (experiment, group["groupName"])
        limits = pod["containers"][0]["resources"]["limits"]
        assert ("nvidia.com/gpu" in limits) == ("-gpu" in pool_name)


def test_pods_fit_the_nodes_of_their_pool(dev_run: OfflineRun) -> None:
    def gib(memory: str) -> float:
        return float(memory.removesuffix("Gi"))

    for experiment in EKS_EXPERIMENTS:
        spec = _spec(dev_run, experiment)
        pods = [spec["headGroupSpec"]] + spec["workerGroupSpecs"]
        for group in pods:
            pod = group["template"]["spec"]
            pool = _pool(dev_run, pod["nodeSelector"]["spotburst.io/node-pool"])
            requests = pod["containers"][0]["resources"]["requests"]
            for instance_type in pool["instanceTypes"]:
                shape = SHAPES[instance_type]
                # Leave room for the kubelet reserve and the daemon sets.
                assert float(requests["cpu"]) <= shape.vcpus - 0.5, (experiment, instance_type)
                assert gib(requests["memory"]) <= shape.memory_gib * 0.85, (
                    experiment, instance_type)


def test_ray_placement_resources_and_labels_follow_the_pool(dev_run: OfflineRun) -> None:
    groups = {(e, g["groupName"]): g for e, g in _groups(dev_run)}
    assert groups[("rl", "learner")]["resources"] == {"learner": "3"}
    assert groups[("rl", "learner")]["labels"] == {"capacity": "on-demand", "pool": "learner"}
    assert groups[("rl", "spot-env-runners")]["resources"] == {"spot": "3"}
    assert groups[("doll", "spot-workers")]["labels"] == {"capacity": "spot", "pool": "spot"}
    for _, group in groups.items():
        ray_capacity = group["labels"]["capacity"]
        node_capacity = group["template"]["spec"]["nodeSelector"]["spotburst.io/node-pool"]
        assert (ray_capacity == "spot") == node_capacity.startswith("spot")


def test_ray_autoscaler_runs_where_the_experiment_scales(dev_run: OfflineRun) -> None:
    on = {e for e in EKS_EXPERIMENTS if _spec(dev_run, e)["enableInTreeAutoscaling"]}
    assert on == {"elastic", "rl"}
    for experiment in EKS_EXPERIMENTS:
        spec = _spec(dev_run, experiment)
        head = spec["headGroupSpec"]["template"]["spec"]
        assert head["automountServiceAccountToken"] is False
        mounts_of_ray = head["containers"][0].get("volumeMounts", [])
        # the Ray container never sees the API token: it mounts the shared data only
        assert [m["mountPath"] for m in mounts_of_ray] == ["/mnt/shared"]
        projected = [v for v in head.get("volumes", []) if "projected" in v]
        if experiment in on:
            options = spec["autoscalerOptions"]
            (mount,) = options["volumeMounts"]
            assert mount["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
            (volume,) = projected
            assert volume["name"] == mount["name"]
            sources = [next(iter(source)) for source in volume["projected"]["sources"]]
            assert sources == ["serviceAccountToken", "configMap", "downwardAPI"]
        else:
            assert "autoscalerOptions" not in spec and projected == []


def test_spot_workers_drain_within_the_two_minute_warning(dev_run: OfflineRun) -> None:
    """Grace period and Ray's drain timeout are the timing budget's, and fit the warning."""
    seen_spot = seen_on_demand = False
    for _, group in _groups(dev_run):
        pod = group["template"]["spec"]
        spot = pod["nodeSelector"]["spotburst.io/node-pool"].startswith("spot")
        env = {e["name"]: e["value"] for e in pod["containers"][0].get("env", [])}
        if spot:
            seen_spot = True
            grace = pod["terminationGracePeriodSeconds"]
            drain = float(env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"])
            assert (drain, grace) == (AWS_BUDGET.drain_timeout_s, AWS_BUDGET.grace_period_s)
            assert 60 <= drain < grace < SPOT_WARNING_S
            assert grace - drain >= 10  # Ray exits after draining, before the SIGKILL
        else:
            seen_on_demand = True
            assert "terminationGracePeriodSeconds" not in pod
            assert set(env) == {SHARED_ENV}  # no drain timeout: the shared folder only
    assert seen_spot and seen_on_demand


def _agent(pod: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in pod["containers"] if c["name"] == "notice-agent"]
    assert len(found) <= 1
    return found[0] if found else None


def test_every_spot_pod_runs_the_notice_agent_beside_ray(dev_run: OfflineRun) -> None:
    """A second container of the same image drains the pod's Ray node at the notice: it
    finds its node by the pod's IP, talks to the head's GCS with the cluster's token (its
    Secret mounted read-only as the file Ray reads, never an environment variable) and polls
    at the budget's interval; on-demand pods have none."""
    spot_pods = 0
    for experiment, group in _groups(dev_run):
        pod = group["template"]["spec"]
        agent = _agent(pod)
        if not pod["nodeSelector"]["spotburst.io/node-pool"].startswith("spot"):
            assert agent is None, (experiment, group["groupName"])
            assert [v["name"] for v in pod["volumes"]] == ["shared"]
            continue
        spot_pods += 1
        assert agent is not None
        ray, _ = pod["containers"]
        assert agent["image"] == ray["image"]
        command = agent["command"]
        assert command[:3] == ["python", "-m", NOTICE_AGENT_MODULE]
        flags = dict(zip(command[3::2], command[4::2], strict=True))
        assert flags == {"--gcs-address": f"{experiment}-head-svc:6379",
                         "--node-ip": "$(POD_IP)", "--name": "$(POD_NAME)",
                         "--poll": f"{AWS_BUDGET.poll_s:g}",
                         "--warning": f"{AWS_BUDGET.warning_s:g}"}
        env = {e["name"]: e for e in agent["env"]}
        assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        assert "RAY_AUTH_TOKEN" not in env
        files, token = agent["volumeMounts"]
        assert env["PYTHONPATH"]["value"] == files["mountPath"]
        assert env["RAY_AUTH_TOKEN_PATH"]["value"] == f"{token['mountPath']}/auth_token"
        assert files["readOnly"] is True and token["readOnly"] is True
        assert agent["securityContext"] == ray["securityContext"]
        assert agent["resources"]["requests"] == agent["resources"]["limits"]
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert {files["name"], token["name"]} <= set(volumes)
        config_map = volumes[files["name"]]["configMap"]
        assert [item["path"] for item in config_map["items"]] == list(NOTICE_AGENT_FILES)
        assert config_map["name"] == f"{experiment}-notice-agent"
        assert volumes[token["name"]]["secret"] == {
            "secretName": experiment, "items": [{"key": "auth_token", "path": "auth_token"}],
            "defaultMode": 0o440}
        # the Ray container mounts no token of ours (only the shared data, if any)
        assert token["name"] not in {m["name"] for m in ray.get("volumeMounts", [])}
    assert spot_pods == 6  # doll 1, elastic 2, rl 2, inference 1


def test_the_agent_files_in_each_namespace_are_this_checkouts(dev_run: OfflineRun) -> None:
    for experiment in EKS_EXPERIMENTS:
        config_map = dev_run.one("kubernetes:core/v1:ConfigMap", f"{experiment}-notice-agent")
        assert config_map.inputs["metadata"] == {"name": f"{experiment}-notice-agent",
                                                 "namespace": experiment}
        data = config_map.inputs["data"]
        assert data == {path.replace("/", "__"): (PROJECT_ROOT / path).read_text()
                        for path in NOTICE_AGENT_FILES}
        raycluster = dev_run.one(RAYCLUSTER, f"{experiment}-raycluster")
        assert config_map.urn in raycluster.dependencies


def test_the_agent_drains_on_rebalance_only_when_configured(dev_config: dict[str, str]) -> None:
    spot = json.loads(dev_config["spotburst:spotCluster"])
    run = run_offline({**dev_config, "spotburst:experiments": '["doll"]',
                       "spotburst:spotCluster": json.dumps({**spot, "drainOnRebalance": True})})
    (group,) = _spec(run, "doll")["workerGroupSpecs"]
    agent = _agent(group["template"]["spec"])
    assert agent is not None and agent["command"][-1] == "--drain-on-rebalance"
    assert run.config.spot_cluster is not None and run.config.spot_cluster.drain_on_rebalance


def test_pods_reach_imds_v2_only_through_the_projects_launch_templates(
    dev_run: OfflineRun,
) -> None:
    """The notice agent in a spot pod reads the interruption notice from IMDS: one hop
    more than the node, so the hop limit is 2 (AL2023's default of 1 drops its packets),
    and tokens are required. Declared here, not left to pulumi-eks's `enableIMDSv2`. Each
    pool's template tags its instances with the stack and the pool: FIS finds them so."""
    templates = {t.resource_id: t for t in dev_run.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    groups = dev_run.of_type(NODE_GROUP)
    assert len(groups) == len(templates) == 4
    for group in groups:
        pool = group.name.removeprefix("eks-")
        template = templates[group.inputs["launchTemplate"]["id"]]
        assert template.name == f"eks-{pool}-nodes"
        assert group.inputs["launchTemplate"]["version"] == "1"
        assert template.inputs["metadataOptions"] == {
            "httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 2}
        assert template.inputs["tagSpecifications"] == [{
            "resourceType": "instance",
            "tags": {"spotburst:stack": "dev", "spotburst:node-pool": pool}}]
        # with enableIMDSv2 as well, pulumi-eks refuses a launch template of the user's
        assert "enableIMDSv2" not in group.inputs, group.name
        # with a launch template, the node group's version is not the cluster's by default
        assert group.inputs["version"] == dev_run.config.spot_cluster.eks_version  # type: ignore[union-attr]


FIS_TEMPLATE = "aws:fis/experimentTemplate:ExperimentTemplate"


def test_one_fis_template_per_spot_pool_interrupts_one_of_its_instances(
    dev_run: OfflineRun,
) -> None:
    role = dev_run.one("aws:iam/role:Role", "spot-interruptions-fis")
    templates = {t.name: t.inputs for t in dev_run.of_type(FIS_TEMPLATE)}
    assert sorted(templates) == ["spot-interruptions-spot-cpu", "spot-interruptions-spot-gpu"]
    for name, template in templates.items():
        pool = name.removeprefix("spot-interruptions-")
        assert template["roleArn"].endswith(f":{role.name}")
        assert template["stopConditions"] == [{"source": "none"}]
        (target,) = template["targets"]
        assert target["resourceType"] == "aws:ec2:spot-instance"
        assert target["selectionMode"] == "COUNT(1)"
        assert {t["key"]: t["value"] for t in target["resourceTags"]} == {
            "spotburst:stack": "dev", "spotburst:node-pool": pool}
        assert target["filters"] == [{"path": "State.Name", "values": ["running"]}]
        (action,) = template["actions"]
        assert action["actionId"] == "aws:ec2:send-spot-instance-interruptions"
        assert action["parameters"] == [{"key": "durationBeforeInterruption", "value": "PT2M"}]
        assert action["target"] == {"key": "SpotInstances", "value": target["name"]}
    assert dev_run.outputs[outputs.SPOT_INTERRUPTION_TEMPLATES] == {
        name.removeprefix("spot-interruptions-"): f"{name}-id" for name in templates}


def test_fis_acts_for_this_account_on_this_stacks_spot_instances_only(
    dev_run: OfflineRun,
) -> None:
    role = dev_run.one("aws:iam/role:Role", "spot-interruptions-fis")
    (trust,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust["Principal"] == {"Service": "fis.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": MOCK_ACCOUNT}}
    policy = dev_run.one("aws:iam/rolePolicy:RolePolicy", "spot-interruptions-fis-interrupt")
    assert policy.inputs["role"] == role.resource_id
    describe, interrupt = json.loads(policy.inputs["policy"])["Statement"]
    assert describe == {"Effect": "Allow", "Action": ["ec2:DescribeInstances"], "Resource": "*"}
    assert interrupt["Action"] == ["ec2:SendSpotInstanceInterruptions"]
    assert interrupt["Resource"] == f"arn:aws:ec2:us-east-1:{MOCK_ACCOUNT}:instance/*"
    assert interrupt["Condition"] == {"StringEquals": {
        "aws:ResourceTag/spotburst:stack": ["dev"],
        "aws:ResourceTag/spotburst:node-pool": ["spot-cpu", "spot-gpu"]}}
    attached = [a for a in dev_run.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if a.inputs["role"] == role.resource_id]
    assert attached == []


def test_without_a_spot_pool_there_is_nothing_to_interrupt(dev_config: dict[str, str]) -> None:
    run = run_offline({**dev_config, "spotburst:experiments": '["burst"]'})
    assert run.of_type(FIS_TEMPLATE) == []
    assert outputs.SPOT_INTERRUPTION_TEMPLATES not in run.outputs


def test_cluster_autoscaler_discovers_this_cluster_with_a_matching_version(
    dev_run: OfflineRun,
) -> None:
    release = dev_run.one(HELM, "cluster-autoscaler").inputs
    values = release["values"]
    spot = dev_run.config.spot_cluster
    assert spot is not None
    assert values["autoDiscovery"] == {"clusterName": "spotburst-dev-spot"}
    assert values["image"]["tag"] == f"v{spot.cluster_autoscaler_version}"
    assert values["image"]["tag"].startswith(f"v{spot.eks_version}.")
    assert values["awsRegion"] == dev_run.config.region
    assert values["nodeSelector"] == {"spotburst.io/node-pool": "head"}
    role = dev_run.one("aws:iam/role:Role", "cluster-autoscaler-irsa")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]
    assert "system:serviceaccount:kube-system:cluster-autoscaler" in trust["StringEquals"].values()
    account = values["rbac"]["serviceAccount"]
    assert account["name"] == "cluster-autoscaler"
    assert account["annotations"]["eks.amazonaws.com/role-arn"].endswith(":cluster-autoscaler-irsa")


def test_gpu_device_plugin_reaches_every_gpu_pool(dev_run: OfflineRun) -> None:
    values = dev_run.one(HELM, "nvidia-device-plugin").inputs["values"]
    tolerated = {t["key"] for t in values["tolerations"] if t.get("effect") == "NoSchedule"}
    for pool in ("learner-gpu", "spot-gpu"):
        inputs = _pool(dev_run, pool)
        assert {t["key"] for t in inputs["taints"]} <= tolerated
        # The chart's default node affinity selects this label.
        assert inputs["labels"]["nvidia.com/gpu.present"] == "true"


def test_eks_secrets_key_rotates_and_network_policies_are_enforced(dev_run: OfflineRun) -> None:
    cluster = dev_run.one("eks:index:Cluster").inputs
    key = dev_run.one("aws:kms/key:Key", "eks-secrets")
    assert cluster["encryptionConfigKeyArn"].endswith(f":{key.name}")
    assert key.inputs["enableKeyRotation"] is True
    assert cluster["vpcCniOptions"]["enableNetworkPolicy"] is True
    assert cluster["useDefaultVpcCni"] is False


def test_each_namespace_admits_only_its_own_pods_and_the_operator(dev_run: OfflineRun) -> None:
    for experiment in EKS_EXPERIMENTS:
        policy = dev_run.one(
            "kubernetes:networking.k8s.io/v1:NetworkPolicy", f"{experiment}-ingress"
        )
        spec = policy.inputs["spec"]
        own = {"matchLabels": {"ray.io/cluster": experiment}}
        assert policy.inputs["metadata"]["namespace"] == experiment
        assert spec["podSelector"] == own and spec["policyTypes"] == ["Ingress"]
        peers, operator = spec["ingress"]
        assert peers == {"from": [{"podSelector": own}]}
        (source,) = operator["from"]
        assert source["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": "kuberay-system"}
        }
        assert {p["port"] for p in operator["ports"]} == {6379, 8265, 10001}


def _irsa(run: OfflineRun, experiment: str) -> DeclaredResource:
    return run.one("aws:iam/role:Role", f"{experiment}-ray-pods")


def test_each_experiments_pods_get_their_own_bucket_role(dev_run: OfflineRun) -> None:
    for experiment in EKS_EXPERIMENTS:
        trust = json.loads(_irsa(dev_run, experiment).inputs["assumeRolePolicy"])
        (statement,) = trust["Statement"]
        subjects = [
            v for k, v in statement["Condition"]["StringEquals"].items() if k.endswith(":sub")
        ]
        assert subjects == [f"system:serviceaccount:{experiment}:ray-pods"]
        account = dev_run.one(
            "kubernetes:core/v1:ServiceAccount", f"{experiment}-service-account"
        ).inputs
        assert account["metadata"]["namespace"] == experiment
        assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(
            f":{experiment}-ray-pods"
        )
        policy = json.loads(
            dev_run.one("aws:iam/rolePolicy:RolePolicy", f"{experiment}-ray-pods-bucket").inputs[
                "policy"
            ]
        )
        bucket_arn = f"arn:aws:s3:::{dev_run.outputs['bucketName']}"
        assert {s["Resource"] for s in policy["Statement"]} == {bucket_arn, f"{bucket_arn}/*"}


def test_every_ray_image_matches_the_installed_ray(dev_run: OfflineRun) -> None:
    expected = f"rayproject/ray:{version('ray')}-py{sys.version_info.major}{sys.version_info.minor}"
    for experiment in EKS_EXPERIMENTS:
        spec = _spec(dev_run, experiment)
        assert spec["rayVersion"] == version("ray")
        pods = [spec["headGroupSpec"]] + spec["workerGroupSpecs"]
        assert {g["template"]["spec"]["containers"][0]["image"] for g in pods} == {expected}


def test_outputs_for_each_experiments_run_path(dev_run: OfflineRun) -> None:
    assert dev_run.outputs[outputs.SPOT_CLUSTER_NAME] == "spotburst-dev-spot"
    for experiment in EKS_EXPERIMENTS:
        assert dev_run.outputs[outputs.namespace(experiment)] == experiment
        assert dev_run.outputs[outputs.head_service(experiment)] == f"{experiment}-head-svc"
        assert dev_run.outputs[outputs.raycluster_name(experiment)] == experiment
        # KubeRay names the generated token Secret after the RayCluster.
        assert dev_run.outputs[outputs.token_secret(experiment)] == experiment
        kubeconfig = outputs.kubeconfig(experiment)
        assert json.loads(dev_run.outputs[kubeconfig])["kind"] == "Config"
        assert kubeconfig in dev_run.secret_outputs
    pools = dev_run.outputs[outputs.SPOT_CLUSTER_POOLS]
    assert pools["spot-gpu"]["maxSize"] == 4 and pools["spot-gpu"]["capacity"] == "spot"


def test_burst_nodes_start_ray_with_the_stack_token(dev_run: OfflineRun) -> None:
    parameter = dev_run.one("aws:ssm/parameter:Parameter")
    assert parameter.inputs["type"] == "SecureString"
    assert dev_run.outputs[outputs.BURST_TOKEN_PARAMETER] == parameter.inputs["name"]
    passwords = dev_run.of_type("random:index/randomPassword:RandomPassword")
    assert all(password.inputs["length"] >= 32 for password in passwords)
    for instance in dev_run.of_type("aws:ec2/instance:Instance"):
        script = instance.inputs["userData"]
        start = script[script.index("export RAY_AUTH_MODE=token") : script.index("START\nchmod")]
        assert f"--name {parameter.inputs['name']} --with-decryption" in start
        assert "export RAY_AUTH_TOKEN" in start
        assert start.index("RAY_AUTH_TOKEN") < start.index(" start ")


def _is_secret(value: Any) -> bool:
    """A secret input reaches the mock wrapped with Pulumi's secret signature."""
    from pulumi.runtime.rpc import _special_secret_sig, _special_sig_key

    return isinstance(value, dict) and value.get(_special_sig_key) == _special_secret_sig


def test_the_inference_head_can_be_lost_its_gcs_state_is_in_a_private_encrypted_redis(
    dev_run: OfflineRun,
) -> None:
    spec = _spec(dev_run, "inference")
    redis = dev_run.one("aws:elasticache/replicationGroup:ReplicationGroup").inputs
    secret = dev_run.one("kubernetes:core/v1:Secret", "inference-gcs-redis").inputs
    # The head's GCS writes to Redis over TLS with the password from the namespace's Secret.
    gcs = spec["gcsFaultToleranceOptions"]
    assert gcs["redisAddress"] == (
        f"rediss://master.inference-gcs-redis.mock.us-east-1.cache.amazonaws.com:{redis['port']:.0f}"
    )
    reference = gcs["redisPassword"]["valueFrom"]["secretKeyRef"]
    assert secret["metadata"] == {"name": reference["name"], "namespace": "inference"}
    assert _is_secret(secret["stringData"]) and _is_secret(redis["authToken"])
    (head,) = spec["headGroupSpec"]["template"]["spec"]["containers"]
    assert {"name": "RAY_REDIS_CA_PATH", "value": "/etc/ssl/certs"} in head["env"]
    # Redis itself survives a node: a replica in another zone, failed over automatically.
    assert redis["transitEncryptionEnabled"] is True and redis["atRestEncryptionEnabled"] is True
    assert redis["numCacheClusters"] == 2 and redis["automaticFailoverEnabled"] is True
    assert redis["multiAzEnabled"] is True
    # Private: in the cluster's private subnets, its port open to those subnets only.
    subnets = dev_run.one("aws:elasticache/subnetGroup:SubnetGroup").inputs["subnetIds"]
    assert subnets == ["spot-cluster-private-0-id", "spot-cluster-private-1-id"]
    (group_id,) = redis["securityGroupIds"]
    group = dev_run.one("aws:ec2/securityGroup:SecurityGroup", group_id.removesuffix("-id"))
    private = [
        s.inputs["cidrBlock"]
        for s in dev_run.of_type("aws:ec2/subnet:Subnet")
        if s.name.startswith("spot-cluster-private-")
    ]
    (rule,) = group.inputs["ingress"]
    assert (rule["fromPort"], rule["toPort"], rule["protocol"]) == (6379, 6379, "tcp")
    assert sorted(rule["cidrBlocks"]) == sorted(private) and len(private) == 2
    assert group.inputs["vpcId"] == "spot-cluster-vpc-id" and group.inputs["egress"] == []
    # Only the long-running service pays for it; batch experiments restart their runs.
    for experiment in set(EKS_EXPERIMENTS) - {"inference"}:
        assert "gcsFaultToleranceOptions" not in _spec(dev_run, experiment)
    assert len(dev_run.of_type("aws:elasticache/replicationGroup:ReplicationGroup")) == 1
