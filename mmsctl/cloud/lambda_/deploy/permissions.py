"""The function's resource policy: one statement per caller (URL, S3, EventBridge), replaced only when it
differs, and mmsctl's statements no step asked for dropped at the end."""

from __future__ import annotations

import json
from typing import Any

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.errors import CloudError

__all__ = ["Permissions"]


class Permissions:
    """The statements the function has now, and the ones this deploy keeps."""

    def __init__(self, t: Target) -> None:
        self.t = t
        self.existing = _statements(t)
        self.keep: set[str] = set()

    def grant(self, sid: str, **params: Any) -> None:
        """Statement *sid* with *params* (``AddPermission``'s), kept whether it changed or not."""
        t = self.t
        self.keep.add(sid)
        found = self.existing.get(sid)
        if found is not None and _statement_signature(found) == _signature(params):
            return
        qualifier = t.qualified()
        if found is not None:
            t.aws.call("lambda", "remove_permission", FunctionName=t.name, StatementId=sid, **qualifier)
        t.aws.call("lambda", "add_permission", FunctionName=t.name, StatementId=sid, **qualifier, **params)
        t.note("update" if found else "create", "lambda-permission", sid)

    def drop_unkept(self) -> None:
        """Remove mmsctl's statements that no step granted this time."""
        t = self.t
        qualifier = t.qualified()
        for sid in self.existing:
            if sid.startswith("mmsctl-") and sid not in self.keep:
                t.aws.call("lambda", "remove_permission", FunctionName=t.name, StatementId=sid, **qualifier)
                t.note("delete", "lambda-permission", sid)


def _statements(t: Target) -> dict[str, dict[str, Any]]:
    try:
        raw = t.aws.call("lambda", "get_policy", FunctionName=t.name, **t.qualified())["Policy"]
    except CloudError as exc:
        if aws_code(exc) == "ResourceNotFoundException":
            return {}
        raise
    return {s.get("Sid", ""): s for s in json.loads(raw).get("Statement", [])}


def _signature(params: dict[str, Any]) -> tuple[Any, ...]:
    return (params.get("Action"), params.get("Principal"), params.get("SourceArn"), params.get("SourceAccount"),
            params.get("FunctionUrlAuthType"), bool(params.get("InvokedViaFunctionUrl")))


def _statement_signature(statement: dict[str, Any]) -> tuple[Any, ...]:
    principal = statement.get("Principal")
    if isinstance(principal, dict):
        principal = principal.get("Service") or principal.get("AWS")
    cond = statement.get("Condition") or {}
    arn_like = cond.get("ArnLike") or {}
    equals = cond.get("StringEquals") or {}
    flags = cond.get("Bool") or {}
    invoked = str(flags.get("lambda:InvokedViaFunctionUrl", "")).lower() == "true"
    return (statement.get("Action"), principal, arn_like.get("AWS:SourceArn"), equals.get("AWS:SourceAccount"),
            equals.get("lambda:FunctionUrlAuthType"), invoked)
