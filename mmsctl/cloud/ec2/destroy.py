"""``ec2 terminate`` and ``ec2 cleanup``: remove what mmsctl made, and nothing else.

Only instances and resources tagged ``mmsctl:managed=true`` are touched; a fleet's are not
(``fleet destroy`` removes those).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mmsctl.cloud.aws import iam, tags
from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.security_groups import delete_security_group
from mmsctl.cloud.aws.asset_bucket import delete_owned_prefix
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.ec2.assets import IAM_PATH as LAUNCH_IAM_PATH
from mmsctl.cloud.ec2.assets import asset_prefix, role_name
from mmsctl.cloud.ec2.query import get_instances, list_instances, require_managed, wait_for_state
from mmsctl.cloud.instance.ei import IAM_PATH, fleets_using_ei
from mmsctl.errors import CloudError, UsageError

__all__ = ["CleanupResult", "cleanup", "release_launches", "terminate"]

LAUNCH_PREFIX = "ec2/"  # every launch's prefix in the asset bucket (mmsctl.cloud.ec2.assets.asset_prefix)


def terminate(aws: AwsSession, instance_ids: list[str], *, all_instances: bool = False,
              wait: bool = False) -> list[dict[str, Any]]:
    """Terminate mmsctl's instances (all of them with *all_instances*); anything else is refused."""
    if all_instances:
        ids = [str(r["id"]) for r in list_instances(aws) if r["state"] != "shutting-down"]
        if not ids:
            return []
    else:
        if not instance_ids:
            raise UsageError("name the instances to terminate, or ask for all of them", param="all_instances")
        ids = list(dict.fromkeys(instance_ids))
    found = get_instances(aws, ids)
    if not all_instances:
        require_managed(found)
    launches = {str(i["InstanceId"]): _launch_of((i.get("IamInstanceProfile") or {}).get("Arn"))
                for i in found}  # EC2 drops the profile once terminated
    answer = aws.call("ec2", "terminate_instances", InstanceIds=ids)
    if wait and not aws.dry_run:
        wait_for_state(aws, "terminated", ids)
    return [{"id": i["InstanceId"], "previous": (i.get("PreviousState") or {}).get("Name"),
             "state": "terminated" if wait and not aws.dry_run else (i.get("CurrentState") or {}).get("Name"),
             "launch": launches.get(str(i["InstanceId"]))}
            for i in answer.get("TerminatingInstances", [])]


def _launch_of(profile_arn: Optional[str]) -> Optional[str]:
    """The launch name whose role (``mmsctl-ec2-NAME``) an instance with this instance profile runs with."""
    profile = str(profile_arn or "")
    name = profile.rsplit("/", 1)[-1]
    return name[len(role_name("")):] if LAUNCH_IAM_PATH in profile and name.startswith(role_name("")) else None


def release_launches(aws: AwsSession, launches: set[str]) -> list[dict[str, str]]:
    """Once their instances are terminated: the role, instance profile and asset prefix of each of
    *launches* that no live mmsctl instance still uses (several launches may share a name); what went.
    Only what carries ``mmsctl:managed=true`` (and an asset bucket mmsctl made) is deleted."""
    live = sorted(str(r["id"]) for r in list_instances(aws))  # a list row does not carry the profile
    in_use = {n for n in (_launch_of((i.get("IamInstanceProfile") or {}).get("Arn"))
                          for i in (get_instances(aws, live) if live else [])) if n}
    released: list[dict[str, str]] = []
    for launch in sorted(launches - in_use):
        name = role_name(launch)
        profile = iam.find(aws, "instance-profile", name)
        if profile is not None and _tag(profile, tags.MANAGED) == "true":
            iam.delete_instance_profile(aws, name, [r["RoleName"] for r in profile.get("Roles", [])])
            released.append({"kind": "instance-profile", "id": name})
        if _tag(iam.find(aws, "role", name), tags.MANAGED) == "true":
            iam.delete_role(aws, name)
            released.append({"kind": "iam-role", "id": name})
        bucket, removed = delete_owned_prefix(aws, asset_prefix(launch))
        if removed:
            released.append({"kind": "assets", "id": f"s3://{bucket}/{asset_prefix(launch)}"})
    return released


@dataclass
class CleanupResult:
    deleted: list[dict[str, str]] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)


def cleanup(aws: AwsSession, *, sleep: Callable[[float], None] = time.sleep,
            timeout: float = 300.0) -> CleanupResult:
    """Delete the endpoints, security groups, role and instance profile mmsctl created; nothing else.

    Refuses while mmsctl instances, or fleets with Elastic Inference, still live (they use the groups).
    """
    live = list_instances(aws)
    if live:
        raise CloudError(f"{len(live)} mmsctl instance(s) still exist in {aws.region}: "
                         f"{', '.join(str(r['id']) for r in live)}",
                         param="instances", hint="terminate them first, and wait until they are gone")
    ei_fleets = fleets_using_ei(aws)
    if ei_fleets:
        raise CloudError(f"fleet(s) {', '.join(ei_fleets)} use the Elastic Inference endpoint and group in {aws.region}",
                         hint=f"destroy them first: mmsctl fleet destroy {ei_fleets[0]}")
    result = CleanupResult()
    endpoints = aws.call("ec2", "describe_vpc_endpoints", Filters=tags.managed_filter(tags.EI_ENDPOINT))
    endpoint_ids = [e["VpcEndpointId"] for e in endpoints.get("VpcEndpoints", [])
                    if e.get("State") not in ("deleted", "deleting")]
    if endpoint_ids:
        aws.call("ec2", "delete_vpc_endpoints", VpcEndpointIds=endpoint_ids)
        result.deleted += [{"kind": "vpc-endpoint", "id": i} for i in endpoint_ids]
        if not aws.dry_run:
            _wait_endpoints_gone(aws, endpoint_ids, sleep=sleep, timeout=timeout)
    groups = aws.paginate("ec2", "describe_security_groups", "SecurityGroups", Filters=tags.managed_filter())
    for group in groups:
        delete_security_group(aws, group["GroupId"], sleep=sleep, timeout=timeout)
        result.deleted.append({"kind": "security-group", "id": group["GroupId"]})
    _cleanup_iam(aws, result)
    return result


def _wait_endpoints_gone(aws: AwsSession, ids: list[str], *, sleep: Callable[[float], None],
                         timeout: float) -> None:
    waited = 0.0
    while waited < timeout:
        try:
            left = aws.call("ec2", "describe_vpc_endpoints", VpcEndpointIds=ids)["VpcEndpoints"]
        except ResourceNotFound:
            return
        if all(e.get("State") in ("deleted",) for e in left) or not left:
            return
        sleep(5)
        waited += 5


def _cleanup_iam(aws: AwsSession, result: CleanupResult) -> None:
    for path in (IAM_PATH, LAUNCH_IAM_PATH):
        _cleanup_iam_path(aws, result, path)
    _cleanup_assets(aws, result)


def _cleanup_assets(aws: AwsSession, result: CleanupResult) -> None:
    """Every launch's prefix (``ec2/``) in the account's asset bucket; never a fleet's prefix or the shared wheels."""
    bucket, removed = delete_owned_prefix(aws, LAUNCH_PREFIX)
    if removed:
        result.deleted.append({"kind": "assets", "id": f"s3://{bucket}/{LAUNCH_PREFIX}"})


def _cleanup_iam_path(aws: AwsSession, result: CleanupResult, path: str) -> None:
    profiles = aws.paginate("iam", "list_instance_profiles", "InstanceProfiles", PathPrefix=path)
    for profile in profiles:
        name = profile["InstanceProfileName"]
        if _tag(iam.find(aws, "instance-profile", name), tags.MANAGED) != "true":
            result.kept.append({"kind": "instance-profile", "id": name})
            continue
        iam.delete_instance_profile(aws, name, [r["RoleName"] for r in profile.get("Roles", [])])
        result.deleted.append({"kind": "instance-profile", "id": name})
    roles = aws.paginate("iam", "list_roles", "Roles", PathPrefix=path)
    for role in roles:
        name = role["RoleName"]
        if _tag(iam.find(aws, "role", name), tags.MANAGED) != "true":
            result.kept.append({"kind": "iam-role", "id": name})
            continue
        iam.delete_role(aws, name)
        result.deleted.append({"kind": "iam-role", "id": name})


def _tag(resource: Optional[dict[str, Any]], key: str) -> Optional[str]:
    return tags.as_dict((resource or {}).get("Tags")).get(key)
