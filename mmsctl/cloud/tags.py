"""The ``mmsctl:*`` tags on everything mmsctl creates in AWS, so later commands can find and remove it.

Only resources carrying ``mmsctl:managed=true`` are ever listed, terminated or
cleaned up; something mmsctl merely reuses (an endpoint someone else made) is
never tagged and so never deleted.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

__all__ = [
    "ACCELERATOR",
    "COMPONENT",
    "LAMBDA",
    "MANAGED",
    "MODELS",
    "as_dict",
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
VERSION = "mmsctl:version"
#: Every resource of one `mmsctl lambda deploy NAME` carries mmsctl:lambda=NAME.
LAMBDA = "mmsctl:lambda"

# Values of COMPONENT.
EI_ENDPOINT = "ei-endpoint"
EI_SECURITY_GROUP = "ei-security-group"
SERVER_SECURITY_GROUP = "server-security-group"
EI_ROLE = "ei-role"
EI_INSTANCE_PROFILE = "ei-instance-profile"
INSTANCE = "instance"


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


def as_dict(tags: Optional[Iterable[Mapping[str, str]]]) -> dict[str, str]:
    """AWS's tag list -> a plain dict."""
    return {t["Key"]: t["Value"] for t in tags or ()}


def managed_filter(component: Optional[str] = None) -> list[dict[str, Any]]:
    """EC2 ``Filters`` matching resources mmsctl created (of one component)."""
    filters: list[dict[str, Any]] = [{"Name": f"tag:{MANAGED}", "Values": ["true"]}]
    if component:
        filters.append({"Name": f"tag:{COMPONENT}", "Values": [component]})
    return filters
