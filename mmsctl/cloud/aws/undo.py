"""Take back what a command made before a later step of it failed: only what it made, newest first.

The find-or-create helpers (:func:`~mmsctl.cloud.aws.security_groups.ensure_security_group`,
:func:`~mmsctl.cloud.aws.iam.ensure_instance_role`, the EI endpoint) list what they create as one line each; an
entry that is a :class:`~mmsctl.cloud.aws.made.Made` also says which resource it is, so :func:`undo` can delete
it. What they found and reused is never listed as made, so it is never deleted.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from mmsctl.cloud.aws import iam
from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.made import Made
from mmsctl.cloud.aws.security_groups import delete_security_group
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError

__all__ = ["undo"]


def _delete_profile(aws: AwsSession, name: str) -> None:
    profile = iam.find(aws, "instance-profile", name)
    if profile is not None:
        iam.delete_instance_profile(aws, name, [r["RoleName"] for r in profile.get("Roles", [])])


def _delete_endpoint(aws: AwsSession, endpoint_id: str) -> None:
    # Its network interfaces go a little later; deleting its security group waits them out (DependencyViolation).
    aws.call("ec2", "delete_vpc_endpoints", VpcEndpointIds=[endpoint_id])


def undo(aws: AwsSession, created: Sequence[str], *, sleep: Callable[[float], None] = time.sleep,
         timeout: float = 300.0) -> tuple[list[str], list[str]]:
    """Delete each :class:`Made` entry of *created*, newest first (a profile before its role, an endpoint before
    its group); what went, and what stays (an entry that names no resource, or one AWS would not delete, with
    AWS's reason)."""
    removers: dict[str, Callable[[str], None]] = {
        "security-group": lambda group: delete_security_group(aws, group, sleep=sleep, timeout=timeout),
        "vpc-endpoint": lambda endpoint: _delete_endpoint(aws, endpoint),
        "instance-profile": lambda name: _delete_profile(aws, name),
        "iam-role": lambda name: iam.delete_role(aws, name),
    }
    removed: list[str] = []
    kept: list[str] = []
    for entry in reversed(created):
        if not isinstance(entry, Made) or entry.kind not in removers:
            kept.append(str(entry))
            continue
        try:
            removers[entry.kind](entry.id)
        except ResourceNotFound:
            pass  # already gone
        except CloudError as exc:
            kept.append(f"{entry} ({exc.message})")
            continue
        removed.append(str(entry))
    return removed, kept
