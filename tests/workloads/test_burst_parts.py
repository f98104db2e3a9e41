"""The workload's pure parts: generated inputs, the image transform, the model's gradient,
the command line's errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workloads.burst import compute
from workloads.burst.__main__ import main
from workloads.burst.cluster import NodeInfo, task_cpus
from workloads.burst.inputs import MANIFEST, ensure_inputs, generated_image
from workloads.burst.options import BURST_SPEC, BurstOptions
from workloads.common.options import OptionError
from workloads.common.storage import LocalStorage


def test_inputs_are_deterministic_and_reused(tmp_path: Path) -> None:
    config = BurstOptions(
        workload="param-server", directories=3, images_per_directory=2, ps_image_side=96
    )
    first = ensure_inputs(config, LocalStorage(tmp_path / "a"), say=lambda line: None)
    second = ensure_inputs(config, LocalStorage(tmp_path / "b"), say=lambda line: None)
    assert first == second and len(first) == 3 and all(len(t.files) == 2 for t in first)
    assert (tmp_path / "a" / first[0].files[0]).read_bytes() == (
        tmp_path / "b" / first[0].files[0]
    ).read_bytes()
    assert first[0].nbytes == sum((tmp_path / "a" / f).stat().st_size for f in first[0].files)
    said: list[str] = []
    assert ensure_inputs(config, LocalStorage(tmp_path / "a"), say=said.append) == first
    assert said and said[0].startswith("inputs: reusing 3 tasks")
    other = BurstOptions(
        workload="param-server", directories=3, images_per_directory=2, ps_image_side=96, seed=1
    )
    assert ensure_inputs(other, LocalStorage(tmp_path / "a"), say=lambda line: None) != first
    assert (tmp_path / "a" / MANIFEST).is_file()


def test_the_image_transform_makes_a_64_pixel_thumbnail() -> None:
    data = generated_image(320, 240, 3, np.random.default_rng(0))
    thumbnail = compute.transform_image(data, seed=5)
    assert thumbnail.startswith(b"\x89PNG")
    assert compute.transform_image(data, seed=5) == thumbnail
    from io import BytesIO

    from PIL import Image

    assert max(Image.open(BytesIO(thumbnail)).size) == 64


@pytest.mark.slow
def test_the_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(1)
    batch = compute.load_batch([generated_image(120, 150, k, rng) for k in range(2)])
    assert batch.shape == (2, 500, 400, 3)
    batch = batch[:, 200:260, 150:200]  # a crop: the same maths, 1/60 of the work per gradient
    labels = np.array([1, 7])
    weights = {k: v.astype(np.float64) for k, v in compute.initial_weights(0).items()}
    grads, _ = compute.gradient(weights, batch, labels)
    for name, index in (("fc", (0, 1)), ("conv", (10, 5)), ("fc_b", (2,)), ("conv_b", (3,))):
        up = {k: v.copy() for k, v in weights.items()}
        down = {k: v.copy() for k, v in weights.items()}
        up[name][index] += 1e-3
        down[name][index] -= 1e-3
        numeric = (
            compute.gradient(up, batch, labels)[1] - compute.gradient(down, batch, labels)[1]
        ) / 2e-3
        assert grads[name][index] == pytest.approx(numeric, rel=0.02, abs=1e-4)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workload", "video"], "--workload: expected one of image, param-server, got 'video'"),
        (["--data", "tape"], "--data: expected one of nfs, s3, got 'tape'"),
        (
            ["--scheduler", "fifo"],
            "--scheduler: expected a comma-separated list of default, data-aware (or both), "
            "got 'fifo'",
        ),
        (["--images", "0"], "--images: expected an integer in [1, 10000], got '0'"),
        (["--image-side", "63"], "--image-side: expected an integer in [64, 8192], got '63'"),
        (["--data", "s3"], "--bucket: needed with --data s3, got none"),
        (["--task-cpus", "-1"], "--task-cpus: expected an integer ≥ 1, got '-1'"),
        (["--bandwidth-mbit", "0"], "--bandwidth-mbit: expected a number > 0, got '0'"),
        (["--images", "3", "--calibration-tasks", "3"],  # one computes untimed: 2 are timed
         "--calibration-tasks: at most 2 with 3 tasks (each node computes one of them untimed "
         "first)"),
        (["--images", "1", "--calibration-tasks", "2"],  # one task: timed once, after untimed
         "--calibration-tasks: at most 1 with 1 task (each node computes one of them untimed "
         "first)"),
        (["--workload", "param-server", "--directories", "5", "--calibration-tasks", "5"],
         "--calibration-tasks: at most 4 with 5 tasks (each node computes one of them untimed "
         "first)"),
    ],
)
def test_bad_flags_are_named(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError) as error:
        BURST_SPEC.parse(argv)
    assert str(error.value) == message


@pytest.mark.parametrize(("argv", "timed"), [
    ([], 3), (["--images", "3"], 2), (["--images", "1"], 1), (["--images", "3",
     "--calibration-tasks", "1"], 1), (["--calibration-tasks", "7"], 7)])
def test_each_calibration_pass_times_what_was_asked_or_what_the_run_has(
    argv: list[str], timed: int,
) -> None:
    options = BURST_SPEC.parse(argv)
    assert options.calibration_count == timed
    assert options.parameters()["calibration_tasks"] == timed  # provenance: what was applied


def test_a_bad_flag_is_one_line_and_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--images", "x"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: --images: expected an integer in [1, 10000], got 'x'\n"
    assert captured.out == ""


def test_both_runs_the_default_scheduler_first() -> None:
    assert BURST_SPEC.parse([]).schedulers == ("default", "data-aware")
    assert BURST_SPEC.parse(["--scheduler", "both"]).schedulers == ("default", "data-aware")
    assert BURST_SPEC.parse(["--scheduler", "data-aware"]).schedulers == ("data-aware",)


def test_the_launcher_command_line_gives_back_the_options() -> None:
    options = BurstOptions(
        workload="param-server",
        schedulers=("data-aware",),
        task_cpus=1,
        bandwidth_mbit=31.0,
        profile_file=Path("/tmp/30m.json"),
        lab="aws",
    )
    argv = BURST_SPEC.argv(options)
    assert argv == [
        "--workload",
        "param-server",
        "--scheduler",
        "data-aware",
        "--task-cpus",
        "1",
        "--lab",
        "aws",
        "--bandwidth-mbit",
        "31",
        "--profile-file",
        "/tmp/30m.json",
    ]
    assert BURST_SPEC.parse(argv) == options


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--images", "100000000"], "--images: expected an integer in [1, 10000], got '100000000'"),
        (["--image-side", "1000000"],
         "--image-side: expected an integer in [64, 8192], got '1000000'"),
        (["--images", "5000"], "--images: the inputs would hold 110 GB of pixels, more than the "
         "16 GB a run generates and moves; use fewer or smaller images"),
        (["--workload", "param-server", "--directories", "9000"],
         "--directories: the inputs would hold 905 GB of pixels, more than the 16 GB a run "
         "generates and moves; use fewer or smaller images"),
    ],
)
def test_flags_that_size_the_inputs_are_bounded(argv: list[str], message: str) -> None:
    with pytest.raises(OptionError) as error:
        BURST_SPEC.parse([*argv, "--out", "x"])
    assert str(error.value) == message


def worker(role: str, cpus: int) -> NodeInfo:
    return NodeInfo(node_id=f"{role}-{cpus}", site="cloud" if role == "cloud" else "onprem",
                    role=role, cpus=cpus, ip="198.18.0.9")


def test_the_driver_takes_the_smallest_worker_nodes_cpus_unless_asked() -> None:
    nodes = [worker("login", 1), worker("hpc", 4), worker("cloud", 2)]
    assert task_cpus(nodes, None) == 2  # the login node runs no task
    assert task_cpus(nodes, 1) == 1 and task_cpus(nodes, 2) == 2


def test_the_driver_refuses_a_task_some_worker_node_cannot_hold() -> None:
    """A defence behind the launcher's check: every worker node computes in the calibration."""
    nodes = [worker("login", 8), worker("hpc", 4), worker("cloud", 2)]
    with pytest.raises(OptionError) as refused:
        task_cpus(nodes, 3)
    assert str(refused.value) == (
        "--task-cpus: 3 CPUs per task, more than a worker node has (hpc 4, cloud 2)")
