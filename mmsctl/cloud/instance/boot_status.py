"""How an instance's boot went, as the instance itself reports it: its tag ``mmsctl:boot``.

The boot script's agent tags the instance at every boot: ``ready`` once the server answers, or
``failed: STEP: LINE`` (the step that failed and its last log line, at most 256 characters). The instance
role may do that and nothing more (:func:`boot_status_policy`): CreateTags with that one key and the agent's two
forms of value, on the instances of its own launch or fleet (their launch tags), from an instance (credentials
taken off it carry no ``ec2:SourceInstanceARN``). IAM documents no condition key that names the target of a call
as the calling instance, so a member may mark a sibling's status, never anything else. ``ec2 list``/``describe``
and ``fleet describe`` read it; a running instance without the tag is still booting (or has no role that may
tag it: ``ec2 launch --pip-spec`` or ``--server mms`` without EI). ``ec2 describe`` also shows the last
``mmsctl-init`` lines of the instance's console output (:func:`console_lines`), which the boot writes whether
or not it may tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.session import AwsSession, partition

__all__ = ["BOOT_STATUS_POLICY_NAME", "BOOT_TAG", "boot_status_policy", "BootStatus", "boot_status", "boot_statuses",
           "console_lines"]

BOOT_TAG = "mmsctl:boot"
BOOT_STATUS_POLICY_NAME = "mmsctl-boot-status"


def boot_status_policy(region: str, owner: Mapping[str, str]) -> dict[str, Any]:
    """The instance role's permission to report its boot: ``ec2:CreateTags`` of ``mmsctl:boot`` (``ready`` or
    ``failed: …``) on instances that carry every tag of *owner* from their launch (``mmsctl:fleet=NAME``; a
    launch's ``Name`` and ``mmsctl:managed``), from an instance only."""
    return {
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "TagOwnBootStatus",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"arn:{partition(region)}:ec2:*:*:instance/*",
            "Condition": {
                "StringEquals": {f"ec2:ResourceTag/{key}": value for key, value in owner.items()},
                "ForAllValues:StringEquals": {"aws:TagKeys": [BOOT_TAG]},
                "StringLike": {f"aws:RequestTag/{BOOT_TAG}": ["ready", "failed: *"]},
                "ArnLike": {"ec2:SourceInstanceARN": f"arn:{partition(region)}:ec2:*:*:instance/*"},
            },
        }],
    }


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


@dataclass(frozen=True)
class BootStatus:
    """``ready``, ``failed`` (with the step and its log line), ``booting`` (running, nothing reported yet) or
    ``unknown`` (stopped or gone before it reported)."""

    state: str
    step: Optional[str] = None
    line: Optional[str] = None

    @property
    def text(self) -> str:
        """One cell: ``ready``, ``booting``, ``failed: STEP: LINE``."""
        if self.state == "failed":
            return f"failed: {self.step}: {self.line}"
        return "-" if self.state == "unknown" else self.state

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "step": self.step, "line": self.line}


def boot_status(instance: dict[str, Any]) -> BootStatus:
    """The status in a DescribeInstances record's tags (the value is the instance's own: printable, bounded)."""
    value = _UNPRINTABLE.sub(" ", tags.as_dict(instance.get("Tags")).get(BOOT_TAG, ""))[:256].strip()
    if value == "ready":
        return BootStatus("ready")
    if value.startswith("failed:"):
        step, _, line = value[len("failed:"):].strip().partition(": ")
        return BootStatus("failed", step.strip() or "?", line.strip() or "-")
    state = (instance.get("State") or {}).get("Name")
    return BootStatus("booting" if state in (None, "pending", "running") else "unknown")


def boot_statuses(aws: AwsSession, instance_ids: list[str]) -> dict[str, BootStatus]:
    """Each instance's status (one DescribeInstances call for all)."""
    if not instance_ids:
        return {}
    reservations = aws.call("ec2", "describe_instances", InstanceIds=list(instance_ids))["Reservations"]
    return {str(i["InstanceId"]): boot_status(i) for r in reservations for i in r.get("Instances", [])}


def console_lines(aws: AwsSession, instance_id: str, *, limit: int = 5) -> list[str]:
    """The last *limit* ``mmsctl-init:`` lines of the instance's console output (GetConsoleOutput, the latest
    64 KB on instance types that keep it; botocore decodes its base64), printable and bounded; [] when there are
    none or it cannot be read."""
    from mmsctl.errors import CloudError

    try:
        try:
            answer = aws.call("ec2", "get_console_output", InstanceId=instance_id, Latest=True)
        except CloudError:  # Latest is for Nitro instance types only: the buffer posted at the last transition
            answer = aws.call("ec2", "get_console_output", InstanceId=instance_id)
    except CloudError:
        return []
    text = str(answer.get("Output") or "")
    lines = [_UNPRINTABLE.sub(" ", line).strip()[:300] for line in text.splitlines() if "mmsctl-init:" in line]
    return lines[-limit:]
