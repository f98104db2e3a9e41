"""The AWS account side of a deployment: preflight checks before `invoke up`, the budget
prompt, and the leftover listing after `invoke destroy`.

- `scale`: the stack at maximum scale (`StackScale`, `scale_from_plan`) and the Service
  Quotas it needs (`required_quotas`, pure; vCPUs from the dated `vocab/instances.json`).
- `usage`: what other resources in the region already use of those quotas.
- `checks`: credentials, region, Pulumi backend, kubectl, the AWS CLI and its Session Manager
  plugin, quotas (`run_preflight`).
- `budget`: `confirm_budget`, the y/N prompt with both ends of the hourly cost.
- `leftovers`: `find_leftovers` / `render_leftovers`.
- `stack`: the same for one Pulumi stack, from its config and offline plan
  (`preflight_stack`, `leftovers_for_stack`), as `invoke preflight` / `invoke leftovers` run.
- `aws`: `AwsAccount`, the boto3 clients they share.
"""
