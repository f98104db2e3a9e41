"""Real spot interruptions on demand: one AWS FIS experiment template per spot node pool, and
the one role FIS acts with.

Each template sends `aws:ec2:send-spot-instance-interruptions` (a rebalance recommendation
and the two-minute interruption notice, then the interruption itself) to ONE running spot
instance of its pool, picked by FIS among the instances that carry the stack's and the
pool's tags (the node pools' launch templates put them on every instance). Starting a
template (`fis.start_experiment`, `invoke preempt`) interrupts one more instance; no stop
condition but `none` (an interruption cannot be taken back).

The role trusts FIS for this account only, may describe instances (how FIS resolves tagged
targets; EC2 scopes that action to nothing narrower) and may interrupt only this region's
instances that carry the stack's tag and a spot pool's tag: never an instance of another
stack, an on-demand pool or anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.iam_documents import fis_trust, spot_interruption_policy
from vocab.spot import SPOT_WARNING_S
from vocab.tags import NODE_POOL_TAG_KEY, STACK_TAG_KEY, node_pool_instance_tags

INTERRUPT_ACTION = "aws:ec2:send-spot-instance-interruptions"
TARGET_KEY = "SpotInstances"
"""The action's target name for spot instances (FIS's vocabulary)."""
ONE_INSTANCE = "COUNT(1)"
DURATION_BEFORE_INTERRUPTION = f"PT{int(SPOT_WARNING_S // 60)}M"
"""FIS's minimum, and what EC2 itself gives: the two-minute warning."""


@dataclass
class SpotInterruptionsArgs:
    stack: str
    region: str
    pools: list[str]
    """The spot node pools (their names: spot-cpu, spot-gpu)."""
    tags: dict[str, str] = field(default_factory=dict)


class SpotInterruptions(pulumi.ComponentResource):
    template_ids: dict[str, pulumi.Output[str]]
    """Spot pool name -> its experiment template's id."""
    role_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: SpotInterruptionsArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotburst:fis:SpotInterruptions", name, None, opts)
        if not args.pools:
            raise ValueError(f"{name}: no spot pool to interrupt")
        child = pulumi.ResourceOptions(parent=self)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        role = aws.iam.Role(
            f"{name}-fis",
            description=f"AWS FIS interrupts spot instances of stack {args.stack}",
            assume_role_policy=account.account_id.apply(fis_trust),
            tags=args.tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-fis-interrupt",
            role=role.id,
            policy=account.account_id.apply(
                lambda account_id: spot_interruption_policy(
                    args.region,
                    account_id,
                    {STACK_TAG_KEY: [args.stack], NODE_POOL_TAG_KEY: list(args.pools)},
                )
            ),
            opts=child,
        )
        self.template_ids = {}
        for pool in args.pools:
            template = aws.fis.ExperimentTemplate(
                f"{name}-{pool}",
                description=f"Interrupt one running spot instance of pool {pool} of stack "
                f"{args.stack} (a rebalance recommendation, the two-minute notice, the end)",
                role_arn=role.arn,
                stop_conditions=[aws.fis.ExperimentTemplateStopConditionArgs(source="none")],
                targets=[
                    aws.fis.ExperimentTemplateTargetArgs(
                        name=TARGET_KEY,
                        resource_type="aws:ec2:spot-instance",
                        selection_mode=ONE_INSTANCE,
                        resource_tags=[
                            aws.fis.ExperimentTemplateTargetResourceTagArgs(key=key, value=value)
                            for key, value in node_pool_instance_tags(args.stack, pool).items()
                        ],
                        filters=[
                            aws.fis.ExperimentTemplateTargetFilterArgs(
                                path="State.Name", values=["running"]
                            )
                        ],
                    )
                ],
                actions=[
                    aws.fis.ExperimentTemplateActionArgs(
                        name="interrupt",
                        action_id=INTERRUPT_ACTION,
                        parameters=[
                            aws.fis.ExperimentTemplateActionParameterArgs(
                                key="durationBeforeInterruption",
                                value=DURATION_BEFORE_INTERRUPTION,
                            )
                        ],
                        target=aws.fis.ExperimentTemplateActionTargetArgs(
                            key=TARGET_KEY, value=TARGET_KEY
                        ),
                    )
                ],
                # no running instance to interrupt: the experiment fails, and says so
                experiment_options=aws.fis.ExperimentTemplateExperimentOptionsArgs(
                    empty_target_resolution_mode="fail"
                ),
                tags={**args.tags, "Name": f"{args.stack}-{pool}-interrupt"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
            )
            self.template_ids[pool] = template.id
        self.role_arn = role.arn
        self.register_outputs({"template_ids": self.template_ids, "role_arn": self.role_arn})
