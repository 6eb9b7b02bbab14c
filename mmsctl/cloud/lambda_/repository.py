"""The ECR repository of one function, ``mmsctl-lambda/NAME``: made by ``lambda build --push`` and by deploy.

Build pushes the image into it and deploy pins the function to it, so both take it from here.
"""

from __future__ import annotations

import json

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.iam import policy_text
from mmsctl.cloud.aws.ecr import repository_uri
from mmsctl.cloud.aws.session import AwsSession, partition
from mmsctl.cloud.lambda_ import policy
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.resources import lambda_tags
from mmsctl.errors import CloudError

__all__ = ["ensure_repository"]


def ensure_repository(aws: AwsSession, name: str) -> tuple[str, str]:
    """Create the ECR repository ``mmsctl-lambda/NAME`` (tagged, scan on push) with a pull policy for
    function NAME only, or bring an existing one's policy up to date.

    Returns:
        (``create`` | ``update`` | ``reuse``, the repository URI).
    """
    repo = names.repository_name(name)
    account = aws.account_id()
    scope = policy.RoleScope(partition(aws.region), aws.region, account, name)
    wanted = policy.repository_policy(scope)
    try:
        found = aws.call("ecr", "describe_repositories", repositoryNames=[repo])["repositories"][0]
    except CloudError as exc:
        if aws_code(exc) != "RepositoryNotFoundException":
            raise
        made = aws.call("ecr", "create_repository", repositoryName=repo,
                        imageScanningConfiguration={"scanOnPush": True},
                        tags=[{"Key": k, "Value": v} for k, v in lambda_tags(name, "ecr-repository").items()])
        aws.call("ecr", "set_repository_policy", repositoryName=repo, policyText=policy_text(wanted))
        uri = (made.get("repository") or {}).get("repositoryUri")
        return "create", uri or repository_uri(account, aws.region, repo)
    current = None
    try:
        current = json.loads(aws.call("ecr", "get_repository_policy", repositoryName=repo)["policyText"])
    except CloudError as exc:
        if aws_code(exc) != "RepositoryPolicyNotFoundException":
            raise
    if current != wanted:
        aws.call("ecr", "set_repository_policy", repositoryName=repo, policyText=policy_text(wanted))
        return "update", str(found["repositoryUri"])
    return "reuse", str(found["repositoryUri"])
