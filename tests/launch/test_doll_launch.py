"""`invoke run-doll` before anything starts: the user's policy file and the capacity trace
checked here, then travelling with the code to the target as inputs the workload's own
command line finds again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launch.doll import doll_run, run_doll
from launch.options import TargetOptions
from launch.working_dir import staged_working_dir
from workloads.common.spot_market.capacity import CapacityTraceError
from workloads.doll.options import DOLL_SPEC, DollOptions
from workloads.doll.policies import PolicyFileError, load_policy_class

POLICY = "class Mine:\n    def decide(self, state):\n        return range(state.workers)\n"


def test_the_policy_file_and_capacity_trace_travel_with_the_code(tmp_path: Path) -> None:
    policy = tmp_path / "mine.py"
    policy.write_text(POLICY)
    capacity = tmp_path / "capacity.json"
    capacity.write_text(json.dumps({"metadata": {"gap_seconds": 60}, "data": [3, 2]}))
    options = DollOptions(policies=("uniform-progress", f"{policy}:Mine"),
                          capacity_trace=capacity)
    run = doll_run(options)
    assert run.inputs == {"--policy-file": policy, "--capacity-trace": capacity}
    with staged_working_dir(tmp_path / "project", run.inputs) as (folder, inputs):
        command = run.command("out", "address:x", inputs)
        again = DOLL_SPEC.parse(command[2:])
        assert again.policies == options.policies
        shipped = folder / inputs["--policy-file"]
        assert shipped.read_text() == POLICY
        assert load_policy_class(shipped, "Mine").__name__ == "Mine"
        assert (folder / inputs["--capacity-trace"]).read_bytes() == capacity.read_bytes()
    assert again.policy_file == Path(inputs["--policy-file"])


def test_a_bad_capacity_trace_or_policy_file_stops_before_anything_runs(
    tmp_path: Path,
) -> None:
    capacity = tmp_path / "capacity.json"
    capacity.write_text(json.dumps({"metadata": {"gap_seconds": 60}, "data": [3, -1]}))
    with pytest.raises(CapacityTraceError, match=r"--capacity-trace: .*data\[1\] is -1"):
        run_doll(DollOptions(capacity_trace=capacity), TargetOptions(out=tmp_path / "r"))
    with pytest.raises(PolicyFileError, match="defines no class Other"):
        policy = tmp_path / "mine.py"
        policy.write_text(POLICY)
        run_doll(DollOptions(policies=(f"{policy}:Other",)), TargetOptions(out=tmp_path / "r"))
    assert not (tmp_path / "r").exists()
