"""An IAM role for one Kubernetes service account (IRSA) with access to one bucket only."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws


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


def web_identity_trust(provider_arn: str, issuer: str, subject: str) -> str:
    """Only `subject` (one service account) may assume the role, through the cluster's OIDC."""
    issuer_host = issuer.removeprefix("https://")
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringEquals": {
                            f"{issuer_host}:sub": subject,
                            f"{issuer_host}:aud": "sts.amazonaws.com",
                        }
                    },
                }
            ],
        }
    )


def bucket_read_write_policy(bucket_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": bucket_arn},
                {
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                    "Resource": f"{bucket_arn}/*",
                },
            ],
        }
    )
