"""The burst nodes' instance profile: SSM-managed, and S3 access to the stack's bucket only."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.iam_documents import EC2_TRUST, bucket_read_write_policy

SSM_MANAGED_INSTANCE = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


@dataclass
class NodeInstanceRoleArgs:
    bucket_arn: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


class NodeInstanceRole(pulumi.ComponentResource):
    instance_profile_name: pulumi.Output[str]
    role_id: pulumi.Output[str]

    def __init__(
        self, name: str, args: NodeInstanceRoleArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:iam:NodeInstanceRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            name,
            assume_role_policy=EC2_TRUST,
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-ssm", role=role.name, policy_arn=SSM_MANAGED_INSTANCE, opts=child
        )
        aws.iam.RolePolicy(
            f"{name}-bucket",
            role=role.id,
            policy=pulumi.Output.from_input(args.bucket_arn).apply(bucket_read_write_policy),
            opts=child,
        )
        profile = aws.iam.InstanceProfile(name, role=role.name, tags=args.tags, opts=child)
        self.instance_profile_name = profile.name
        self.role_id = role.id
        self.register_outputs({"instance_profile_name": self.instance_profile_name})
