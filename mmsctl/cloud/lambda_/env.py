"""The ``MMSCTL_LAMBDA_*`` environment by name: what the image and ``lambda deploy`` set, and the handler reads.

Both sides of a Lambda function speak it: the control plane writes these variables
(the Dockerfile of ``lambda build``, the function's configuration in ``lambda deploy``,
a local run's plan) and reads them back (``describe``, ``invoke --s3``); the handler
(:mod:`mmsctl.lambda_.settings`) reads and checks them at the container's start.
Model locations in S3 are ``s3://bucket/key``, optionally pinned to one object version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mmsctl.errors import ConfigError

__all__ = [
    "ENV_BUCKET_OWNER",
    "ENV_INPUT_BUCKET",
    "ENV_INPUT_PREFIX",
    "ENV_MAX_IMAGE_BYTES",
    "ENV_MAX_PIXELS",
    "ENV_MODEL",
    "ENV_MODEL_VERSION",
    "ENV_OUTPUT_BUCKET",
    "ENV_OUTPUT_PREFIX",
    "ENV_PREFIX",
    "ENV_TOP_K",
    "ENV_URL_TIMEOUT",
    "ENV_FETCH_ALLOW",
    "ENV_WORK_DIR",
    "HANDLER",
    "IMAGE_MODEL_DIR",
    "PREPARE",
    "S3Uri",
    "SAGEMAKER_SERVE",
    "parse_s3_uri",
]

#: Every variable of the handler starts with this.
ENV_PREFIX = "MMSCTL_LAMBDA_"
ENV_MODEL = "MMSCTL_LAMBDA_MODEL"
ENV_MODEL_VERSION = "MMSCTL_LAMBDA_MODEL_VERSION"
ENV_INPUT_BUCKET = "MMSCTL_LAMBDA_INPUT_BUCKET"
ENV_INPUT_PREFIX = "MMSCTL_LAMBDA_INPUT_PREFIX"
ENV_OUTPUT_BUCKET = "MMSCTL_LAMBDA_OUTPUT_BUCKET"
ENV_OUTPUT_PREFIX = "MMSCTL_LAMBDA_OUTPUT_PREFIX"
#: The account that owns the input and output buckets: the handler's every call on them names it
#: (``ExpectedBucketOwner``), so a bucket of that name in another account is refused, not written to.
ENV_BUCKET_OWNER = "MMSCTL_LAMBDA_BUCKET_OWNER"
ENV_MAX_IMAGE_BYTES = "MMSCTL_LAMBDA_MAX_IMAGE_BYTES"
ENV_MAX_PIXELS = "MMSCTL_LAMBDA_MAX_PIXELS"
ENV_URL_TIMEOUT = "MMSCTL_LAMBDA_URL_TIMEOUT"
#: Non-public destinations ``?url=`` may reach (addresses, CIDR blocks, host names; see mmsctl.addresses).
ENV_FETCH_ALLOW = "MMSCTL_LAMBDA_FETCH_ALLOW"
ENV_TOP_K = "MMSCTL_LAMBDA_TOP_K"
ENV_WORK_DIR = "MMSCTL_LAMBDA_WORK_DIR"

#: The handler entry point the image's ``CMD`` names (module.function, as Lambda wants it).
HANDLER = "mmsctl.lambda_.handler.handler"
#: The image's build step (``RUN python -m …``): compiles mxnet's wrappers, loads a baked model once.
PREPARE = "mmsctl.lambda_.prepare"
#: Where ``lambda build`` bakes the model into the image.
IMAGE_MODEL_DIR = "/opt/mmsctl/model"
#: The same image's SageMaker entry (``docker run IMAGE serve`` runs ``python -m`` this ``serve``).
SAGEMAKER_SERVE = "mmsctl.sagemaker"


@dataclass(frozen=True)
class S3Uri:
    """``s3://bucket/key``, optionally pinned to an object version (``?versionId=…``)."""

    bucket: str
    key: str
    version_id: Optional[str] = None

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" + (f"?versionId={self.version_id}" if self.version_id else "")


def parse_s3_uri(text: str, version_id: Optional[str] = None) -> S3Uri:
    """``s3://bucket/key[?versionId=V]`` -> :class:`S3Uri`; *version_id* wins over the query.

    Raises:
        ConfigError: not an s3:// URI with a bucket and a key.
    """
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(text)
    key = parts.path.lstrip("/")
    if parts.scheme != "s3" or not parts.netloc or not key or key.endswith("/"):
        raise ConfigError(f"{text!r} is not an S3 object URI (s3://bucket/key)")
    query = parse_qs(parts.query)
    pinned = version_id or next(iter(query.get("versionId", [])), None)
    return S3Uri(parts.netloc, key, pinned or None)
