"""The ``mmsctl:*`` tags on everything mmsctl creates in AWS, so later commands can find and remove it.

Only resources carrying ``mmsctl:managed=true`` are ever listed, terminated or
cleaned up by ``mmsctl ec2``; something mmsctl merely reuses (an endpoint someone
else made) is never tagged and so never deleted.

A fleet's resources carry ``mmsctl:fleet=NAME`` instead, and deliberately not
``mmsctl:managed``: ``ec2 terminate --all`` and ``ec2 cleanup`` never touch a
fleet, and ``fleet destroy NAME`` touches nothing but that fleet.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Union

__all__ = [
    "ACCELERATOR",
    "COMPONENT",
    "FLEET",
    "LAMBDA",
    "LAMBDA_INPUT",
    "LAMBDA_MODEL",
    "LAMBDA_MODEL_BUCKET",
    "LAMBDA_OUTPUT",
    "MANAGED",
    "MODELS",
    "SAGEMAKER",
    "as_dict",
    "fleet_filter",
    "fleet_tags",
    "managed_filter",
    "tag_list",
    "tag_spec",
]

MANAGED = "mmsctl:managed"
COMPONENT = "mmsctl:component"
ACCELERATOR = "mmsctl:accelerator"
MODELS = "mmsctl:models"
INSTANCE_TYPE = "mmsctl:instance-type"
SERVER = "mmsctl:server"
#: The AMI's python3 a fleet's wheels are built for (`--instance-python`): what a rollout builds for again.
INSTANCE_PYTHON = "mmsctl:instance-python"
VERSION = "mmsctl:version"
FLEET = "mmsctl:fleet"
#: Every resource of one `mmsctl lambda deploy NAME` carries mmsctl:lambda=NAME.
LAMBDA = "mmsctl:lambda"
#: On a deployed function: what it serves and which buckets are its own (destroy and invoke read them).
LAMBDA_MODEL = "mmsctl:model"
LAMBDA_INPUT = "mmsctl:input-bucket"
LAMBDA_OUTPUT = "mmsctl:output-bucket"
LAMBDA_MODEL_BUCKET = "mmsctl:model-bucket"
#: Every resource of one `mmsctl sagemaker deploy NAME` carries mmsctl:sagemaker=NAME.
SAGEMAKER = "mmsctl:sagemaker"

# Values of COMPONENT.
EI_ENDPOINT = "ei-endpoint"
EI_SECURITY_GROUP = "ei-security-group"
SERVER_SECURITY_GROUP = "server-security-group"
EI_ROLE = "ei-role"
EI_INSTANCE_PROFILE = "ei-instance-profile"
INSTANCE = "instance"
# Values of COMPONENT on a fleet's resources.
FLEET_INSTANCE = "fleet-instance"
FLEET_LAUNCH_TEMPLATE = "fleet-launch-template"
FLEET_LOAD_BALANCER = "fleet-load-balancer"
FLEET_LISTENER = "fleet-listener"
FLEET_TARGET_GROUP = "fleet-target-group"
FLEET_AUTO_SCALING_GROUP = "fleet-auto-scaling-group"
FLEET_LB_SECURITY_GROUP = "fleet-lb-security-group"
FLEET_INSTANCE_SECURITY_GROUP = "fleet-instance-security-group"
FLEET_ADMIN_SECURITY_GROUP = "fleet-admin-security-group"
FLEET_ROLE = "fleet-role"
FLEET_INSTANCE_PROFILE = "fleet-instance-profile"


def base_tags(component: str, name: str, extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The tags of one resource mmsctl creates."""
    from mmsctl import __version__

    tags = {"Name": name, MANAGED: "true", COMPONENT: component, VERSION: __version__}
    tags.update(extra or {})
    return tags


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """``{"k": "v"}`` -> ``[{"Key": "k", "Value": "v"}]`` (AWS's shape); values cut to AWS's 256 characters."""
    return [{"Key": k, "Value": str(v)[:256]} for k, v in tags.items()]


def tag_spec(resource_type: str, tags: Mapping[str, str]) -> dict[str, Any]:
    """One ``TagSpecifications`` entry, so resources are tagged in the same call that creates them."""
    return {"ResourceType": resource_type, "Tags": tag_list(tags)}


def as_dict(tags: Union[None, Mapping[str, str], Iterable[Mapping[str, str]]]) -> dict[str, str]:
    """AWS's tag list (``[{"Key", "Value"}]``), or a map as Logs, SQS and Application Auto Scaling give them, as a
    plain dict."""
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items()}
    return {t["Key"]: t["Value"] for t in tags or ()}


def managed_filter(component: Optional[str] = None) -> list[dict[str, Any]]:
    """EC2 ``Filters`` matching resources mmsctl created (of one component)."""
    filters: list[dict[str, Any]] = [{"Name": f"tag:{MANAGED}", "Values": ["true"]}]
    if component:
        filters.append({"Name": f"tag:{COMPONENT}", "Values": [component]})
    return filters


def fleet_tags(fleet: str, component: str, name: str, extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The tags of one resource of fleet *fleet* (no ``mmsctl:managed``: see the module docstring)."""
    from mmsctl import __version__

    tags = {"Name": name, FLEET: fleet, COMPONENT: component, VERSION: __version__}
    tags.update(extra or {})
    return tags


def fleet_filter(fleet: str, component: Optional[str] = None) -> list[dict[str, Any]]:
    """EC2 ``Filters`` matching the resources of fleet *fleet* (of one component)."""
    filters: list[dict[str, Any]] = [{"Name": f"tag:{FLEET}", "Values": [fleet]}]
    if component:
        filters.append({"Name": f"tag:{COMPONENT}", "Values": [component]})
    return filters
