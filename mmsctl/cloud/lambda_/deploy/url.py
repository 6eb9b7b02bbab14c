"""The function URL: IAM-authenticated, or public (``--public``) with the two statements that allows."""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.lambda_.deploy.permissions import Permissions
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.errors import CloudError

__all__ = ["ensure_url"]

_SID_URL = "mmsctl-url-public"
_SID_URL_INVOKE = "mmsctl-url-public-invoke"


def ensure_url(t: Target, permissions: Permissions) -> tuple[Optional[str], Optional[str]]:
    """(URL, auth type), or (None, None) without ``--url`` (an existing URL is then removed)."""
    qualifier = t.qualified()
    try:
        found: Optional[dict[str, Any]] = t.aws.call("lambda", "get_function_url_config",
                                                     FunctionName=t.name, **qualifier)
    except CloudError as exc:
        if aws_code(exc) != "ResourceNotFoundException":
            raise
        found = None
    if not t.spec.url:
        if found is not None:
            t.aws.call("lambda", "delete_function_url_config", FunctionName=t.name, **qualifier)
            t.note("delete", "function-url", found.get("FunctionUrl", t.name))
        return None, None
    auth = "NONE" if t.spec.public else "AWS_IAM"
    cors = _cors(t.spec.cors)
    if found is None:
        made = t.aws.call("lambda", "create_function_url_config", FunctionName=t.name, AuthType=auth, Cors=cors,
                          **qualifier)
        t.note("create", "function-url", made.get("FunctionUrl", f"<new URL of {t.name}>"))
        found = made
    elif found.get("AuthType") != auth or _normal(found.get("Cors")) != _normal(cors):
        t.aws.call("lambda", "update_function_url_config", FunctionName=t.name, AuthType=auth, Cors=cors, **qualifier)
        t.note("update", "function-url", f"{found.get('FunctionUrl')} (AuthType {auth}, "
                                          f"CORS {', '.join(t.spec.cors) or 'none'})")
    else:
        t.note("reuse", "function-url", str(found.get("FunctionUrl")))
    if t.spec.public:
        permissions.grant(_SID_URL, Action="lambda:InvokeFunctionUrl", Principal="*", FunctionUrlAuthType="NONE")
        permissions.grant(_SID_URL_INVOKE, Action="lambda:InvokeFunction", Principal="*", InvokedViaFunctionUrl=True)
    return found.get("FunctionUrl") or f"<new URL of {t.name}>", auth


def _cors(origins: tuple[str, ...]) -> dict[str, Any]:
    """What browsers on *origins* may do: GET ?url= and POST an image or {"url"}, signed or not; none without origins."""
    if not origins:
        return {}
    return {"AllowOrigins": list(origins), "AllowMethods": ["GET", "POST"],
            "AllowHeaders": ["content-type", "authorization", "x-amz-date", "x-amz-security-token",
                             "x-amz-content-sha256"],
            "MaxAge": 86400}


def _normal(cors: Optional[dict[str, Any]]) -> str:
    import json

    wanted = {k: sorted(v) if isinstance(v, list) else v for k, v in (cors or {}).items() if v not in (None, [], False)}
    return json.dumps(wanted, sort_keys=True)
