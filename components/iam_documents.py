"""IAM policy documents shared by the components (plain JSON strings, no resources)."""

from __future__ import annotations

import json

EC2_TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
)
"""Lets EC2 instances (nodes) assume a role."""


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
