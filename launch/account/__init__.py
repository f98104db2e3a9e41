"""The AWS account side of a deployment: preflight checks before `invoke up`, the budget
prompt, and the leftover listing after `invoke destroy`.

- `scale`: the stack at maximum scale (`StackScale`, `scale_from_plan`) and the Service
  Quotas it needs (`required_quotas`, pure).
- `checks`: credentials, region, Pulumi backend, kubectl, quotas (`run_preflight`).
- `budget`: `confirm_budget`, the y/N prompt with both ends of the hourly cost.
- `leftovers`: `find_leftovers` / `render_leftovers`.
- `aws`: `AwsAccount`, the boto3 clients they share.
"""
