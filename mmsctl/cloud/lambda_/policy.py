"""The IAM and resource policies of a Lambda deployment: least privilege, as plain documents.

The execution role may read the model object (that object, that version), read the
input bucket under the input prefix, write the output bucket under the output
prefix, and write to its own log group: nothing else. The ECR repository lets
Lambda pull images only for this function. Pure functions, so tests read the exact JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from mmsctl.cloud.aws.iam import POLICY_VERSION as VERSION

__all__ = ["RoleScope", "permissions_policy", "repository_policy", "trust_policy"]


@dataclass(frozen=True)
class RoleScope:
    """What one function's role may touch."""

    partition: str
    region: str
    account: str
    function: str
    model_bucket: Optional[str] = None
    model_key: Optional[str] = None
    model_versioned: bool = False
    input_bucket: Optional[str] = None
    input_prefix: str = ""
    output_bucket: Optional[str] = None
    output_prefix: str = ""
    #: Where failed asynchronous events go (an SQS queue, SNS topic or S3 bucket ARN).
    failure_arn: Optional[str] = None

    @property
    def log_group_arn(self) -> str:
        return f"arn:{self.partition}:logs:{self.region}:{self.account}:log-group:/aws/lambda/{self.function}"

    @property
    def function_arn(self) -> str:
        return f"arn:{self.partition}:lambda:{self.region}:{self.account}:function:{self.function}"

    def s3_arn(self, bucket: str, key: str) -> str:
        return f"arn:{self.partition}:s3:::{bucket}/{key}"


def trust_policy() -> dict[str, Any]:
    """Only the Lambda service may assume the role."""
    return {"Version": VERSION, "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def permissions_policy(scope: RoleScope) -> dict[str, Any]:
    """The role's inline policy: logs, the model object, the input prefix (read), the output prefix (write)."""
    statements: list[dict[str, Any]] = [{
        "Sid": "OwnLogGroup",
        "Effect": "Allow",
        "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": f"{scope.log_group_arn}:*",
    }]
    if scope.model_bucket and scope.model_key:
        statements.append({
            "Sid": "ReadModel",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"] if scope.model_versioned else ["s3:GetObject"],
            "Resource": scope.s3_arn(scope.model_bucket, scope.model_key),
        })
    if scope.input_bucket:
        statements.append({
            "Sid": "ReadInput",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": scope.s3_arn(scope.input_bucket, f"{scope.input_prefix}*"),
        })
    if scope.output_bucket:
        # A retried event skips the records already written: the handler lists the output key (ListBucket,
        # which the listing's s3:prefix matches below), then HEADs (GetObject) only a key that is there.
        # Not an unconditioned ListBucket: the role would see the whole output bucket, and a HEAD of a
        # missing key carries no s3:prefix, so only that would turn its 403 into a 404.
        statements.append({
            "Sid": "WriteOutput",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject"],
            "Resource": scope.s3_arn(scope.output_bucket, f"{scope.output_prefix}*"),
        })
        statements.append({
            "Sid": "FindOutput",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": f"arn:{scope.partition}:s3:::{scope.output_bucket}",
            "Condition": {"StringLike": {"s3:prefix": [f"{scope.output_prefix}*"]}},
        })
    if scope.failure_arn:
        statements.append(_failure_statement(scope.failure_arn))
    return {"Version": VERSION, "Statement": statements}


def _failure_statement(arn: str) -> dict[str, Any]:
    """Lambda sends a failed asynchronous event with the function's role: only to that destination."""
    service = arn.split(":", 3)[2]
    if service == "s3":
        return {"Sid": "SendFailures", "Effect": "Allow", "Action": ["s3:PutObject", "s3:ListBucket"],
                "Resource": [arn, f"{arn}/*"]}
    action = {"sqs": "sqs:SendMessage", "sns": "sns:Publish"}[service]
    return {"Sid": "SendFailures", "Effect": "Allow", "Action": [action], "Resource": arn}


def repository_policy(scope: RoleScope) -> dict[str, Any]:
    """Let Lambda pull this repository's images for this one function (AWS's same-account example, narrowed)."""
    return {"Version": VERSION, "Statement": [{
        "Sid": "LambdaPull",
        "Effect": "Allow",
        "Principal": {"Service": "lambda.amazonaws.com"},
        "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
        "Condition": {"StringLike": {"aws:sourceArn": [scope.function_arn, f"{scope.function_arn}:*"]}},
    }]}

