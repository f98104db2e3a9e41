"""The notice agent's decisions against a real lab node endpoint (loopback HTTP) and a
recording stand-in for the GCS: when it drains, with which deadline, once per Ray node, and
what it records. Against a real Ray cluster: tests/workloads/test_notice_agent.py."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from spotlab.endpoint import NoticeEndpoint
from vocab.spot import NOTICE_AGENT_FILES, NOTICE_AGENT_MODULE
from vocab.spot_budget import AWS_BUDGET, lab_budget
from workloads.common.notice_agent import NoticeAgent, main, token_file_problem
from workloads.common.spot_notice import NoticeWatcher

REPO = Path(__file__).resolve().parents[2]


@dataclass
class FakeGcs:
    """Answers like the GCS: the node at the address (None: not joined), drains accepted."""

    node: str | None = "aa11"
    drains: list[tuple[str, float, str]] = field(default_factory=list)
    down: bool = False
    lookups: int = 0

    def find_node(self, node_ip: str | None, node_manager_port: int | None) -> str | None:
        self.lookups += 1
        if self.down:
            raise ConnectionError("GCS unreachable")
        return self.node

    def drain(self, node_id: str, deadline_epoch_s: float, message: str) -> tuple[bool, str]:
        self.drains.append((node_id, deadline_epoch_s, message))
        return True, ""


@pytest.fixture
def endpoint() -> Iterator[NoticeEndpoint]:
    with NoticeEndpoint(instance_id="spot-3") as served:
        yield served


def agent(endpoint: NoticeEndpoint, gcs: FakeGcs, **options: Any) -> tuple[NoticeAgent,
                                                                              list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    made = NoticeAgent(NoticeWatcher(endpoint.url), gcs, None, 4242, poll_s=0.1,
                       name="spot-3", record=records.append, **options)
    return made, records


def test_nothing_standing_drains_nothing(endpoint: NoticeEndpoint) -> None:
    gcs = FakeGcs()
    made, records = agent(endpoint, gcs)
    made.step()
    assert gcs.drains == [] and records == []


def test_before_any_notice_the_agent_finds_its_node_once_and_no_more(
        endpoint: NoticeEndpoint) -> None:
    """The connection to the GCS is made, and tried again each second until the node has
    joined, before any notice: not in the seconds the notice leaves."""
    now = [1_900_000_000.0]
    gcs = FakeGcs(node=None, down=True)
    made, records = agent(endpoint, gcs, clock=lambda: now[0])
    made.step()
    made.step()  # within the second: not tried again
    assert gcs.lookups == 1 and not made.found_node and records == []  # quiet: not up yet
    gcs.down, now[0] = False, now[0] + 1.0
    made.step()  # up, the node not joined yet
    now[0] += 1.0
    gcs.node = "aa11"
    made.step()
    assert gcs.lookups == 3 and made.found_node
    for _ in range(3):
        now[0] += 1.0
        made.step()
    assert gcs.lookups == 3 and gcs.drains == []
    endpoint.post_notice(now[0] + 6.0)
    made.step()
    assert [node for node, _, _ in gcs.drains] == ["aa11"]


def test_the_notice_drains_the_node_once_with_the_budgets_deadline(
        endpoint: NoticeEndpoint) -> None:
    gcs = FakeGcs()
    made, records = agent(endpoint, gcs, warning_s=6.0)
    endpoint.post_notice(1_900_000_006.0)
    made.step()
    made.step()  # a notice that stands drains a node once
    ((node, deadline, message),) = gcs.drains
    assert node == "aa11"
    assert deadline == pytest.approx(1_900_000_006.0 - lab_budget(6.0).deadline_margin_s)
    assert "spot notice" in message
    kinds = [r["event"] for r in records]
    assert kinds == ["agent-notice", "agent-drain"]
    drain = records[1]
    assert drain["node"] == "spot-3" and drain["ray_node_id"] == "aa11"
    assert drain["cause"] == "notice" and drain["accepted"] is True
    assert records[0]["termination_at"] == pytest.approx(1_900_000_006.0)


def test_a_ray_node_that_joins_while_the_notice_stands_is_drained_too(
        endpoint: NoticeEndpoint) -> None:
    """Ray's container restarted on the doomed node: its new node gets the drain as well."""
    gcs = FakeGcs(node=None)
    made, _ = agent(endpoint, gcs)
    endpoint.post_notice(1_900_000_120.0)
    made.step()
    assert gcs.drains == []  # no Ray node here yet
    gcs.node = "bb22"
    made.step()
    gcs.node = "cc33"
    made.step()
    assert [node for node, _, _ in gcs.drains] == ["bb22", "cc33"]
    assert gcs.drains[0][1] == AWS_BUDGET.drain_deadline(1_900_000_120.0)


def test_a_rebalance_recommendation_is_recorded_and_drains_only_when_asked(
        endpoint: NoticeEndpoint) -> None:
    quiet_gcs, draining_gcs = FakeGcs(), FakeGcs()
    quiet, quiet_records = agent(endpoint, quiet_gcs)
    drains, _ = agent(endpoint, draining_gcs, drain_on_rebalance=True)
    endpoint.post_rebalance(1_900_000_000.0)
    quiet.step()
    drains.step()
    assert quiet_gcs.drains == []
    assert quiet_records[0]["event"] == "agent-rebalance"
    assert quiet_records[0]["recommended_at"] == pytest.approx(1_900_000_000.0)
    ((_, deadline, message),) = draining_gcs.drains
    assert deadline == 1_900_000_000.0 + AWS_BUDGET.drain_timeout_s
    assert "spot rebalance" in message
    # the notice that follows brings the deadline forward: drained again, once
    endpoint.post_notice(1_900_000_050.0)
    drains.step()
    drains.step()
    assert [d[1] for d in draining_gcs.drains] == [
        1_900_000_000.0 + AWS_BUDGET.drain_timeout_s, AWS_BUDGET.drain_deadline(1_900_000_050.0)]


def test_an_unreachable_gcs_or_metadata_service_is_recorded_not_fatal(
        endpoint: NoticeEndpoint) -> None:
    gcs = FakeGcs(down=True)
    made, records = agent(endpoint, gcs)
    endpoint.post_notice(1_900_000_120.0)
    made.step()
    made.step()  # the same error is not recorded again at once
    assert [r["event"] for r in records] == ["agent-notice", "agent-error"]
    assert "GCS unreachable" in records[1]["error"]
    gcs.down = False
    made.step()
    assert len(gcs.drains) == 1
    endpoint.raw_body = b"garbage"
    made.step()
    assert records[-1]["event"] == "agent-error" and records[-1]["what"] == "metadata"


def test_the_command_line_needs_the_nodes_address(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--gcs-address", "127.0.0.1:1"])
    assert ended.value.code == 2
    assert "give --node-ip, --node-manager-port or both" in capsys.readouterr().err
    with pytest.raises(ValueError, match="IP or node-manager port"):
        NoticeAgent(NoticeWatcher("http://127.0.0.1:1"), FakeGcs(), None, None, 1.0)


def test_the_agent_will_not_start_without_a_readable_token_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spot pod's agent reads the cluster's token from the Secret mounted as a file: a
    missing or empty file is one line and exit 2 at start, not a refused drain at the
    notice."""
    token = tmp_path / "auth_token"
    argv = ["--gcs-address", "127.0.0.1:1", "--node-ip", "127.0.0.1"]
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    assert main(argv) == 2
    assert capsys.readouterr().err == (f"notice agent: RAY_AUTH_TOKEN_PATH={token}: the Ray "
                                       "token cannot be read (No such file or directory)\n")
    token.write_text("\n")
    assert main(argv) == 2
    assert "the Ray token file is empty" in capsys.readouterr().err
    token.write_text("x" * 32 + "\n")
    assert token_file_problem({"RAY_AUTH_TOKEN_PATH": str(token)}) is None
    assert token_file_problem({}) is None


def _project_imports(path: Path) -> set[str]:
    """The project modules a file imports, anywhere in it (a function's imports too; `from a
    import b` counts the module `a.b` too when there is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        if isinstance(node, ast.ImportFrom) and node.module:
            names += [f"{node.module}.{alias.name}" for alias in node.names
                      if REPO.joinpath(*node.module.split("."), f"{alias.name}.py").exists()]
        found.update(name for name in names if name.split(".")[0] in ("vocab", "workloads",
                                                                      "spotlab", "launch",
                                                                      "procs", "stacks",
                                                                      "components", "netem"))
    return found


def test_the_files_a_spot_pod_mounts_are_all_the_agent_imports() -> None:
    """Ray's image has no project: what the agent imports must be in NOTICE_AGENT_FILES,
    with every package's __init__ on the way."""
    wanted, todo = set(), [NOTICE_AGENT_MODULE]
    while todo:
        module = todo.pop()
        parts = module.split(".")
        path = REPO.joinpath(*parts).with_suffix(".py")
        if not path.exists():
            path = REPO.joinpath(*parts, "__init__.py")
        relative = path.relative_to(REPO).as_posix()
        if relative in wanted:
            continue
        wanted.add(relative)
        wanted.update(f"{'/'.join(parts[:depth])}/__init__.py" for depth in range(1, len(parts)))
        todo += sorted(_project_imports(path))
    assert wanted == set(NOTICE_AGENT_FILES)
