"""Provisioned concurrency: a published version behind the ``live`` alias, or both removed when not asked for."""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.errors import CloudError

__all__ = ["current_alias", "ensure_provisioned"]


def current_alias(t: Target) -> Optional[dict[str, Any]]:
    """The ``live`` alias, or None."""
    try:
        return t.aws.call("lambda", "get_alias", FunctionName=t.name, Name=names.ALIAS)
    except CloudError as exc:
        if aws_code(exc) == "ResourceNotFoundException":
            return None
        raise


def ensure_provisioned(t: Target, existing_alias: Optional[dict[str, Any]]) -> None:
    count = t.spec.provisioned
    if count is None:
        if existing_alias is not None:
            _drop_provisioned(t)
        return
    version = t.aws.call("lambda", "publish_version", FunctionName=t.name).get("Version", "<new version>")
    if existing_alias is None:
        t.aws.call("lambda", "create_alias", FunctionName=t.name, Name=names.ALIAS, FunctionVersion=version)
    else:
        t.aws.call("lambda", "update_alias", FunctionName=t.name, Name=names.ALIAS, FunctionVersion=version)
    t.aws.call("lambda", "put_provisioned_concurrency_config", FunctionName=t.name,
               Qualifier=names.ALIAS, ProvisionedConcurrentExecutions=count)
    t.note("update", "provisioned-concurrency", f"{t.name}:{names.ALIAS} = {count}")


def _drop_provisioned(t: Target) -> None:
    try:
        t.aws.call("lambda", "delete_provisioned_concurrency_config", FunctionName=t.name, Qualifier=names.ALIAS)
    except CloudError as exc:
        if aws_code(exc) not in ("ResourceNotFoundException", "ProvisionedConcurrencyConfigNotFoundException"):
            raise
    t.aws.call("lambda", "delete_alias", FunctionName=t.name, Name=names.ALIAS)
    t.note("delete", "lambda-alias", f"{t.name}:{names.ALIAS}")
