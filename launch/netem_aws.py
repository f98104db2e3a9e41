"""`invoke netem --stack S --bw N | --reset`: a profile applied to the burst nodes via SSM.

Every node (login, HPC workers, cloud nodes) shapes its own traffic to the other site with
the commands of netem.tc. SSM first asks each node which interface routes to the peer site
and whether its kernel can load sch_netem; then nodes with the same answers get the same
script in one Run Command. A node that fails is reported, and the shaping already applied on
the others is reset.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launch.ssm import InvocationResult, run_script
from netem.profile import Profile
from netem.tc import reset_commands, shaping_commands
from stacks.outputs import BurstOutputs, read_burst_outputs
from vocab.burst import ROLES, SITE_CLOUD, SITE_ONPREM, peer_site, site_of

DISCOVER_MARK = "spotburst-discover"
Runner = Callable[[list[str], list[str], str], dict[str, InvocationResult]]


@dataclass(frozen=True)
class BurstNode:
    role: str
    instance_id: str

    @property
    def site(self) -> str:
        return site_of(self.role)


@dataclass(frozen=True)
class NodeStatus:
    role: str
    instance_id: str
    action: str
    ok: bool
    detail: str
    interface: str = ""
    rate_mbit: float | None = None
    delay_applied: bool | None = None


def netem_on_stack(stack: str, profile: Profile | None, *,
                   outputs: dict[str, Any] | None = None, ssm: Any = None) -> list[NodeStatus]:
    """Apply `profile` (None: reset) on every burst node of `stack`; per-node statuses."""
    if outputs is None:
        from launch.pulumi_cli import stack_outputs

        outputs = stack_outputs(stack)
    burst = read_burst_outputs(outputs, stack)
    if ssm is None:
        from workloads.common.aws_client import aws_client

        ssm = aws_client("ssm", region=burst.region)

    def run(instance_ids: list[str], lines: list[str], comment: str
            ) -> dict[str, InvocationResult]:
        return run_script(ssm, instance_ids, lines, comment)

    return apply_profile(burst_nodes(burst), burst.site_cidrs, profile, run)


def burst_nodes(burst: BurstOutputs) -> list[BurstNode]:
    """Every burst node, by role in the order login, hpc, cloud."""
    return [BurstNode(role, instance) for role in ROLES for instance in burst.instance_ids[role]]


def apply_profile(nodes: list[BurstNode], cidrs: dict[str, str], profile: Profile | None,
                  run: Runner) -> list[NodeStatus]:
    """Shape every node for `profile`, or reset every node when `profile` is None."""
    found, statuses = _discover(nodes, cidrs, run)
    action = "apply" if profile is not None else "reset"
    groups: dict[tuple[str, str, bool], list[BurstNode]] = {}
    for node in nodes:
        if node.instance_id in found:
            groups.setdefault((node.site, *found[node.instance_id]), []).append(node)
    applied: list[NodeStatus] = []
    for (site, interface, netem), members in groups.items():
        if profile is None:
            lines, rate, delay = best_effort(reset_commands(interface)), None, None
        else:
            shaping = shaping_commands(profile, interface, site, cidrs[peer_site(site)],
                                       netem_available=netem)
            lines = best_effort(shaping.reset) + ["set -e"] + [shlex.join(c)
                                                               for c in shaping.apply]
            rate, delay = shaping.rate_mbit, shaping.delay_applied
        results = run([n.instance_id for n in members], lines,
                      f"spotburst netem {action} {site}")
        applied += [NodeStatus(n.role, n.instance_id, action, results[n.instance_id].ok,
                               _detail(results[n.instance_id]), interface, rate, delay)
                    for n in members]
    statuses += applied
    if profile is not None and not all(status.ok for status in statuses):
        shaped = [n for n in nodes if any(s.ok and s.instance_id == n.instance_id
                                          for s in applied)]
        statuses += _reset_after_failure(shaped, found, run)
    return statuses


def discovery_script(peer_cidr: str) -> list[str]:
    """Print the interface that routes to the peer site and whether netem can be loaded."""
    probe_ip = next(ipaddress.IPv4Network(peer_cidr).hosts())
    return [
        "set -eu",
        f"iface=$(ip -o route get {probe_ip} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')",
        'test -n "$iface"',
        "if modprobe sch_netem 2>/dev/null; then netem=yes; else netem=no; fi",
        f'echo "{DISCOVER_MARK} iface=$iface netem=$netem"',
    ]


def parse_discovery(stdout: str) -> tuple[str, bool]:
    for line in stdout.splitlines():
        if line.startswith(DISCOVER_MARK):
            fields = dict(part.split("=", 1) for part in line.split()[1:])
            return fields["iface"], fields["netem"] == "yes"
    raise ValueError(f"no discovery line in the node's output: {stdout[-200:]!r}")


def best_effort(commands: list[list[str]]) -> list[str]:
    """Shell lines that run `commands` and go on when they fail (nothing to reset yet)."""
    return [f"{shlex.join(command)} 2>/dev/null || true" for command in commands]


def format_statuses(statuses: list[NodeStatus]) -> str:
    rows = [f"{'role':<7}{'instance':<22}{'action':<28}{'iface':<8}{'Mbit/s':>8}"
            f"{'delay':>7}  status"]
    for s in statuses:
        rate = f"{s.rate_mbit:g}" if s.rate_mbit is not None else "-"
        delay = {True: "yes", False: "no", None: "-"}[s.delay_applied]
        rows.append(f"{s.role:<7}{s.instance_id:<22}{s.action:<28}{s.interface or '-':<8}"
                    f"{rate:>8}{delay:>7}  {'OK' if s.ok else 'FAILED'} {s.detail}")
    return "\n".join(rows)


def _discover(nodes: list[BurstNode], cidrs: dict[str, str],
              run: Runner) -> tuple[dict[str, tuple[str, bool]], list[NodeStatus]]:
    found: dict[str, tuple[str, bool]] = {}
    failed: list[NodeStatus] = []
    for site in (SITE_ONPREM, SITE_CLOUD):
        at_site = [node for node in nodes if node.site == site]
        if not at_site:
            continue
        results = run([n.instance_id for n in at_site],
                      discovery_script(cidrs[peer_site(site)]),
                      f"spotburst netem discover {site}")
        for node in at_site:
            result = results[node.instance_id]
            try:
                if not result.ok:
                    raise ValueError(_detail(result))
                found[node.instance_id] = parse_discovery(result.stdout)
            except ValueError as error:
                failed.append(NodeStatus(node.role, node.instance_id, "discover", False,
                                         str(error)))
    return found, failed


def _reset_after_failure(nodes: list[BurstNode], found: dict[str, tuple[str, bool]],
                         run: Runner) -> list[NodeStatus]:
    statuses = []
    for node in nodes:
        interface, _ = found[node.instance_id]
        result = run([node.instance_id], best_effort(reset_commands(interface)),
                     f"spotburst netem reset {node.role}")[node.instance_id]
        statuses.append(NodeStatus(node.role, node.instance_id, "reset (another node failed)",
                                   result.ok, _detail(result), interface))
    return statuses


def _detail(result: InvocationResult) -> str:
    if result.ok:
        return "ok"
    text = (result.stderr or result.stdout).strip().splitlines()
    return f"{result.status} (exit {result.exit_code}): {text[-1] if text else 'no output'}"
