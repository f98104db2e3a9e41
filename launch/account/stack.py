"""The account checks for one Pulumi stack: its config and offline plan give the region, the
maximum scale and the EKS cluster names."""

from __future__ import annotations

from launch.account.aws import AwsAccount
from launch.account.checks import CheckResult, Status, run_preflight
from launch.account.leftovers import LeftoverReport, find_leftovers
from launch.account.scale import StackScale, cluster_names_from_plan, scale_from_plan
from launch.offline import OfflineRun, run_offline
from launch.stack_config import read_stack_config
from stacks.config import parse_config, with_admin_cidr_placeholder
from stacks.fields import ConfigError


def preflight_stack(
    stack: str, endpoint_url: str | None = None, account: AwsAccount | None = None
) -> tuple[list[CheckResult], str | None]:
    """Every preflight check for `stack`, and its region. Raises FileNotFoundError when the
    stack has no config file."""
    raw = read_stack_config(stack)
    region = raw.get("aws:region")
    account = account or AwsAccount(region, endpoint_url)
    planned: OfflineRun | None = None
    config_result: list[CheckResult] = []
    if region:  # without one the region check says how to set it; planning would only repeat it
        # Without adminCidrs `pulumi up` refuses (one FAIL line with the fix); the quotas are
        # still checked, on the plan with the placeholder, so every failure shows at once.
        planning, placeholder_note = with_admin_cidr_placeholder(raw)
        try:
            planned = run_offline(planning, stack)
            if placeholder_note:
                parse_config(raw, stack)
        except ConfigError as error:
            config_result = [CheckResult("stack config", Status.FAIL, str(error))]
    scale: StackScale | None = scale_from_plan(planned.resources) if planned else None
    clusters = cluster_names_from_plan(planned.resources) if planned else []
    burst = planned is not None and planned.config.burst is not None
    results = run_preflight(stack, region, scale, clusters, account, burst_enabled=burst)
    return config_result + results, region


def leftovers_for_stack(stack: str, endpoint_url: str | None = None) -> LeftoverReport:
    """What of `stack` is still billable. Works after `pulumi destroy`: the cluster names come
    from the offline plan of the stack's config, not from its (gone) outputs."""
    raw, _ = with_admin_cidr_placeholder(read_stack_config(stack))  # only names are needed
    planned = run_offline(raw, stack)
    account = AwsAccount(planned.config.region, endpoint_url)
    return find_leftovers(account, stack, cluster_names_from_plan(planned.resources))
