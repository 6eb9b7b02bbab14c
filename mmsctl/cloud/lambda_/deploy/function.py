"""The function itself (image package): created, or its code, configuration and tags updated where they differ."""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.aws.service_role import retry_while_propagating
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.cloud.lambda_.resources import wait_function_ready

__all__ = ["ensure_function"]


def ensure_function(t: Target, image: str, role_arn: str, variables: dict[str, str], extra_tags: dict[str, str],
                    previous: Optional[dict[str, Any]]) -> None:
    """Make the function match; *previous* is ``GetFunction``'s answer, or None when there is none yet."""
    spec = t.spec
    config: dict[str, Any] = {"Role": role_arn, "Timeout": spec.timeout, "MemorySize": spec.memory,
                              "Environment": {"Variables": variables},
                              "Description": f"mmsctl lambda: {spec.model}"[:256]}
    wanted_tags = t.tags("lambda-function", extra_tags)
    if previous is None:
        _create_function(t, image, config, wanted_tags)
        t.note("create", "lambda-function", t.name)
        _settle(t)
        return
    current = previous["Configuration"]
    changed = False
    if (previous.get("Code") or {}).get("ImageUri") != image:
        t.aws.call("lambda", "update_function_code", FunctionName=t.name, ImageUri=image)
        _settle(t)
        changed = True
    now = {"Role": current.get("Role"), "Timeout": current.get("Timeout"), "MemorySize": current.get("MemorySize"),
           "Environment": {"Variables": (current.get("Environment") or {}).get("Variables") or {}},
           "Description": current.get("Description", "")}
    if now != config:
        t.aws.call("lambda", "update_function_configuration", FunctionName=t.name, **config)
        _settle(t)
        changed = True
    if {k: v for k, v in (previous.get("Tags") or {}).items()} != wanted_tags:
        stale = [k for k in (previous.get("Tags") or {}) if k not in wanted_tags and k.startswith("mmsctl:")]
        if stale:
            t.aws.call("lambda", "untag_resource", Resource=t.function_arn, TagKeys=stale)
        t.aws.call("lambda", "tag_resource", Resource=t.function_arn, Tags=wanted_tags)
        changed = True
    t.note("update" if changed else "reuse", "lambda-function", t.name)


def _settle(t: Target) -> None:
    if not t.aws.dry_run:
        wait_function_ready(t.aws, t.name, sleep=t.sleep)


def _create_function(t: Target, image: str, config: dict[str, Any], wanted_tags: dict[str, str]) -> None:
    # A new role takes a few seconds to reach Lambda (IAM is eventually consistent).
    retry_while_propagating(lambda: t.aws.call("lambda", "create_function", FunctionName=t.name, PackageType="Image",
                                               Code={"ImageUri": image}, Architectures=["x86_64"], Tags=wanted_tags,
                                               **config),
                            propagating=lambda exc: "cannot be assumed" in exc.message, sleep=t.sleep)
