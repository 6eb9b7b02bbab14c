"""What ``mmsctl lambda deploy`` is asked for, checked before any AWS call, and the names it derives.

Everything AWS would refuse, or that would hurt, is refused here, with no request made:
memory outside 128–10240 MB, a timeout outside 1–900 s, a keep-warm schedule under one
minute (EventBridge ``rate()`` counts whole minutes, so the 15 s of the source article
cannot be had), an output bucket equal to the input bucket without disjoint prefixes
(every output object would invoke the function again), bad bucket names, overlapping
suffix filters (S3 refuses them).

Names of what deploy creates for a function NAME:

    ECR repository     mmsctl-lambda/NAME
    model bucket       mmsctl-NAME-model-<8 hex of account+region>  (or the one given)
    IAM role           /mmsctl-lambda/mmsctl-lambda-NAME, inline policy mmsctl-lambda
    log group          /aws/lambda/NAME
    function           NAME (alias ``live`` with provisioned concurrency)
    warm-up rule       mmsctl-NAME-warm
    S3 notifications   ids mmsctl-NAME-<suffix> on the input bucket
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Optional

from mmsctl.cloud.lambda_.failures import (
    Destination,
    check_concurrency,
    check_retries,
    default_queue_name,
    parse_destination,
    parse_event_age,
)
from mmsctl.errors import ConfigError, UsageError

__all__ = [
    "DEFAULT_SUFFIXES",
    "LoopingBuckets",
    "ScheduleTooShort",
    "DeploySpec",
    "MEMORY_RANGE",
    "TIMEOUT_RANGE",
    "check_bucket_name",
    "check_function_name",
    "check_lambda_name",
    "model_bucket_name",
    "parse_schedule",
    "repository_name",
    "role_name",
    "rule_name",
]

MEMORY_RANGE = (128, 10240)
TIMEOUT_RANGE = (1, 900)
PROVISIONED_MAX = 10_000
#: S3 matches suffixes case-sensitively: both spellings are needed.
DEFAULT_SUFFIXES = (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG")
ROLE_PATH = "/mmsctl-lambda/"  # not under ec2's /mmsctl/: `ec2 cleanup` never sees these roles
POLICY_NAME = "mmsctl-lambda"
ALIAS = "live"
LOG_RETENTION_DAYS = 30

_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
_ANY_FUNCTION = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_DURATION = re.compile(r"^\s*(\d+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?|d|days?)\s*$", re.I)
_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]{1,253}(:\d{1,5})?$")


#: S3's reserved ending of access point alias bucket names (not a flag).
_OL_S3 = "--ol-s3"


class ScheduleTooShort(UsageError):
    """A keep-warm schedule under one minute: EventBridge cannot run it; provisioned concurrency can."""

    reference = "lambda-schedule-too-short"


class LoopingBuckets(UsageError):
    """An output bucket that is the input bucket with overlapping prefixes: every output would trigger again."""

    reference = "lambda-looping-buckets"


def _words(param: str) -> str:
    """An argument's name as words: ``input_bucket`` -> ``input bucket``."""
    return param.replace("_", " ")


def check_function_name(name: str) -> str:
    """NAME names the function and, inside longer names, the role, rule, repository and bucket."""
    if not _NAME.match(name or ""):
        raise UsageError(f"function name {name!r}: use 1-40 lower-case letters, digits and '-' "
                         "(not at either end)", hint="it also names the bucket, role and repository deploy creates")
    return name


def check_lambda_name(name: str) -> str:
    """Any Lambda function name (invoke, logs and run-local work on functions mmsctl did not deploy too)."""
    if not _ANY_FUNCTION.match(name or ""):
        raise UsageError(f"function name {name!r}: Lambda names are 1-64 letters, digits, '-' and '_'")
    return name


def check_bucket_name(bucket: str, param: str) -> str:
    """S3's rules for a bucket name (general purpose buckets); *param* is the argument that gave it."""
    ok = bool(_BUCKET.match(bucket or "")) and ".." not in bucket and not bucket.startswith("xn--") \
        and not bucket.endswith(("-s3alias", _OL_S3)) and ".-" not in bucket and "-." not in bucket
    try:
        ipaddress.ip_address(bucket)
        ok = False
    except ValueError:
        pass
    if not ok:
        raise UsageError(f"{_words(param)} {bucket!r} is not a valid S3 bucket name", param=param,
                         hint="3-63 characters: lower-case letters, digits, '.' and '-'")
    return bucket


def _check_prefix(prefix: str, param: str) -> str:
    if prefix.startswith("/"):
        raise UsageError(f"{_words(param)} {prefix!r}: S3 keys do not start with '/'", param=param,
                         hint=f"use {prefix.lstrip('/')!r}")
    if len(prefix.encode("utf-8")) > 512:
        raise UsageError(f"{_words(param)} is longer than 512 bytes", param=param)
    return prefix


def parse_schedule(text: str) -> tuple[int, str]:
    """``5m`` -> ``(300, "rate(5 minutes)")``: EventBridge's rate() counts whole minutes, one at least.

    Raises:
        UsageError: not a duration, or not whole minutes (``warm``).
        ScheduleTooShort: under one minute.
    """
    match = _DURATION.match(text or "")
    if not match:
        raise UsageError(f"warm-up schedule {text!r} is not a duration", param="warm",
                         hint="write it like 5m, 1h or 1d")
    number, unit = int(match.group(1)), match.group(2).lower()
    seconds = number * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit[0]]
    if seconds < 60:
        raise ScheduleTooShort(
            f"warm-up schedule {text}: EventBridge schedules run at most once a minute; {seconds} s is not possible "
            "(the 15 s keep-warm of the source article cannot be built with EventBridge)", param="warm",
            hint="use 1m or more, or provisioned concurrency to keep instances initialised")
    if seconds % 60:
        raise UsageError(f"warm-up schedule {text}: EventBridge rate() takes whole minutes", param="warm",
                         hint="use e.g. 2m")
    for size, word in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds % size == 0:
            count = seconds // size
            return seconds, f"rate({count} {word}{'' if count == 1 else 's'})"
    raise AssertionError("unreachable")  # pragma: no cover


def _overlaps(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


@dataclass
class DeploySpec:
    """What deploy was asked for; :meth:`check` refuses what AWS would refuse or what would hurt."""

    name: str
    model: str
    image: Optional[str] = None
    memory: int = 1024
    timeout: int = 30
    input_bucket: Optional[str] = None
    output_bucket: Optional[str] = None
    input_prefix: str = ""
    output_prefix: str = ""
    suffixes: tuple[str, ...] = DEFAULT_SUFFIXES
    url: bool = False
    public: bool = False
    warm: Optional[str] = None
    provisioned: Optional[int] = None
    model_bucket: Optional[str] = None
    model_source: str = "s3"  # "s3": the archive goes to the model bucket; "image": baked into *image*
    fetch_allow: str = ""  # non-public destinations ?url= may reach (mmsctl.addresses)
    cors: tuple[str, ...] = ()  # origins browsers may call the function URL from
    max_concurrency: Optional[int] = None  # reserved concurrency
    on_failure: Optional[str] = None  # sqs://, sns://, s3://, an ARN, "none"; default: our dead-letter queue
    retries: Optional[int] = None  # asynchronous retries, 0-2
    max_event_age: Optional[str] = None  # 60 s - 6 h
    warnings: list[str] = field(default_factory=list)

    @property
    def s3_trigger(self) -> bool:
        return self.input_bucket is not None

    @property
    def failure_destination(self) -> Optional[Destination]:
        """Where failed asynchronous events go: the one given, else (a pipeline) our dead-letter queue."""
        if self.on_failure is not None:
            return parse_destination(self.on_failure)
        return Destination("sqs", default_queue_name(self.name)) if self.s3_trigger else None

    @property
    def event_age_s(self) -> Optional[int]:
        return parse_event_age(self.max_event_age) if self.max_event_age is not None else None

    @property
    def schedule(self) -> Optional[str]:
        return parse_schedule(self.warm)[1] if self.warm else None

    def check(self) -> "DeploySpec":
        """Refuse what cannot work; collect warnings. No AWS call is made here.

        Raises:
            UsageError: the first thing that cannot work (its ``params`` name the fields).
        """
        check_function_name(self.name)
        low, high = MEMORY_RANGE
        if not low <= self.memory <= high:
            raise UsageError(f"memory {self.memory}: Lambda allows {low}-{high} MB", param="memory")
        low, high = TIMEOUT_RANGE
        if not low <= self.timeout <= high:
            raise UsageError(f"timeout {self.timeout}: Lambda allows {low}-{high} seconds", param="timeout")
        if self.memory < 512:
            self.warnings.append(f"{self.memory} MB is little for mxnet and a model; 1024 MB is the tested size")
        if self.timeout < 10:
            self.warnings.append(f"a {self.timeout} s timeout may not cover a cold start that loads the model "
                                 "(the source article's model timed out at the 3 s default)")
        if self.model_source not in ("s3", "image"):
            raise UsageError(f"model source {self.model_source!r}: choose s3 or image", param="model_source")
        if self.model_source == "image" and not self.image:
            raise UsageError("model source image needs an image (one built with the model baked in)",
                             params=("model_source", "image"))
        if self.image and ecr_uri(self.image) is None:
            raise UsageError(f"image {self.image!r} is not an Amazon ECR image URI", param="image",
                             hint="Lambda runs images from ECR: ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO:TAG")
        if self.model_bucket:
            check_bucket_name(self.model_bucket, "model_bucket")
            if self.model.startswith("s3://"):
                raise UsageError("a model bucket is for an archive deploy uploads; an s3:// model stays where it is",
                                 param="model_bucket")
        if self.public and not self.url:
            raise UsageError("public makes the function URL public: ask for a function URL too",
                             params=("public", "url"))
        if self.public:
            self.warnings.append("the function URL is public (AuthType NONE): anyone with the URL can invoke it "
                                 "and you pay for every call")
        self._check_buckets()
        self._check_async()
        self._check_cors()
        if self.fetch_allow:
            from mmsctl.addresses import AllowList

            try:
                AllowList.parse(self.fetch_allow)
            except ConfigError as exc:
                raise UsageError(str(exc), param="fetch_allow") from None
            self.warnings.append(f"URL inputs may reach {self.fetch_allow} (not only public addresses)")
        if self.warm is not None:
            parse_schedule(self.warm)
        if self.provisioned is not None:
            if self.warm is not None:
                raise UsageError("a warm-up schedule or provisioned concurrency, not both", params=("warm", "provisioned"),
                                 hint="provisioned instances are always initialised; a warm-up schedule adds nothing")
            if not 1 <= self.provisioned <= PROVISIONED_MAX:
                raise UsageError(f"provisioned concurrency {self.provisioned}: use 1-{PROVISIONED_MAX}",
                                 param="provisioned")
        if not self.url and not self.s3_trigger:
            self.warnings.append("neither a function URL nor an S3 trigger: the function can only be invoked directly")
        return self

    def _check_cors(self) -> None:
        if self.cors and not self.url:
            raise UsageError("CORS is a setting of the function URL: ask for a function URL too", params=("cors", "url"))
        if len(self.cors) > 100:
            raise UsageError(f"{len(self.cors)} CORS origins; a function URL takes at most 100", param="cors")
        for origin in self.cors:
            if origin != "*" and not _ORIGIN.match(origin):
                raise UsageError(f"CORS origin {origin[:120]!r} is not * or scheme://host[:port] (no path)", param="cors")
        if "*" in self.cors and not self.public:
            self.warnings.append("CORS allows every origin on an IAM-authenticated URL: browsers must still sign")

    def _check_async(self) -> None:
        if self.max_concurrency is not None:
            check_concurrency(self.max_concurrency)
            if self.provisioned is not None and self.provisioned > self.max_concurrency:
                raise UsageError(f"provisioned concurrency {self.provisioned} is more than the cap "
                                 f"{self.max_concurrency}", params=("provisioned", "max_concurrency"))
        if self.retries is not None:
            check_retries(self.retries)
        destination = self.failure_destination  # parses it
        if destination is not None and destination.service == "s3" and destination.arn is None:
            check_bucket_name(destination.name, "on_failure")
        self.event_age_s  # noqa: B018 - parses it
        if destination is not None and self.input_bucket and destination.service == "s3" \
                and destination.name in (self.input_bucket, self.output_bucket):
            raise UsageError(f"failure destination s3://{destination.name} is a bucket of the pipeline",
                             params=("on_failure", "input_bucket"), hint="send failures to another bucket or a queue")

    def _check_buckets(self) -> None:
        if (self.input_bucket is None) != (self.output_bucket is None):
            raise UsageError("an input bucket and an output bucket go together (the S3 pipeline needs both)",
                             params=("input_bucket", "output_bucket"))
        _check_prefix(self.input_prefix, "input_prefix")
        _check_prefix(self.output_prefix, "output_prefix")
        if self.input_bucket is None or self.output_bucket is None:
            if self.input_prefix or self.output_prefix:
                raise UsageError("input and output prefixes need the input and output buckets",
                                 params=("input_prefix" if self.input_prefix else "output_prefix",
                                         "input_bucket", "output_bucket"))
            return
        check_bucket_name(self.input_bucket, "input_bucket")
        check_bucket_name(self.output_bucket, "output_bucket")
        if self.input_bucket == self.output_bucket:
            if not self.input_prefix or not self.output_prefix or _overlaps(self.input_prefix, self.output_prefix):
                raise LoopingBuckets(
                    f"the output bucket is the input bucket {self.input_bucket!r} and the prefixes are not disjoint: "
                    "every output object would invoke the function again (an invocation loop)",
                    params=("output_bucket", "input_prefix", "output_prefix"),
                    hint="use another output bucket, or disjoint prefixes: input incoming/, output predictions/")
        if not self.suffixes:
            raise UsageError("at least one image suffix is needed for the S3 trigger", param="suffixes")
        for i, a in enumerate(self.suffixes):
            if not a.startswith(".") or len(a) < 2 or "/" in a:
                raise UsageError(f"suffix {a!r}: a suffix looks like .jpg", param="suffixes")
            for b in self.suffixes[i + 1:]:
                if a.endswith(b) or b.endswith(a):
                    raise UsageError(f"suffixes {a} and {b} overlap: S3 refuses overlapping notification filters",
                                     param="suffixes")


# -- names --------------------------------------------------------------------------------------


def repository_name(name: str) -> str:
    return f"mmsctl-lambda/{name}"


def role_name(name: str) -> str:
    return f"mmsctl-lambda-{name}"


def rule_name(name: str) -> str:
    return f"mmsctl-{name}-warm"


def log_group_name(name: str) -> str:
    return f"/aws/lambda/{name}"


def model_bucket_name(name: str, account: str, region: str) -> str:
    """Bucket names are global: a short hash of account and region keeps this one ours (≤ 63 characters)."""
    digest = hashlib.sha256(f"{account}:{region}".encode()).hexdigest()[:8]
    return f"mmsctl-{name}-model-{digest}"


def notification_id(name: str, suffix: str) -> str:
    return f"mmsctl-{name}-{suffix.lstrip('.')}"


def notification_prefix(name: str) -> str:
    return f"mmsctl-{name}-"


def ecr_uri(image: str) -> Optional[tuple[str, str, str, Optional[str]]]:
    """``(account, region, repository, tag)`` of an ECR image URI, else None."""
    from mmsctl.cloud.aws.ecr import parse_ecr_image

    parsed = parse_ecr_image(image)
    if parsed is None or not (parsed.tag or parsed.digest):
        return None
    return parsed.account, parsed.region, parsed.repository, parsed.tag
