"""The endpoint one deploy (or update) works on, and the changes it reports: shared by every step."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from mmsctl.cloud.aws import tags as aws_tags
from mmsctl.cloud.aws.changes import Change
from mmsctl.cloud.aws.session import AwsSession, partition
from mmsctl.cloud.sagemaker.resources import sagemaker_tags

__all__ = ["Change", "Target"]


class Target:
    """Endpoint *name* in the session's account and region; the steps note their changes here."""

    def __init__(self, aws: AwsSession, name: str, *, sleep: Callable[[float], None] = time.sleep,
                 progress: Optional[Callable[[str], None]] = None) -> None:
        self.aws = aws
        self.name = name
        self.sleep = sleep
        self.progress = progress or (lambda text: None)
        self.changes: list[Change] = []
        self.account = aws.account_id()
        self.partition = partition(aws.region)
        #: Whether this run created the role or changed its policy: SageMaker may not see that for a while.
        self.role_changed = False

    def note(self, action: str, kind: str, id: str) -> None:
        self.changes.append(Change(action, kind, id))

    def tags(self, component: str) -> dict[str, str]:
        return sagemaker_tags(self.name, component)

    def tag_list(self, component: str) -> list[dict[str, str]]:
        return aws_tags.tag_list(self.tags(component))

    def arn(self, kind: str, name: str) -> str:
        """A SageMaker ARN (``endpoint``, ``endpoint-config``, ``model``)."""
        return f"arn:{self.partition}:sagemaker:{self.aws.region}:{self.account}:{kind}/{name}"

    def made(self) -> list[Change]:
        return [c for c in self.changes if c.action == "create"]

    def report(self) -> list[dict[str, Any]]:
        return [c.to_dict() for c in self.changes]
