"""A stack config file that is not plain YAML with a `config:` mapping, or whose values are
refused, ends `invoke plan` with one line naming the file or the key (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from invoke import Context
from invoke.exceptions import Exit

import launch.stack_config
import tasks
from launch.stack_config import PROJECT_DIR, read_config_file
from stacks.fields import ConfigError

DEV = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
ADMIN = "spotburst:adminCidrs: []"
DOLL_WORKERS = 'cpu: "3"\n        memory: 5Gi\n        gpu: 0\n        resources: {spot: 3}\n' \
               "        minReplicas: 0\n        replicas: 4"


def _line(start: str) -> int:
    """The line number of the dev file's first line starting with `start`."""
    return next(n for n, line in enumerate(DEV.splitlines(), 1) if line.startswith(start))


ADMIN_LINE = _line("  " + ADMIN)
NEXT_KEY_LINE = _line("  spotburst:allowWorldAdminAccess")


def _dev(old: str, new: str) -> str:
    assert DEV.count(old) == 1, old
    return DEV.replace(old, new)


def _plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Exit:
    """`invoke plan --stack probe` with Pulumi.probe.yaml holding `text`."""
    (tmp_path / "Pulumi.probe.yaml").write_text(text)
    monkeypatch.setattr(launch.stack_config, "PROJECT_DIR", tmp_path)
    with pytest.raises(Exit) as ended:
        tasks.plan(Context(), stack="probe")
    assert ended.value.code == 2
    assert "\n" not in str(ended.value.message)
    return ended.value


PROBES = {
    "malformed YAML": (
        _dev(ADMIN, "spotburst:adminCidrs: [10.0.0.0/8"),
        f"error: Pulumi.probe.yaml line {NEXT_KEY_LINE}, column 3: not valid YAML: expected ',' "
        f"or ']', but got '?' (while parsing a flow sequence from line {ADMIN_LINE}, column 25)",
    ),
    "config not a mapping": (
        "config: 42\n",
        "error: Pulumi.probe.yaml: config: 42 is not allowed; expected a mapping of keys such "
        "as `spotburst:experiments: [doll]`",
    ),
    "a list at the top": (
        "- config\n",
        "error: Pulumi.probe.yaml: a list at the top is not allowed; expected a mapping with a "
        "`config:` key",
    ),
    "a key that is not a name": (
        "config:\n  42: doll\n",
        "error: Pulumi.probe.yaml: config key 42 is not allowed; expected a name such as "
        "spotburst:experiments",
    ),
    "a Python tag": (
        _dev(ADMIN, "spotburst:adminCidrs: !!python/object/apply:os.system [echo hi]"),
        f"error: Pulumi.probe.yaml line {ADMIN_LINE}, column 25: spotburst:adminCidrs: the tag "
        "!!python/object/apply:os.system is not allowed; plain YAML values only (strings, "
        "numbers, booleans, lists, mappings)",
    ),
    "a nan budget": (
        _dev("  # spotburst:maxHourlyUsd: 8", "  spotburst:maxHourlyUsd: .nan"),
        "error: spotburst:maxHourlyUsd: nan is not allowed; expected a finite number >= 0",
    ),
    "an infinite budget": (
        _dev("  # spotburst:maxHourlyUsd: 8", "  spotburst:maxHourlyUsd: -.inf"),
        "error: spotburst:maxHourlyUsd: -inf is not allowed; expected a finite number >= 0",
    ),
    "a nan placement resource": (
        _dev(DOLL_WORKERS, DOLL_WORKERS.replace("{spot: 3}", "{spot: .nan}")),
        "error: spotburst:doll.workerGroups[0].resources.spot: nan is not allowed; expected a "
        "finite number between 0 and 1000",
    ),
    "a worker that fits no node": (
        _dev(DOLL_WORKERS, DOLL_WORKERS.replace('cpu: "3"', 'cpu: "9999"')),
        "error: spotburst:doll.workerGroups[0].cpu: the pod asks 9999.1 CPUs (with the notice "
        "agent's container); a spotCpu node of "
        "type c5.xlarge leaves 3.5 to pods (4 vCPUs less 0.5 for the kubelet and daemon sets); "
        "ask for less or give the pool larger instance types",
    ),
    "a pool of a billion nodes": (
        _dev("maxSize: 24", "maxSize: 1000000000"),
        "error: spotburst:spotCluster.nodePools.spotCpu.maxSize: 1000000000 is not allowed; "
        "expected an integer between 1 and 200",
    ),
    "an alias bomb": (
        "x: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(f"x{i}: &a{i} [{', '.join(['*a' if i == 0 else f'*a{i - 1}'] * 9)}]\n"
                  for i in range(9))
        + DEV,
        "error: Pulumi.probe.yaml line 1, column 4: anchors and aliases (& and *) are not "
        "allowed; write each value out",
    ),
    "an anchor alone": (
        _dev(ADMIN, "spotburst:adminCidrs: &cidrs []"),
        f"error: Pulumi.probe.yaml line {ADMIN_LINE}, column 25: anchors and aliases (& and *) "
        "are not allowed; write each value out",
    ),
    "a key given twice": (
        DEV + "  aws:region: eu-west-1\n",
        f"error: Pulumi.probe.yaml line {len(DEV.splitlines()) + 1}, column 3: aws:region is "
        "given twice",
    ),
    "nested too deep": (
        _dev(ADMIN, "spotburst:adminCidrs: " + "[" * 10_000 + "]" * 10_000),
        f"error: Pulumi.probe.yaml line {ADMIN_LINE}, column 55: nested deeper than 32 levels",
    ),
    "a misspelt aws key": (
        _dev("  aws:region: us-east-1", "  aws:region: us-east-1\n  aws:regionn: eu-west-1"),
        "error: aws:regionn: unknown key of the aws provider; did you mean aws:region?",
    ),
    "a misspelt namespace": (
        _dev("  aws:region: us-east-1", "  aws:region: us-east-1\n  spotbust:maxHourlyUsd: 8"),
        "error: spotbust:maxHourlyUsd: unknown namespace 'spotbust' (known: spotburst, aws, "
        "kubernetes, eks, random, pulumi); did you mean spotburst:maxHourlyUsd?",
    ),
    "both halves of the internet": (
        _dev(ADMIN, "spotburst:adminCidrs: [0.0.0.0/1, 128.0.0.0/1]"),
        "error: spotburst:adminCidrs: 0.0.0.0/1 opens the EKS API and SSH to more of the "
        "internet than a /8 of public addresses; list your own address (e.g. 203.0.113.7/32), "
        "or set spotburst:allowWorldAdminAccess: true if you really mean it",
    ),
}


@pytest.mark.parametrize(("text", "line"), PROBES.values(), ids=PROBES.keys())
def test_invoke_plan_refuses_in_one_line_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, line: str
) -> None:
    assert _plan(tmp_path, monkeypatch, text).message == line


def test_a_python_tag_is_never_constructed(tmp_path: Path) -> None:
    made = tmp_path / "made"
    path = tmp_path / "Pulumi.probe.yaml"
    path.write_text(f"config:\n  spotburst:doll: !!python/object/apply:os.system [touch {made}]\n")
    with pytest.raises(ConfigError, match=r"^Pulumi\.probe\.yaml line 2, column 19: "
                                          r"spotburst:doll: the tag !!python/object/apply"):
        read_config_file(path)
    assert not made.exists()


def test_the_key_of_a_nested_tag_is_named(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.probe.yaml"
    text = _dev(DOLL_WORKERS, DOLL_WORKERS.replace('cpu: "3"', "cpu: !!python/name:os.system"))
    path.write_text(text)
    tagged = next(n for n, line in enumerate(text.splitlines(), 1) if "!!python" in line)
    with pytest.raises(ConfigError) as error:
        read_config_file(path)
    assert str(error.value).startswith(
        f"Pulumi.probe.yaml line {tagged}, column 14: spotburst:doll.workerGroups[0].cpu: the "
        "tag !!python/name:os.system is not allowed")


def test_values_arrive_as_the_engine_hands_them(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.probe.yaml"
    path.write_text("config:\n  aws:region: us-east-1\n  spotburst:maxHourlyUsd: 8\n"
                    "  spotburst:when: 2026-01-01\n  spotburst:bucket: {forceDestroy: true}\n")
    assert read_config_file(path) == {
        "aws:region": "us-east-1",
        "spotburst:maxHourlyUsd": "8",
        "spotburst:when": '"2026-01-01"',  # a YAML date: a string, not a traceback
        "spotburst:bucket": '{"forceDestroy": true}',
    }
    for empty in ("", "config:\n"):
        path.write_text(empty)
        assert read_config_file(path) == {}
    path.write_bytes(b"config:\n  a: \xff\n")
    with pytest.raises(ConfigError, match=r"^Pulumi\.probe\.yaml: not UTF-8 text"):
        read_config_file(path)


def test_a_missing_stack_is_still_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch.stack_config, "PROJECT_DIR", tmp_path)
    with pytest.raises(Exit) as ended:
        tasks.plan(Context(), stack="nowhere")
    assert ended.value.code == 2
    assert ended.value.message == (
        f"error: no config for stack 'nowhere': {tmp_path}/Pulumi.nowhere.yaml does not exist")


def test_the_deploy_gate_answers_a_bad_file_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`invoke up`'s gate (its own process, one JSON answer): the same line as the plan's."""
    from launch.account.deploy_gate import main

    (tmp_path / "Pulumi.probe.yaml").write_text("config: 42\n")
    monkeypatch.setattr(launch.stack_config, "PROJECT_DIR", tmp_path)
    assert main(["probe"]) == 2
    assert json.loads(capsys.readouterr().out) == {"error": (
        "Pulumi.probe.yaml: config: 42 is not allowed; expected a mapping of keys such as "
        "`spotburst:experiments: [doll]`")}
