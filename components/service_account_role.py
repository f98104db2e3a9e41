"""An IAM role for one Kubernetes service account (IRSA) with one inline policy.

Used for the Ray pods of each experiment (the stack's bucket only) and for the Cluster
Autoscaler (this cluster's node groups only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.iam_documents import web_identity_trust


@dataclass
class ServiceAccountRoleArgs:
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    namespace: str
    service_account: str
    policy: pulumi.Input[str]
    policy_name: str
    """Suffix of the inline policy's resource name (what it grants, e.g. "bucket")."""
    tags: dict[str, str] = field(default_factory=dict)


class ServiceAccountRole(pulumi.ComponentResource):
    role_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: ServiceAccountRoleArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:iam:ServiceAccountRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        subject = f"system:serviceaccount:{args.namespace}:{args.service_account}"
        trust = pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
            lambda values: web_identity_trust(values[0], values[1], subject)
        )
        role = aws.iam.Role(name, assume_role_policy=trust, tags=args.tags, opts=child)
        aws.iam.RolePolicy(
            f"{name}-{args.policy_name}", role=role.id, policy=args.policy, opts=child
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
