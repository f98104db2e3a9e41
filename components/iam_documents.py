"""IAM policy documents shared by the components (plain JSON strings, no resources)."""

from __future__ import annotations

import json


def trust_policy(principal: dict[str, str], action: str,
                 condition: dict[str, dict[str, str]] | None = None) -> str:
    """A role's trust policy: who (`principal`) may assume it, how, under which condition."""
    statement: dict[str, object] = {"Effect": "Allow", "Principal": principal, "Action": action}
    if condition is not None:
        statement["Condition"] = condition
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


EC2_TRUST = trust_policy({"Service": "ec2.amazonaws.com"}, "sts:AssumeRole")
"""Lets EC2 instances (nodes) assume a role."""


def web_identity_trust(provider_arn: str, issuer: str, subject: str) -> str:
    """Only `subject` (one service account) may assume the role, through the cluster's OIDC."""
    issuer_host = issuer.removeprefix("https://")
    return trust_policy({"Federated": provider_arn}, "sts:AssumeRoleWithWebIdentity", {
        "StringEquals": {
            f"{issuer_host}:sub": subject,
            f"{issuer_host}:aud": "sts.amazonaws.com",
        }
    })


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


CLUSTER_AUTOSCALER_READS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
)
CLUSTER_AUTOSCALER_WRITES = (
    "autoscaling:SetDesiredCapacity",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
)


def cluster_autoscaler_owner_tag(cluster_name: str) -> str:
    """The tag EKS puts on every Auto Scaling group of the cluster's managed node groups."""
    return f"k8s.io/cluster-autoscaler/{cluster_name}"


def cluster_autoscaler_policy(cluster_name: str) -> str:
    """Resize only this cluster's node groups (by their owner tag); describe the rest."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ResizeThisClustersNodeGroups",
                    "Effect": "Allow",
                    "Action": list(CLUSTER_AUTOSCALER_WRITES),
                    "Resource": "*",
                    "Condition": {
                        "StringEquals": {
                            f"aws:ResourceTag/{cluster_autoscaler_owner_tag(cluster_name)}": "owned"
                        }
                    },
                },
                {
                    "Sid": "ReadNodeGroupShapes",
                    "Effect": "Allow",
                    "Action": list(CLUSTER_AUTOSCALER_READS),
                    "Resource": "*",
                },
                {
                    # Labels and taints of a managed node group at size 0 (scale from zero).
                    "Sid": "DescribeThisClustersManagedNodeGroups",
                    "Effect": "Allow",
                    "Action": ["eks:DescribeNodegroup"],
                    "Resource": f"arn:aws:eks:*:*:nodegroup/{cluster_name}/*",
                },
            ],
        }
    )


def secure_parameter_read_policy(parameter_arn: str, key_arn: str) -> str:
    """Read one SecureString parameter: the parameter itself and its key for decryption."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": ["ssm:GetParameter"], "Resource": parameter_arn},
                {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": key_arn},
            ],
        }
    )


FIS_SERVICE = "fis.amazonaws.com"
SEND_SPOT_INTERRUPTIONS = "ec2:SendSpotInstanceInterruptions"
DESCRIBE_INSTANCES = "ec2:DescribeInstances"


def fis_trust(account_id: str) -> str:
    """Only AWS FIS, acting for an experiment of this account, may assume the role."""
    return trust_policy({"Service": FIS_SERVICE}, "sts:AssumeRole",
                        {"StringEquals": {"aws:SourceAccount": account_id}})


def spot_interruption_policy(
    region: str, account_id: str, instance_tags: dict[str, list[str]]
) -> str:
    """Interrupt only spot instances of this account and region that carry every one of
    `instance_tags` (key -> allowed values: the stack, its spot pools); describing instances
    (how FIS resolves tagged targets) has no resource-level scope in EC2."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": [DESCRIBE_INSTANCES], "Resource": "*"},
                {
                    "Effect": "Allow",
                    "Action": [SEND_SPOT_INTERRUPTIONS],
                    "Resource": f"arn:aws:ec2:{region}:{account_id}:instance/*",
                    "Condition": {
                        "StringEquals": {
                            f"aws:ResourceTag/{key}": values
                            for key, values in instance_tags.items()
                        }
                    },
                },
            ],
        }
    )


EFS_CSI_DESCRIBES = (
    "elasticfilesystem:DescribeAccessPoints",
    "elasticfilesystem:DescribeFileSystems",
    "elasticfilesystem:DescribeMountTargets",
)
EFS_CLIENT_ACTIONS = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite")


def efs_csi_policy(file_system_arn: str, access_point_arn: str) -> str:
    """The EFS CSI driver on one file system through one access point: describe them, mount
    and write (no root access, no access points made or deleted: the volume is static)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": list(EFS_CSI_DESCRIBES),
                    "Resource": [file_system_arn, access_point_arn],
                },
                {
                    "Effect": "Allow",
                    "Action": list(EFS_CLIENT_ACTIONS),
                    "Resource": file_system_arn,
                    # an ARN-valued key: compared as an ARN, never as text
                    "Condition": {
                        "ArnEquals": {"elasticfilesystem:AccessPointArn": access_point_arn}
                    },
                },
            ],
        }
    )
