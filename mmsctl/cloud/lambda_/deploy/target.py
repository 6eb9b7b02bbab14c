"""The function one deploy works on, and the changes it reports: shared by every step."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from mmsctl.cloud.aws.changes import Change
from mmsctl.cloud.aws.session import AwsSession, partition
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.resources import lambda_tags
from mmsctl.cloud.lambda_.spec import DeploySpec

__all__ = ["Change", "Target"]


class Target:
    """Function *spec.name* in the session's account and region; the steps note their changes here."""

    def __init__(self, aws: AwsSession, spec: DeploySpec, sleep: Callable[[float], None] = time.sleep) -> None:
        self.aws = aws
        self.spec = spec
        self.sleep = sleep
        self.name = spec.name
        self.changes: list[Change] = []
        self.account = aws.account_id()
        self.partition = partition(aws.region)
        self.function_arn = f"arn:{self.partition}:lambda:{aws.region}:{self.account}:function:{self.name}"
        #: Calls address the alias when provisioned concurrency is asked for.
        self.qualifier: Optional[str] = names.ALIAS if spec.provisioned else None
        self.target_arn = f"{self.function_arn}:{self.qualifier}" if self.qualifier else self.function_arn

    def qualified(self) -> dict[str, Any]:
        """``Qualifier=live`` where calls address the alias (provisioned concurrency), else nothing."""
        return {"Qualifier": self.qualifier} if self.qualifier else {}

    def note(self, action: str, kind: str, id: str) -> None:
        self.changes.append(Change(action, kind, id))

    def tags(self, component: str, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
        return lambda_tags(self.name, component, extra)
