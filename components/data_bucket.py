"""The stack's S3 bucket for datasets and results: private, encrypted, TLS only, owner-enforced."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

RESULTS_PREFIX = "results/"


@dataclass
class DataBucketArgs:
    name_prefix: str
    force_destroy: bool
    versioning: bool
    expire_results_after_days: int
    tags: dict[str, str] = field(default_factory=dict)


class DataBucket(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]

    def __init__(self, name: str, args: DataBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotburst:storage:DataBucket", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            name,
            bucket_prefix=f"{args.name_prefix}-",
            force_destroy=args.force_destroy,
            tags=args.tags,
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="AES256"
                    ),
                )
            ],
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket.id,
            policy=bucket.arn.apply(_deny_insecure_transport),
            opts=child,
        )
        aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled" if args.versioning else "Suspended"
            ),
            opts=child,
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-expire-results",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-results",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=RESULTS_PREFIX),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(
                        days=args.expire_results_after_days
                    ),
                )
            ],
            opts=child,
        )
        self.bucket_name = bucket.bucket
        self.bucket_arn = bucket.arn
        self.register_outputs({"bucket_name": self.bucket_name, "bucket_arn": self.bucket_arn})


def _deny_insecure_transport(bucket_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [bucket_arn, f"{bucket_arn}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )
