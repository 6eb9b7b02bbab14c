"""Asynchronous invocations (the S3 pipeline, the keep-warm rule): concurrency cap, retries, event age,
and where failed events go.

S3 invokes the function asynchronously: Lambda queues the event, retries it (0-2 times) while it
is younger than the maximum event age, then hands it to the failure destination, if there is
one, or drops it. Without a cap, a bulk upload scales the function to the account's limit and
starves every other function; without a destination, a failed photo is gone. Pure checks here,
so ``deploy`` refuses a bad value before its first call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from mmsctl.errors import UsageError

__all__ = ["MAX_CONCURRENCY", "Destination", "check_concurrency", "check_retries", "default_queue_name",
           "parse_destination", "parse_event_age"]

#: Reserved concurrency a deploy may set (Lambda keeps 100 of the account's limit unreserved; 1000 is the
#: default account limit, so more than that is a typo or needs a quota increase first).
MAX_CONCURRENCY = 1000
EVENT_AGE_RANGE = (60, 21600)  # seconds: Lambda's limits for MaximumEventAgeInSeconds
RETRIES_RANGE = (0, 2)
_AGE = re.compile(r"^\s*(\d{1,6})\s*(s|m|h)?\s*$", re.IGNORECASE)
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
_ARN = re.compile(r"^arn:aws[a-z-]*:(sqs|sns):[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$")


@dataclass(frozen=True)
class Destination:
    """Where failed asynchronous events go: an SQS queue, an SNS topic or an S3 bucket, by name or ARN."""

    service: str  # sqs | sns | s3
    name: str  # queue or topic name, or bucket
    arn: Optional[str] = None  # when given as an ARN (another account or region)

    def resolved_arn(self, partition: str, region: str, account: str) -> str:
        if self.arn:
            return self.arn
        if self.service == "s3":
            return f"arn:{partition}:s3:::{self.name}"
        return f"arn:{partition}:{self.service}:{region}:{account}:{self.name}"

    def __str__(self) -> str:
        return self.arn or f"{self.service}://{self.name}"


def default_queue_name(function: str) -> str:
    """The dead-letter queue deploy makes for a pipeline when no destination is given."""
    return f"mmsctl-lambda-{function}-failures"


def parse_destination(text: str) -> Optional[Destination]:
    """``sqs://NAME``, ``sns://NAME``, ``s3://BUCKET``, an SQS/SNS ARN, or ``none`` (None).

    Raises:
        UsageError: anything else (``on_failure``).
    """
    value = text.strip()
    if value.lower() == "none":
        return None
    match = _ARN.match(value)
    if match:
        return Destination(match.group(1), value.rsplit(":", 1)[1], arn=value)
    scheme, _, name = value.partition("://")
    checks = {"sqs": _QUEUE_NAME, "sns": _TOPIC_NAME}
    if scheme in checks and checks[scheme].match(name):
        return Destination(scheme, name)
    if scheme == "s3" and name:
        return Destination("s3", name.rstrip("/"))  # the bucket name is checked with the other buckets
    raise UsageError(f"failure destination {text[:120]!r}: use sqs://QUEUE, sns://TOPIC, s3://BUCKET, an SQS or "
                     "SNS ARN, or none", param="on_failure")


def parse_event_age(text: str) -> int:
    """``90``, ``90s``, ``30m``, ``6h`` -> seconds, within Lambda's 60 s - 6 h.

    Raises:
        UsageError: not a duration, or out of range (``max_event_age``).
    """
    match = _AGE.match(text or "")
    if not match:
        raise UsageError(f"event age {text[:40]!r} is not a duration (like 90s, 30m, 6h)", param="max_event_age")
    seconds = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[(match.group(2) or "s").lower()]
    low, high = EVENT_AGE_RANGE
    if not low <= seconds <= high:
        raise UsageError(f"event age {text.strip()}: Lambda keeps events {low} s to {high // 3600} h",
                         param="max_event_age")
    return seconds


def check_retries(retries: int) -> int:
    low, high = RETRIES_RANGE
    if not low <= retries <= high:
        raise UsageError(f"retries {retries}: Lambda retries an asynchronous event {low} to {high} times",
                         param="retries")
    return retries


def check_concurrency(count: int) -> int:
    if not 1 <= count <= MAX_CONCURRENCY:
        raise UsageError(f"max concurrency {count}: use 1-{MAX_CONCURRENCY}", param="max_concurrency")
    return count
