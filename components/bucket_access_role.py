"""An IAM role for one Kubernetes service account (IRSA) with access to one bucket only."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.iam_documents import bucket_read_write_policy, web_identity_trust


@dataclass
class BucketAccessRoleArgs:
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    namespace: str
    service_account: str
    bucket_arn: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


class BucketAccessRole(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: BucketAccessRoleArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:iam:BucketAccessRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        subject = f"system:serviceaccount:{args.namespace}:{args.service_account}"
        trust = pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
            lambda values: web_identity_trust(values[0], values[1], subject)
        )
        role = aws.iam.Role(name, assume_role_policy=trust, tags=args.tags, opts=child)
        aws.iam.RolePolicy(
            f"{name}-bucket",
            role=role.id,
            policy=pulumi.Output.from_input(args.bucket_arn).apply(bucket_read_write_policy),
            opts=child,
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
