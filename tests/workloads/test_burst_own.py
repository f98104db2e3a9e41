"""Your own tasks under the burst schedulers: the task file and the inputs folder checked
before anything starts (one line naming the flag), the inputs copied where the built-in
workloads' are, and `burst_map` in a Ray driver of one's own giving the function's results
in input order, the same under both schedulers as called here."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from launch.burst import check_own
from tests.helpers.acceptance import PROJECT_DIR
from vocab.burst import TRANSFER_RESOURCE
from workloads.burst.inputs import ensure_own_inputs, own_location
from workloads.burst.options import BURST_SPEC, BurstOptions
from workloads.common.storage import LocalStorage
from workloads.common.user_code import UserCodeError

EXAMPLE = PROJECT_DIR / "examples" / "burst" / "word_stats.py"
TEXTS = PROJECT_DIR / "examples" / "burst" / "texts"


def make_inputs(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a.txt").write_text("one two two three three three\n")
    (folder / "b.txt").write_text("alpha beta\n")
    (folder / "c").mkdir()
    (folder / "c" / "x.txt").write_text("x y z\n")
    (folder / "c" / "deep").mkdir()
    (folder / "c" / "deep" / "y.txt").write_text("deep words here\n")
    (folder / ".hidden").write_text("not an input\n")
    return folder


def task_file(folder: Path, body: str) -> Path:
    path = folder / "tasks.py"
    path.write_text(body)
    return path


@pytest.mark.parametrize(("argv", "message"), [
    (["--script", "t.py"], "--script: needs --inputs, the folder of the tasks' inputs"),
    (["--inputs", "."], "--inputs: is the inputs of your task file: give --script too"),
    (["--script", "t.py", "--inputs", "no-such-folder"], "--inputs: no-such-folder: no such "
     "folder"),
    (["--script", "t.py", "--inputs", ".", "--function", "not a name"],
     "--function: expected a Python name, got 'not a name'"),
])
def test_bad_own_flags_are_named(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError) as error:
        BURST_SPEC.parse(argv)
    assert str(error.value) == message


def test_an_inputs_folder_needs_entries_with_data(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"--inputs: .*empty holds no entry"):
        BurstOptions(script=EXAMPLE, inputs=empty)
    (empty / "sub").mkdir()
    with pytest.raises(ValueError, match=r"--inputs: .*sub is a folder without files"):
        BurstOptions(script=EXAMPLE, inputs=empty)


def test_each_entry_is_one_task_and_the_calibration_counts_them(tmp_path: Path) -> None:
    options = BurstOptions(script=EXAMPLE, inputs=make_inputs(tmp_path / "in"))
    assert options.kind == "own" and options.tasks == 3  # a.txt, b.txt, c (.hidden left out)
    assert options.calibration_count == 2
    assert options.parameters()["script"] == str(EXAMPLE)
    assert BURST_SPEC.parse(BURST_SPEC.argv(options)) == options  # the launcher's argv


@pytest.mark.parametrize(("body", "function", "message"), [
    ("def other(path):\n    return 1\n", "process",
     "--function: {path} defines no 'process': name the function with --function"),
    ("import surely_not_installed_pkg\n\ndef process(path):\n    return 1\n", "process",
     "--script: {path} imports 'surely_not_installed_pkg', which is not installed here "
     "(install it, and list it in --requirements for a remote cluster)"),
    ("raise RuntimeError('bad\\nconfig')\n\ndef process(path):\n    return 1\n", "process",
     "--script: {path} fails to import: RuntimeError: bad config (line 1)"),
    ("def process(:\n", "process", "--script: {path}: "),
    ("process = 3\n", "process", "--function: 'process' in {path} is not callable"),
])
def test_a_task_file_is_checked_before_the_lab_starts(
    tmp_path: Path, body: str, function: str, message: str,
) -> None:
    path = task_file(tmp_path, body)
    options = BurstOptions(script=path, function=function,
                           inputs=make_inputs(tmp_path / "in"))
    with pytest.raises(UserCodeError) as error:
        check_own(options)
    assert str(error.value).startswith(message.format(path=path.resolve()))
    assert "\n" not in str(error.value)


def test_the_inputs_are_copied_once_per_set_and_named_by_entry(tmp_path: Path) -> None:
    folder = make_inputs(tmp_path / "in")
    storage = LocalStorage(tmp_path / "nfs" / own_location(folder))
    lines: list[str] = []
    tasks = ensure_own_inputs(folder, storage, lines.append)
    assert [(t.name, t.root, t.files) for t in tasks] == [
        ("a.txt", "a.txt", ("a.txt",)),
        ("b.txt", "b.txt", ("b.txt",)),
        ("c", "c", ("c/deep/y.txt", "c/x.txt")),
    ]
    assert tasks[2].nbytes == len("x y z\n") + len("deep words here\n")
    root = tmp_path / "nfs" / own_location(folder)
    assert (root / "c" / "deep" / "y.txt").read_text() == "deep words here\n"
    assert ensure_own_inputs(folder, storage, lines.append) == tasks
    assert lines[-1].startswith("inputs: reusing 3 tasks")
    (folder / "b.txt").write_text("changed, and longer\n")
    assert own_location(folder) != root.name  # another set: another folder, nothing stale


@pytest.mark.subprocess
def test_invoke_refuses_a_bad_task_file_in_one_line_before_the_lab(tmp_path: Path) -> None:
    path = task_file(tmp_path, "def other(path):\n    return 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "invoke", "run-burst", "-f", str(path), "--inputs", str(TEXTS),
         "--out", str(tmp_path / "never")],
        cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"error: --function: {path.resolve()} defines no 'process': name "
                           "the function with --function\n")
    assert not (tmp_path / "never").exists()


# --- burst_map in one's own Ray driver ---------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    import ray

    # one on-prem worker node (the transfer slot marks a worker), as a plain ray.init
    ray.init(num_cpus=2, resources={TRANSFER_RESOURCE: 1}, include_dashboard=False,
             logging_level=logging.ERROR)
    yield
    ray.shutdown()


def word_total(path: str) -> int:
    files = [Path(path)] if Path(path).is_file() else sorted(Path(path).rglob("*.txt"))
    return sum(len(file.read_text().split()) for file in files)


@pytest.mark.ray
@pytest.mark.parametrize("scheduler", ["default", "data-aware"])
def test_burst_map_returns_the_functions_results_in_input_order(
    ray_cluster: None, tmp_path: Path, scheduler: str,
) -> None:
    from workloads.burst.api import burst_map

    inputs = [*sorted(TEXTS.iterdir())][::-1]  # any order: the results follow it
    lines: list[str] = []
    assert burst_map(word_total, [str(p) for p in inputs], scheduler=scheduler,
                     stage_dir=tmp_path, say=lines.append) == [word_total(str(p)) for p in inputs]
    assert len(lines) == len(inputs)  # a progress line per task


def fails_on_b(path: str) -> int:
    if path.endswith("b.txt"):
        raise ValueError("cannot read\nthis one")
    return 1


@pytest.mark.ray
def test_burst_map_names_the_input_a_function_raised_on(
    ray_cluster: None, tmp_path: Path,
) -> None:
    from workloads.burst.api import burst_map
    from workloads.burst.work import TaskFunctionError

    folder = make_inputs(tmp_path / "in")
    with pytest.raises(TaskFunctionError) as error:
        burst_map(fails_on_b, [folder / "a.txt", folder / "b.txt"], stage_dir=tmp_path)
    assert "fails_on_b() raised on input '00001-b.txt': ValueError: cannot read this one" in \
        str(error.value)
    with pytest.raises(TaskFunctionError, match="returned a set on input '00000-a.txt'"):
        burst_map(lambda path: {1}, [folder / "a.txt"], stage_dir=tmp_path)
    assert json.dumps(burst_map(lambda path: None, [folder / "c"], stage_dir=tmp_path)) == \
        "[null]"


def own_options(tmp_path: Path, script: Path, inputs: Path) -> BurstOptions:
    return BurstOptions(script=script, inputs=inputs, data_dir=str(tmp_path / "nfs"),
                        stage_dir=str(tmp_path / "stage"), out=str(tmp_path / "out"))


@pytest.mark.ray
def test_the_driver_writes_each_schedulers_outputs_in_input_order(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import contextlib

    from workloads.burst import __main__ as driver

    monkeypatch.setattr(driver, "ray_session", lambda **_: contextlib.nullcontext())
    script = task_file(tmp_path, "from pathlib import Path\n\n\ndef count(path):\n    p = "
                       "Path(path)\n    files = [p] if p.is_file() else sorted(p.rglob('*'))\n"
                       "    return sum(len(f.read_text().split()) for f in files if "
                       "f.is_file())\n")
    inputs = make_inputs(tmp_path / "in")
    options = replace(own_options(tmp_path, script, inputs), function="count")
    assert driver.run(options) == 0
    out = tmp_path / "out"
    expected = [{"input": "a.txt", "result": 6}, {"input": "b.txt", "result": 2},
                {"input": "c", "result": 6}]
    for name in ("default", "data-aware"):
        rows = [json.loads(line) for line in
                (out / "outputs" / f"{name}.jsonl").read_text().splitlines()]
        assert rows == expected, name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workload"] == "own" and summary["task_count"] == 3
    assert (tmp_path / "nfs" / own_location(inputs) / "c" / "deep" / "y.txt").is_file()


@pytest.mark.ray
def test_a_function_raising_on_an_input_ends_the_run_with_one_line_naming_it(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import contextlib

    from vocab.errors import FAILED_PREFIX
    from workloads.burst import __main__ as driver

    monkeypatch.setattr(driver, "ray_session", lambda **_: contextlib.nullcontext())
    script = task_file(tmp_path, "def process(path):\n    if path.endswith('b.txt'):\n"
                       "        raise KeyError('no such column')\n    return 1\n")
    options = replace(own_options(tmp_path, script, make_inputs(tmp_path / "in")),
                      calibration_tasks=1, schedulers=("default",))
    assert driver.run(options) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (f"{FAILED_PREFIX}process() raised on input 'b.txt': KeyError: "
                         "'no such column'")
    log = "\n".join(lines[:-1])  # the traceback, the user's frames in it
    assert f'File "{script}", line 3, in process' in log and "KeyError" in log
    assert not (tmp_path / "out").exists()  # no results of a failed run


def where_and_words(path: str) -> list[object]:
    return [path, word_total(path)]


@pytest.mark.ray
# data-aware moves the data ahead of the task; the default scheduler's task fetches it itself
@pytest.mark.parametrize("fetch_in_task", [False, True])
def test_a_node_that_cannot_see_the_inputs_computes_on_a_staged_copy_of_the_same_name(
    ray_cluster: None, tmp_path: Path, fetch_in_task: bool,
) -> None:
    import ray

    from workloads.burst.data import DataSource, RunContext
    from workloads.burst.work import Workload, run_task, transfer

    folder = make_inputs(tmp_path / "in")
    nfs = tmp_path / "nfs" / own_location(folder)
    [_, _, task] = ensure_own_inputs(folder, LocalStorage(nfs), lambda line: None)
    node = ray.get_runtime_context().get_node_id()
    # this node as the cloud: the on-prem folder is not visible to it, a reader sends it
    context = RunContext(DataSource("nfs", str(nfs)), str(tmp_path / "stage"),
                         {node: "cloud"}, node)
    workload = Workload("callable", 0, fn=where_and_words, function="where_and_words")
    if not fetch_in_task:
        moved = ray.get(transfer.remote(context, task))
        assert moved["bytes_moved"] == task.nbytes
    record = ray.get(run_task.remote(context, workload, task, fetch_in_task))
    staged = tmp_path / "stage" / "c" / "c"
    assert record["output"] == [str(staged), word_total(str(folder / "c"))]
    assert record["site"] == "cloud" and record.get("bytes_moved", 0) == (
        task.nbytes if fetch_in_task else 0)
    assert not staged.exists()  # removed after the task
