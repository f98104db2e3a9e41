"""The classes of bad input a skeptical user tries, each over EVERY task that takes such an
input (found from the tasks' own option specs, so a new task is covered the day it is
added): a name that is a path, a path longer than the file system allows, a results folder
that is a file or the root, an endpoint that is not a URL, a number far out of range. Each
is refused at the flag, before anything starts, in one line naming the flag (exit 2 through
the task wrapper). In-process: the specs are what the real command line parses with."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from invoke import Context, Task
from invoke.exceptions import Exit

import tasks
from launch import inference
from launch.options import RlLabOptions, TargetOptions
from launch.rl import run_rl
from workloads.burst.options import BurstOptions
from workloads.common.options import Option, OptionError, OptionSpec
from workloads.inference.options import InferenceOptions, ServiceOptions
from workloads.rl.options import RlEvaluateOptions, RlOptions

LONG_PART = "x" * 300
NOT_NAMES = ["../../x", "/etc", "a/b", "..", ".hidden", "-rf", "x" * 65, LONG_PART]


def task_specs() -> dict[str, tuple[OptionSpec[Any], ...]]:
    """Every task made by cli_task, with the specs its flags come from."""
    found: dict[str, tuple[OptionSpec[Any], ...]] = {}
    for name, task in vars(tasks).items():
        if isinstance(task, Task):
            specs = inspect.getclosurevars(task.body).nonlocals.get("specs", ())
            if specs:
                found[name] = tuple(specs)
    return found


def takers(predicate: Any) -> list[tuple[str, OptionSpec[Any], Option]]:
    """(task, spec, option) of every user option of every task for which predicate holds."""
    return [(name, spec, option) for name, specs in sorted(task_specs().items())
            for spec in specs for option in spec.user_options if predicate(option)]


def refused(spec: OptionSpec[Any], option: Option, text: str) -> str:
    with pytest.raises(OptionError) as error:
        spec.from_text({option.dest: text})
    message = str(error.value)
    assert error.value.flag == option.flag, message
    assert "\n" not in message
    return message


def test_the_classes_reach_the_tasks_they_name() -> None:
    """A guard that the discovery finds what the classes below are about."""
    names = {task for task, _, option in takers(lambda o: o.dest == "lab")}
    assert {"spot_lab_down", "spot_lab_status", "lab_down", "lab_status"} <= names
    outs = {task for task, _, option in takers(lambda o: o.dest == "out")}
    assert {"run_doll", "run_burst", "run_rl", "measure_link", "fetch_prices"} <= outs
    assert len(takers(lambda o: o.base is Path)) >= 10


@pytest.mark.parametrize("text", NOT_NAMES)
def test_a_name_that_is_a_path_is_refused_by_every_task_taking_a_lab_or_stack(
        text: str) -> None:
    for _, spec, option in takers(lambda o: o.dest in ("lab", "stack") and o.base is str):
        assert "expected a name of 1-64" in refused(spec, option, text)


@pytest.mark.parametrize("text", [LONG_PART, f"folder/{LONG_PART}/x", "a" * 5000])
def test_a_path_longer_than_the_file_system_allows_is_refused_by_every_path_flag(
        text: str) -> None:
    found = takers(lambda o: o.base is Path or o.info.path is not None)
    assert {"run_burst", "files_demo", "infer_up"} <= {task for task, _, o in found
                                                        if o.base is str}  # paths kept as text
    for _, spec, option in found:
        assert "each part at most 255 bytes" in refused(spec, option, text)
    with pytest.raises(OptionError, match="^--run: expected a path whose parts fit"):
        RlEvaluateOptions(run=text)
    with pytest.raises(OptionError, match="^--out: expected a path whose parts fit"):
        RlEvaluateOptions(run="results/rl/x", out=text)


def test_a_results_folder_that_is_a_file_or_the_root_is_refused_by_every_task(
        tmp_path: Path) -> None:
    a_file = tmp_path / "file.json"
    a_file.write_text("{}")
    found = takers(lambda o: (o.dest == "out" and o.base is Path) or o.info.path == "folder")
    assert {("run_burst", "--inputs-cache"), ("files_demo", "--dir")} <= {
        (task, option.flag) for task, _, option in found}
    for task, spec, option in found:
        wants_a_file = task == "fetch_prices"
        for text in (str(a_file / "under"), "/" if not wants_a_file else str(tmp_path)):
            refused(spec, option, text)
        if not wants_a_file:
            assert "is a file, not a folder" in refused(spec, option, str(a_file))


@pytest.mark.parametrize("url", ["not a url", "ftp://host", "http://", "http://h:99999"])
def test_an_endpoint_that_is_not_a_url_is_refused_by_every_task_taking_one(url: str) -> None:
    found = takers(lambda o: o.dest == "endpoint_url")
    assert {task for task, _, _ in found} >= {"fetch_prices", "preflight", "leftovers"}
    for _, spec, option in found:
        assert "expected http(s)://HOST:PORT" in refused(spec, option, url)


@pytest.mark.parametrize("shape", ["{a},,{b}", ",{a}", "{a},", "{a}, ,{b}", ",", " "])
def test_a_list_with_an_empty_item_is_refused_by_every_task_taking_a_list(shape: str) -> None:
    found = takers(lambda o: o.is_list)
    assert {"sweep_burst"} <= {task for task, _, _ in found}
    for _, spec, option in found:
        good = [option.text((item,)) for item in option.default or ()]
        a, b = (good + good)[:2] if good else ("1", "2")
        assert "expected a comma-separated list" in refused(spec, option, shape.format(a=a, b=b))


NOT_REQUIREMENTS = {
    "a URL": "numpy @ https://example.com/numpy-1.0.tar.gz",
    "a local file URL": "numpy @ file:///tmp/numpy",
    "a VCS URL": "git+https://github.com/numpy/numpy",
    "a local folder": "./vendor/numpy",
    "an absolute path": "/tmp/numpy",
    "a home path": "~/numpy",
    "an archive": "numpy-1.0-py3-none-any.whl",
    "another requirements file": "-r other.txt",
    "an editable": "-e .",
    "an index": "--index-url https://example.com/simple",
    "an option after a requirement": "numpy==1.26 --hash=sha256:00",
    "a variable": "numpy==${NUMPY_VERSION}",
    "a variable in a marker": "numpy ; python_version > '${PY}'",
    "garbage": "not a requirement!",
}


@pytest.mark.parametrize("line", NOT_REQUIREMENTS.values(), ids=NOT_REQUIREMENTS.keys())
def test_a_requirements_line_other_than_name_specifier_marker_is_refused_by_every_task(
        tmp_path: Path, line: str) -> None:
    found = takers(lambda o: o.dest == "requirements")
    assert {task for task, _, _ in found} >= {"run_doll", "run_burst", "sweep_burst", "run_rl",
                                               "run_elastic"}
    path = tmp_path / "requirements.txt"
    path.write_text(f"# ours\nnumpy>=1.20  # arrays\n\n{line}\nscipy\n")
    for _, spec, option in found:
        message = refused(spec, option, str(path))
        assert message.startswith(f"--requirements: {path}:4: {line!r}: "), message
        assert message.endswith("expected name[extras] specifier ; marker, one a line")


OUT_OF_RANGE = {
    "refresh": ["1e-9", "0", "1e9"],
    "warning": ["1e-9", "1e9"],
    "lab_seed": ["-1", str(2**32)],
    "object_store_mb": ["100000000", "1"],
    "hidden": ["1000000", "0"],
    "bw": ["1e-9", "1e15"],
    "workers": ["0", "1000000000"],
    "replace_delay": ["1e9"],
    "trace_compression": ["1e300"],
}


@pytest.mark.parametrize("dest", sorted(OUT_OF_RANGE))
def test_a_number_out_of_range_is_refused_by_every_task_taking_it(dest: str) -> None:
    found = takers(lambda o: o.dest == dest)
    assert found, dest
    for _, spec, option in found:
        for text in OUT_OF_RANGE[dest]:
            refused(spec, option, text)


def test_through_the_task_wrapper_a_bad_flag_is_exit_2_in_one_line() -> None:
    with pytest.raises(Exit) as ended:
        tasks.spot_lab_down(Context(), lab="../../etc")
    assert ended.value.code == 2
    message = str(ended.value.message)
    assert message.startswith("error: --lab: expected a name of 1-64") and "\n" not in message


def test_cross_flag_rules_are_checked_before_start(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"^--fail-workers: expected at most --workers \(3\)"):
        InferenceOptions(workers=3, fail_workers=5)
    store = tmp_path / "store"
    store.write_text("not a folder")
    with pytest.raises(OptionError, match="^--store: .* is a file"):
        ServiceOptions(store=str(store))
    for prefix in ("", "../..", "/abs", "a//b", "a/../b"):
        with pytest.raises(OptionError, match="^--s3-prefix: expected names joined by '/'"):
            BurstOptions(s3_prefix=prefix)
    assert BurstOptions(s3_prefix="team/burst-inputs").s3_prefix == "team/burst-inputs"


def test_a_gpu_is_asked_only_where_one_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_run(*args: Any, **kwargs: Any) -> None:
        pytest.fail("a target was started with a GPU this machine lacks")

    monkeypatch.setattr("launch.rl.run_workload", no_run)
    monkeypatch.setattr("launch.rl.local_gpus", lambda: 0)
    with pytest.raises(OptionError, match="^--learner-gpus: this machine has 0 GPUs, asked 1"):
        run_rl(RlOptions(learner_gpus=1.0))
    with pytest.raises(OptionError, match="^--learner: 0 leaves the learner no node"):
        run_rl(RlOptions(), lab=RlLabOptions(learner=0))
    called: list[Any] = []
    monkeypatch.setattr("launch.rl.run_workload", lambda *a, **k: called.append(a))
    monkeypatch.setattr("launch.rl.draw", lambda folder: None)
    monkeypatch.setattr("launch.rl.LocalStorage", lambda folder: None)
    run_rl(RlOptions(learner_gpus=1.0), TargetOptions(address="http://127.0.0.1:8265"))
    assert called  # on a cluster elsewhere the GPU is the cluster's to have


def test_infer_down_after_its_lab_is_gone_removes_the_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(inference.STATE_DIR_ENV, str(tmp_path / "inference"))
    monkeypatch.setenv("SPOTBURST_SPOTLAB_STATE_DIR", str(tmp_path / "spotlabs"))
    inference.ServiceRecord("127.0.0.1:1", {}, str(tmp_path / "store"), None, "abc123", 0.0,
                            "token").save()
    done = inference.infer_down()
    assert "spot lab abc123 was already gone" in done
    assert any(line.startswith("coordinator not stopped:") for line in done)
    assert not (tmp_path / "inference" / inference.RECORD_NAME).exists()  # infer-up may run


@pytest.mark.parametrize("text", ["", '{"ray_address": ', "[1]", "[" * 100_000, '{"x": NaN}',
                                  '{"ray_address": "127.0.0.1:1"}'])
def test_infer_down_removes_a_corrupt_service_record_so_infer_up_can_start_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(inference.STATE_DIR_ENV, str(tmp_path))
    record = tmp_path / inference.RECORD_NAME
    record.write_text(text)
    with pytest.raises(inference.ServiceError) as status:
        inference.ServiceRecord.load()
    assert "not a service record" in str(status.value) and "\n" not in str(status.value)
    done = inference.infer_down()
    assert done[0] == str(status.value) and not record.exists()


def test_a_state_record_is_read_by_the_one_json_reader() -> None:
    """What the reader refuses (each a class of garbage) is refused for every record kind."""
    from workloads.common.input_files import InputFileError, parse_json

    for text in ("", '{"a": ', "[" * 100_000, "[" * 65 + "]" * 65, '{"p": NaN}',
                 '{"p": Infinity}', json.dumps({"p": 1})[:-1]):
        with pytest.raises(InputFileError):
            parse_json("record", text)
    assert parse_json("record", "[" * 64 + "]" * 64) is not None
