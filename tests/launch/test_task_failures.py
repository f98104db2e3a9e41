"""Every task's failure paths end in one line on stderr and exit code 2, through the real
`invoke` command line; the tools they call are faked at the process boundary (executables
first on PATH, an HTTP endpoint speaking EC2's error format), never inside our code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from launch.ssm_tunnel import ssm_port_forward
from launch.tunnel import TunnelFailed

pytestmark = pytest.mark.subprocess

PROJECT_DIR = Path(__file__).resolve().parents[2]
INVOKE = [sys.executable, "-m", "invoke"]
UNKNOWN_STACK = "error: no stack named 'nosuch' found"
NO_BACKEND = ("error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI "
              "sessions")
# what `aws ssm start-session` prints (to stderr) and exits 255 with when the plugin is missing
PLUGIN_MISSING = (
    "\nSessionManagerPlugin is not found. Please refer to SessionManager Documentation here: "
    "http://docs.aws.amazon.com/console/systems-manager/session-manager-plugin-not-found\n"
)
AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
           "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL")


def fake_tool(bin_dir: Path, name: str, stdout: str = "", stderr: str = "", code: int = 0) -> None:
    """An executable `name` that prints fixed text and exits with `code`, like the real one."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"sys.stdout.write({stdout!r})\nsys.stderr.write({stderr!r})\nsys.exit({code})\n"
    )
    script.chmod(0o755)


def no_aws_credentials(tmp_path: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in AWS_ENV}
    return {**env, "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
            "AWS_CONFIG_FILE": str(tmp_path / "no-config"), "AWS_EC2_METADATA_DISABLED": "true"}


def invoke(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*INVOKE, *args], cwd=PROJECT_DIR, env=env, capture_output=True,
                          text=True, timeout=600)  # a guard against a hang only


def assert_one_line_exit_2(done: subprocess.CompletedProcess[str], line: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.endswith("\n"), done.stderr
    assert done.stderr.startswith("error: ") and line in done.stderr, done.stderr


@pytest.mark.parametrize(("command", "pulumi_error"), [
    (["run-doll", "--stack", "nosuch"], UNKNOWN_STACK),
    (["run-doll", "--stack", "nosuch"], NO_BACKEND),
    (["run-burst", "--stack", "nosuch"], UNKNOWN_STACK),
    (["sweep-burst", "--stack", "nosuch", "--bw", "30,60"], UNKNOWN_STACK),
    (["netem", "--stack", "nosuch", "--bw", "30"], NO_BACKEND),
])
def test_a_failing_pulumi_cli_ends_a_stack_task_with_its_error_in_one_line(
    tmp_path: Path, command: list[str], pulumi_error: str
) -> None:
    fake_tool(tmp_path / "bin", "pulumi", stderr=pulumi_error + "\n", code=255)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    out = ["--out", str(tmp_path / "never")] if command[0] != "netem" else []
    done = invoke(command + out, env)
    assert_one_line_exit_2(done, f"`pulumi stack output --stack nosuch` failed: {pulumi_error}")
    assert not (tmp_path / "never").exists()


def test_plan_for_an_unknown_stack_names_the_missing_config_file() -> None:
    done = invoke(["plan", "--stack", "nosuch"])
    assert_one_line_exit_2(done, "no config for stack 'nosuch'")
    assert "Pulumi.nosuch.yaml does not exist" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("command", [
    ["run-doll"],
    ["run-burst", "--bw", "30"],
    ["sweep-burst", "--bw", "30,60"],
    ["measure-link", "--bw", "30"],
])
def test_every_run_task_refuses_a_non_empty_out_before_anything_starts(
    tmp_path: Path, command: list[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "earlier.json").write_text("{}")
    done = invoke([*command, "--out", str(out)])
    assert_one_line_exit_2(done, f"--out {out} already holds files")
    assert [p.name for p in out.iterdir()] == ["earlier.json"]
    assert (out / "earlier.json").read_text() == "{}"


def test_fetch_prices_without_aws_credentials_says_to_configure_them(tmp_path: Path) -> None:
    target = tmp_path / "prices.json"
    done = invoke(["fetch-prices", "--out", str(target)], no_aws_credentials(tmp_path))
    assert_one_line_exit_2(done, "AWS: Unable to locate credentials; configure AWS credentials")
    assert not target.exists()


class _Unauthorized(BaseHTTPRequestHandler):
    """An EC2 endpoint that refuses every call the way EC2 does (403, its XML error)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = (b'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
                b"<Code>UnauthorizedOperation</Code><Message>You are not authorized to perform "
                b"this operation.</Message></Error></Errors><RequestID>r-1</RequestID></Response>")
        self.send_response(403)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_ec2() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_prices_refused_by_aws_prints_the_client_error(
    tmp_path: Path, refusing_ec2: str
) -> None:
    env = {**no_aws_credentials(tmp_path), "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test"}
    target = tmp_path / "prices.json"
    done = invoke(["fetch-prices", "--out", str(target), "--endpoint-url", refusing_ec2], env)
    assert_one_line_exit_2(
        done, "error: An error occurred (UnauthorizedOperation) when calling the "
        "DescribeSpotPriceHistory operation: You are not authorized to perform this operation.")
    assert not target.exists()


BURST_OUTPUTS = {
    "burstInstanceIds": {"login": ["i-0login"], "hpc": ["i-0hpc"], "cloud": ["i-0cloud"]},
    "burstSiteCidrs": {"onprem": "10.10.0.0/16", "cloud": "10.20.0.0/16"},
    "bucketName": "spotburst-results", "region": "eu-west-1",
}


def test_netem_without_aws_credentials_says_to_configure_them(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "pulumi", stdout=json.dumps(BURST_OUTPUTS))
    env = no_aws_credentials(tmp_path)
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    done = invoke(["netem", "--stack", "dev", "--bw", "30"], env)
    assert_one_line_exit_2(done, "AWS: Unable to locate credentials; configure AWS credentials")


DOLL_OUTPUTS = {
    "dollKubeconfig": json.dumps({"apiVersion": "v1", "kind": "Config"}),
    "dollNamespace": "doll", "dollHeadService": "doll-head-svc", "dollTokenSecret": "doll",
    "bucketName": "spotburst-results", "region": "eu-west-1",
}


def test_run_doll_on_a_stack_without_kubectl_says_to_install_it(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "pulumi", stdout=json.dumps(DOLL_OUTPUTS))
    env = {**os.environ, "PATH": str(tmp_path / "bin")}  # pulumi, and no kubectl
    done = invoke(["run-doll", "--stack", "dev", "--out", str(tmp_path / "never")], env)
    assert_one_line_exit_2(done, "kubectl is not installed (needed for --stack)")
    assert not (tmp_path / "never").exists()


def test_an_ssm_tunnel_without_the_session_manager_plugin_says_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(tmp_path / "bin", "aws", stderr=PLUGIN_MISSING, code=255)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(TunnelFailed) as failed:
        with ssm_port_forward("i-0login", 8265, "eu-west-1"):
            pytest.fail("the tunnel came up without the plugin")
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("the AWS CLI's Session Manager plugin is not installed")
    assert "session-manager-working-with-install-plugin" in message


@pytest.mark.parametrize(("command", "state_env"), [
    (["lab-status"], "SPOTBURST_LAB_STATE_DIR"),
    (["lab-down"], "SPOTBURST_LAB_STATE_DIR"),
    (["spot-lab-status"], "SPOTBURST_SPOTLAB_STATE_DIR"),
])
def test_lab_tasks_with_no_lab_up_say_so_in_one_line(
    tmp_path: Path, command: list[str], state_env: str
) -> None:
    state = tmp_path / "labs"
    done = invoke(command, {**os.environ, state_env: str(state)})
    assert_one_line_exit_2(done, f"lab is up (none recorded in {state})")
    assert done.stdout == ""


@pytest.mark.parametrize(("flag", "value", "line"), [
    ("--address", "notaurl",
     "error: --address: expected http://HOST:PORT (a Ray dashboard), got 'notaurl'"),
    ("--address", "ray://127.0.0.1:10001",
     "error: --address: expected http://HOST:PORT (a Ray dashboard), got "
     "'ray://127.0.0.1:10001'"),
    ("--out", "pyproject.toml", "error: --out: pyproject.toml is a file, not a folder"),
])
def test_a_bad_target_is_one_line_before_anything_starts(flag: str, value: str,
                                                         line: str) -> None:
    assert_one_line_exit_2(invoke(["run-doll", flag, value]), line)
