"""The burst cluster's Ray token: generated per stack, kept as an SSM SecureString under a key
of its own, readable by one role (the burst nodes').

The EKS nodes' SSM policy may call `ssm:GetParameter` on any parameter, so the default
`aws/ssm` key would let them decrypt it; with this key they cannot (no grant reaches them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from components.iam_documents import secure_parameter_read_policy

TOKEN_LENGTH = 48


@dataclass
class RayTokenParameterArgs:
    parameter_name: str
    reader_role_id: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


class RayTokenParameter(pulumi.ComponentResource):
    parameter_name: pulumi.Output[str]
    parameter_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: RayTokenParameterArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:burst:RayTokenParameter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        token = random.RandomPassword(
            f"{name}-value", length=TOKEN_LENGTH, special=False, opts=child
        )
        key = aws.kms.Key(
            f"{name}-key",
            description=f"Encrypts the Ray token parameter {args.parameter_name}",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            tags=args.tags,
            opts=child,
        )
        parameter = aws.ssm.Parameter(
            name,
            name=args.parameter_name,
            type="SecureString",
            key_id=key.arn,
            value=token.result,
            description="Ray token of the burst cluster (RAY_AUTH_MODE=token)",
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-read",
            role=args.reader_role_id,
            policy=pulumi.Output.all(parameter.arn, key.arn).apply(
                lambda arns: secure_parameter_read_policy(arns[0], arns[1])
            ),
            opts=child,
        )
        self.parameter_name = parameter.name
        self.parameter_arn = parameter.arn
        self.register_outputs({"parameter_name": self.parameter_name})
