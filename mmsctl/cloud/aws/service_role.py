"""A managed service's execution role (Lambda's, SageMaker's): created with its one inline policy, or that policy
brought up to date; and the bounded retry of the call that hands the role to the service while IAM propagates.

IAM is eventually consistent: a role created or a policy put a moment before may not have reached the service
yet, which then refuses the call that names the role (Lambda: "cannot be assumed"; SageMaker: the image or the
model data "access denied"). Such a refusal is tried again, only after this run changed the role, and only
:data:`PROPAGATION_TRIES` times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.iam import find, policy_text
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError

__all__ = ["PROPAGATION_TRIES", "ServiceRole", "ensure_service_role", "retry_while_propagating"]

#: Tries of a call refused while a role change propagates: waits of 2, 3, 4.5 … then 10 s (about a minute).
PROPAGATION_TRIES = 10

T = TypeVar("T")


@dataclass(frozen=True)
class ServiceRole:
    """One execution role as wanted: its name and path, who may assume it, its inline policy, its tags, and the
    tag (key, value) that says it is this deployment's own."""

    name: str
    path: str
    trust: Mapping[str, Any]
    description: str
    policy_name: str
    policy: Mapping[str, Any]
    tags: Mapping[str, str]
    owner: tuple[str, str]


def ensure_service_role(aws: AwsSession, role: ServiceRole) -> tuple[str, str]:
    """The role's ARN and what was done to it (``create``, ``update``: its policy, ``reuse``).

    Raises:
        CloudError: a role of that name exists without the owner tag (not this deployment's: never changed).
    """
    doc = policy_text(role.policy)
    found = find(aws, "role", role.name)
    if found is None:
        made = aws.call("iam", "create_role", RoleName=role.name, Path=role.path,
                        AssumeRolePolicyDocument=policy_text(role.trust), Description=role.description,
                        Tags=tags.tag_list(role.tags))
        aws.call("iam", "put_role_policy", RoleName=role.name, PolicyName=role.policy_name, PolicyDocument=doc)
        return str(made["Role"]["Arn"]).replace("<account>", aws.account_id()), "create"
    key, value = role.owner
    if tags.as_dict(found.get("Tags")).get(key) != value:
        raise CloudError(f"IAM role {role.name} exists and was not made by mmsctl ({key}={value}); refusing to "
                         "change it", hint="choose another NAME")
    current = _inline_policy(aws, role)
    if current == json.loads(doc):
        return str(found["Arn"]), "reuse"
    aws.call("iam", "put_role_policy", RoleName=role.name, PolicyName=role.policy_name, PolicyDocument=doc)
    return str(found["Arn"]), "update"


def _inline_policy(aws: AwsSession, role: ServiceRole) -> Any:
    """The role's inline policy as a document (IAM gives it URL-decoded JSON, boto3 parsed), or None."""
    from mmsctl.cloud.aws.errors import ResourceNotFound

    try:
        current = aws.call("iam", "get_role_policy", RoleName=role.name, PolicyName=role.policy_name).get(
            "PolicyDocument")
    except ResourceNotFound:
        return None
    return json.loads(current) if isinstance(current, str) else current


def retry_while_propagating(call: Callable[[], T], *, propagating: Callable[[CloudError], bool],
                            sleep: Callable[[float], None]) -> T:
    """*call*, tried again (at most :data:`PROPAGATION_TRIES` times in all) while it fails with an error
    *propagating* says is a role change not yet seen by the service; any other error at once."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

    retrying = Retrying(retry=retry_if_exception(lambda exc: isinstance(exc, CloudError) and propagating(exc)),
                        stop=stop_after_attempt(PROPAGATION_TRIES), wait=wait_exponential(multiplier=2, exp_base=1.5,
                                                                                          max=10),
                        sleep=sleep, reraise=True)
    return retrying(call)
