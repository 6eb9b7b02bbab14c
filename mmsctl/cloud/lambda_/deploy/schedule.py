"""Keep-warm: an EventBridge rule that sends the warm event on a schedule, its permission and its target."""

from __future__ import annotations

import json
from typing import Any, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.permissions import Permissions
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.cloud.lambda_.events import WARM_EVENT
from mmsctl.cloud.lambda_.resources import ours
from mmsctl.errors import CloudError

__all__ = ["ensure_schedule"]

_WARM_TARGET = "mmsctl-warm"
_SID_WARM = "mmsctl-warm"


def ensure_schedule(t: Target, permissions: Permissions) -> Optional[str]:
    """The schedule expression in force, or None (an existing rule is then removed)."""
    rule = names.rule_name(t.name)
    try:
        found: Optional[dict[str, Any]] = t.aws.call("events", "describe_rule", Name=rule)
    except CloudError as exc:
        if aws_code(exc) != "ResourceNotFoundException":
            raise
        found = None
    expression = t.spec.schedule
    if found is not None and not _ours(t, found):
        if expression is None:
            return None  # someone else's rule of that name: not ours to delete
        raise CloudError(f"EventBridge rule {rule} exists and was not made by mmsctl for {t.name} (no "
                         f"mmsctl:lambda={t.name} tag); refusing to change it",
                         hint="rename or delete that rule, or deploy without a warm-up schedule")
    if expression is None:
        if found is not None:
            _delete_rule(t, rule)
        return None
    rule_arn = f"arn:{t.partition}:events:{t.aws.region}:{t.account}:rule/{rule}"
    if found is None or found.get("ScheduleExpression") != expression or found.get("State") != "ENABLED":
        t.aws.call("events", "put_rule", Name=rule, ScheduleExpression=expression, State="ENABLED",
                   Description=f"mmsctl lambda {t.name}: keep one instance warm",
                   Tags=[{"Key": k, "Value": v} for k, v in t.tags("schedule").items()])
        t.note("update" if found else "create", "schedule", f"{rule} {expression}")
    else:
        t.note("reuse", "schedule", f"{rule} {expression}")
    permissions.grant(_SID_WARM, Action="lambda:InvokeFunction", Principal="events.amazonaws.com", SourceArn=rule_arn)
    targets = [] if found is None else t.aws.call("events", "list_targets_by_rule", Rule=rule).get("Targets", [])
    wanted = {"Id": _WARM_TARGET, "Arn": t.target_arn, "Input": json.dumps(WARM_EVENT)}
    if not any({k: target.get(k) for k in wanted} == wanted for target in targets):
        t.aws.call("events", "put_targets", Rule=rule, Targets=[wanted])
        t.note("create", "schedule-target", f"{rule} -> {t.name}")
    return expression


def _ours(t: Target, found: dict[str, Any]) -> bool:
    listed = t.aws.call("events", "list_tags_for_resource", ResourceARN=found["Arn"]).get("Tags")
    return ours(tags.as_dict(listed), t.name)


def _delete_rule(t: Target, rule: str) -> None:
    targets = t.aws.call("events", "list_targets_by_rule", Rule=rule).get("Targets", [])
    if targets:
        t.aws.call("events", "remove_targets", Rule=rule, Ids=[target["Id"] for target in targets])
    t.aws.call("events", "delete_rule", Name=rule)
    t.note("delete", "schedule", rule)
