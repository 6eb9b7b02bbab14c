"""The execution role of a SageMaker endpoint: least privilege, as plain documents (tests read the exact JSON).

SageMaker assumes the role to pull the image, read the model data and write the containers' logs
("CreateModel API: Execution Role Permissions", SageMaker developer guide), and during an update with
auto-rollback to read the alarms that guard it ("Auto-Rollback Configuration and Monitoring"). Each
statement names exactly those resources: the image's repositories (ECR takes no narrower resource than a
repository; ``ecr:GetAuthorizationToken`` takes none at all, its own statement), the ``model.tar.gz``
objects the endpoint's configurations use, the endpoint's own log group, and the update's alarms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmsctl.cloud.aws.iam import POLICY_VERSION as VERSION

__all__ = ["RoleScope", "permissions_policy", "trust_policy"]


@dataclass(frozen=True)
class RoleScope:
    """What one endpoint's role may touch."""

    partition: str
    region: str
    account: str
    endpoint: str
    #: ``ACCOUNT/REPOSITORY`` of each image the endpoint's models run (one; two while an update moves images).
    repositories: tuple[str, ...]
    #: ``s3://bucket/key`` of each model.tar.gz its models load (none for a model baked into the image).
    model_objects: tuple[str, ...] = ()
    #: CloudWatch alarm names an update's auto-rollback watches.
    alarms: tuple[str, ...] = ()

    @property
    def log_group_arn(self) -> str:
        return (f"arn:{self.partition}:logs:{self.region}:{self.account}:log-group:"
                f"/aws/sagemaker/Endpoints/{self.endpoint}")


def trust_policy() -> dict[str, Any]:
    """Only SageMaker may assume the role."""
    return {"Version": VERSION, "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def permissions_policy(scope: RoleScope) -> dict[str, Any]:
    """The role's inline policy: pull the image, read the model data, write the log group (and read the alarms)."""
    ecr = f"arn:{scope.partition}:ecr:{scope.region}"
    statements: list[dict[str, Any]] = [
        {"Sid": "PullImage", "Effect": "Allow",
         "Action": ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
         "Resource": [f"{ecr}:{repo.split('/', 1)[0]}:repository/{repo.split('/', 1)[1]}"
                      for repo in sorted(scope.repositories)]},
        # GetAuthorizationToken has no resource-level permissions: "*" is the only resource it takes.
        {"Sid": "RegistryLogin", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
        {"Sid": "OwnLogGroup", "Effect": "Allow",
         "Action": ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
         "Resource": f"{scope.log_group_arn}:*"},
    ]
    if scope.model_objects:
        statements.append({"Sid": "ReadModel", "Effect": "Allow", "Action": ["s3:GetObject"],
                           "Resource": [f"arn:{scope.partition}:s3:::{uri.removeprefix('s3://')}"
                                        for uri in sorted(scope.model_objects)]})
    if scope.alarms:
        statements.append({"Sid": "ReadRollbackAlarms", "Effect": "Allow", "Action": ["cloudwatch:DescribeAlarms"],
                           "Resource": [f"arn:{scope.partition}:cloudwatch:{scope.region}:{scope.account}:alarm:{a}"
                                        for a in sorted(scope.alarms)]})
    return {"Version": VERSION, "Statement": statements}

