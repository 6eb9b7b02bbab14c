"""What ``sagemaker deploy`` is asked for, checked before any AWS call, and the names of what it makes.

An endpoint ``NAME`` (1-40 lower-case letters, digits and inner hyphens) gets a model and an endpoint
configuration whose names end in a hash of what they hold (``NAME-`` + 10 hex digits): the same model,
image and settings give the same names, so a second deploy finds them and changes nothing, and a
different one makes new ones beside the old (an endpoint is moved to a new configuration, never edited).
Around them: the execution role ``/mmsctl-sagemaker/mmsctl-sagemaker-NAME``, the log group SageMaker writes
to (``/aws/sagemaker/Endpoints/NAME``), the model data under ``sagemaker/NAME/`` in the account's asset
bucket, and for real-time endpoints with ``--max`` the scaling target and policy of the one variant.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.errors import UsageError

__all__ = [
    "DeploySpec",
    "NotAnEcrImage",
    "LOG_RETENTION_DAYS",
    "ROLE_PATH",
    "SERVERLESS_MEMORY",
    "VARIANT",
    "check_name",
    "config_name",
    "log_group",
    "model_name",
    "model_prefix",
    "role_name",
]

_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
#: The one production variant (the SageMaker SDK's name for it).
VARIANT = "AllTraffic"
ROLE_PATH = "/mmsctl-sagemaker/"
LOG_RETENTION_DAYS = 30
#: ServerlessConfig's memory sizes (MB) and its concurrency range (ProductionVariantServerlessConfig).
SERVERLESS_MEMORY = (1024, 2048, 3072, 4096, 5120, 6144)
MAX_SERVERLESS_CONCURRENCY = 200
#: Ceilings mmsctl sets on what one command may ask for.
MAX_INSTANCES = 100
MAX_TARGET_RPS = 10_000.0
def check_name(name: str) -> str:
    """NAME names the endpoint and, inside longer names, its model, configuration and role."""
    if not _NAME.match(name or ""):
        raise UsageError(f"endpoint name {name!r}: use 1-40 lower-case letters, digits and '-' (not at either end)",
                         hint="it also names the model, configuration and role deploy creates")
    return name


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:10]


def model_name(endpoint: str, container: dict[str, Any], role_arn: str) -> str:
    """The model's name: the endpoint's, and a hash of its container (image, data, environment) and role."""
    return f"{endpoint}-{_digest({'container': container, 'role': role_arn})}"


def config_name(endpoint: str, variants: list[dict[str, Any]]) -> str:
    """The endpoint configuration's name: the endpoint's, and a hash of its variants."""
    return f"{endpoint}-{_digest(variants)}"


def role_name(endpoint: str) -> str:
    return f"mmsctl-sagemaker-{endpoint}"


def log_group(endpoint: str) -> str:
    """Where SageMaker writes the containers' output."""
    return f"/aws/sagemaker/Endpoints/{endpoint}"


def model_prefix(endpoint: str) -> str:
    """The endpoint's folder in the account's asset bucket."""
    return f"sagemaker/{endpoint}/"


@dataclass(frozen=True)
class ImageUri:
    """An ECR image: account, region, repository and a tag or digest."""

    account: str
    region: str
    repository: str
    tag: Optional[str]
    digest: Optional[str]

    def pinned(self, digest: str) -> str:
        """The image by *digest*, under its region's domain (``amazonaws.com.cn`` in China)."""
        from mmsctl.cloud.aws.ecr import repository_uri

        return f"{repository_uri(self.account, self.region, self.repository)}@{digest}"


class NotAnEcrImage(UsageError):
    """The image is not an ECR image URI: SageMaker pulls from ECR alone."""

    reference = "sagemaker-not-an-ecr-image"


def parse_image(uri: str) -> ImageUri:
    """``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG|@sha256:…]`` (SageMaker pulls from ECR).

    Raises:
        NotAnEcrImage: *uri* is not of that form.
    """
    from mmsctl.cloud.aws.ecr import parse_ecr_image

    image = parse_ecr_image(uri)
    if image is None:
        raise NotAnEcrImage(f"image {uri!r} is not an ECR image URI: SageMaker pulls "
                            "ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG]", param="image")
    tag = image.tag if image.tag or image.digest else "latest"
    return ImageUri(image.account, image.region, image.repository, tag, image.digest)


@dataclass
class DeploySpec:
    """One endpoint as asked for; :meth:`check` refuses what AWS would refuse, before any call."""

    name: str
    #: A zoo name, archive or folder (packed as model.tar.gz), ``s3://…/model.tar.gz`` (used where it is), or
    #: None with ``model_source="image"``.
    model: Optional[str]
    image: str
    instance_type: str = "ml.m5.large"
    count: int = 1
    min_count: Optional[int] = None
    max_count: Optional[int] = None
    target_rps: float = 10.0
    serverless_memory: Optional[int] = None
    max_concurrency: Optional[int] = None
    workers: Optional[int] = None
    timeout_s: Optional[int] = None
    #: ``s3``: the model travels as ``model.tar.gz`` (ModelDataUrl); ``image``: the one baked into the image.
    model_source: str = "s3"
    warnings: list[str] = field(default_factory=list)

    @property
    def serverless(self) -> bool:
        return self.serverless_memory is not None

    @property
    def scaled(self) -> bool:
        return self.max_count is not None

    def check(self) -> "DeploySpec":
        """The spec, checked (UsageError naming the flag); warnings added for what AWS takes but may regret."""
        check_name(self.name)
        parse_image(self.image)
        if self.model_source not in ("s3", "image"):
            raise UsageError(f"model source {self.model_source!r}: s3 or image", param="model_source")
        if self.serverless:
            self._check_serverless()
        else:
            self._check_instances()
        from mmsctl.cloud.sagemaker import contract

        for value, param, ceiling in ((self.workers, "workers", contract.MAX_WORKERS),
                                      (self.timeout_s, "timeout_s", contract.MAX_TIMEOUT_S)):
            if value is not None and not 1 <= value <= ceiling:
                raise UsageError(f"{param.split('_')[0]} must be from 1 to {ceiling}, not {value}", param=param)
        if self.model_source == "s3" and not self.model:
            raise UsageError("no model to serve: name one, or serve the one baked into the image with model "
                             "source 'image'", params=("model", "model_source"))
        if self.model_source == "image" and self.model:
            raise UsageError("model source 'image' serves the model baked into the image: name no model",
                             params=("model", "model_source"))
        return self

    def _check_serverless(self) -> None:
        if self.serverless_memory not in SERVERLESS_MEMORY:
            raise UsageError(f"serverless memory {self.serverless_memory} MB: SageMaker takes "
                             f"{', '.join(map(str, SERVERLESS_MEMORY))} MB", param="serverless_memory")
        concurrency = 5 if self.max_concurrency is None else self.max_concurrency
        if not 1 <= concurrency <= MAX_SERVERLESS_CONCURRENCY:
            raise UsageError(f"max concurrency {concurrency}: 1 to {MAX_SERVERLESS_CONCURRENCY}",
                             param="max_concurrency")
        self.max_concurrency = concurrency
        given = [param for param, value, default in (("instance_type", self.instance_type, "ml.m5.large"),
                                                     ("count", self.count, 1), ("min_count", self.min_count, None),
                                                     ("max_count", self.max_count, None)) if value != default]
        if given:
            raise UsageError("a serverless endpoint has no instances: an instance type, count, minimum and maximum "
                             "are for real-time endpoints", params=("serverless_memory", *given))

    def _check_instances(self) -> None:
        if self.max_concurrency is not None:
            raise UsageError("a maximum concurrency is for serverless endpoints: give their memory too",
                             params=("max_concurrency", "serverless_memory"))
        if not self.instance_type.startswith("ml.") or not re.match(r"^ml\.[a-z0-9]+\.[a-z0-9]+$", self.instance_type):
            raise UsageError(f"instance type {self.instance_type!r} is not one of SageMaker's", param="instance_type",
                             hint="SageMaker's types start with ml.: ml.m5.large, ml.c5.xlarge")
        low = self.count if self.min_count is None else self.min_count
        high = self.max_count if self.max_count is not None else self.count
        if not 1 <= low <= self.count <= high <= MAX_INSTANCES:
            raise UsageError(f"instances: need 1 <= minimum ({low}) <= count ({self.count}) <= maximum ({high}) "
                             f"<= {MAX_INSTANCES}", params=("min_count", "count", "max_count"))
        if self.min_count is not None and self.max_count is None:
            raise UsageError("a minimum scales the endpoint: give a maximum too", params=("min_count", "max_count"))
        if not 0 < self.target_rps <= MAX_TARGET_RPS:
            raise UsageError(f"requests per instance the scaling keeps must be over 0 and at most "
                             f"{MAX_TARGET_RPS:g}", param="target_rps")
        family = self.instance_type.split(".")[1]
        if family.startswith(("p", "g", "inf", "trn")):
            self.warnings.append(f"{self.instance_type} has an accelerator the image does not use: the image runs "
                                 "mxnet 1.9.1 on the CPU")
        if self.count == 1 and not self.scaled:
            self.warnings.append("one instance: SageMaker recommends two or more, in different Availability "
                                 "Zones, for an endpoint that must stay up")
