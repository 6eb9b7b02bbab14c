"""The ``MMSCTL_LAMBDA_*`` environment of the handler: what the image sets and ``lambda deploy`` overrides.

The Dockerfile of ``mmsctl lambda build`` sets defaults (a baked model); the function's
environment, written by ``mmsctl lambda deploy``, wins over them. Every number has a
ceiling, checked here once, so a bad value fails the container's start, not a request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional

from mmsctl.errors import ConfigError

__all__ = [
    "ENV_INPUT_BUCKET",
    "ENV_INPUT_PREFIX",
    "ENV_MAX_IMAGE_BYTES",
    "ENV_MAX_PIXELS",
    "ENV_MODEL",
    "ENV_MODEL_VERSION",
    "ENV_OUTPUT_BUCKET",
    "ENV_OUTPUT_PREFIX",
    "ENV_TOP_K",
    "ENV_URL_TIMEOUT",
    "ENV_WORK_DIR",
    "HANDLER",
    "HandlerSettings",
    "IMAGE_MODEL_DIR",
    "S3Uri",
    "parse_s3_uri",
]

ENV_MODEL = "MMSCTL_LAMBDA_MODEL"
ENV_MODEL_VERSION = "MMSCTL_LAMBDA_MODEL_VERSION"
ENV_INPUT_BUCKET = "MMSCTL_LAMBDA_INPUT_BUCKET"
ENV_INPUT_PREFIX = "MMSCTL_LAMBDA_INPUT_PREFIX"
ENV_OUTPUT_BUCKET = "MMSCTL_LAMBDA_OUTPUT_BUCKET"
ENV_OUTPUT_PREFIX = "MMSCTL_LAMBDA_OUTPUT_PREFIX"
ENV_MAX_IMAGE_BYTES = "MMSCTL_LAMBDA_MAX_IMAGE_BYTES"
ENV_MAX_PIXELS = "MMSCTL_LAMBDA_MAX_PIXELS"
ENV_URL_TIMEOUT = "MMSCTL_LAMBDA_URL_TIMEOUT"
ENV_TOP_K = "MMSCTL_LAMBDA_TOP_K"
ENV_WORK_DIR = "MMSCTL_LAMBDA_WORK_DIR"

#: The handler entry point the image's ``CMD`` names (module.function, as Lambda wants it).
HANDLER = "mmsctl.serverless.handler.handler"
#: Where ``lambda build`` bakes the model into the image.
IMAGE_MODEL_DIR = "/opt/mmsctl/model"

MiB = 1024 * 1024
_DEFAULT_MAX_BYTES = 10 * MiB
_MAX_MAX_BYTES = 100 * MiB
_DEFAULT_MAX_PIXELS = 40_000_000
_MAX_MAX_PIXELS = 200_000_000
_DEFAULT_URL_TIMEOUT = 10.0
_MAX_URL_TIMEOUT = 60.0
_MAX_TOP_K = 1000


@dataclass(frozen=True)
class HandlerSettings:
    """Everything the handler is configured with, checked."""

    model: str
    model_version: Optional[str] = None
    input_bucket: Optional[str] = None
    input_prefix: str = ""
    output_bucket: Optional[str] = None
    output_prefix: str = ""
    max_image_bytes: int = _DEFAULT_MAX_BYTES
    max_pixels: int = _DEFAULT_MAX_PIXELS
    url_timeout: float = _DEFAULT_URL_TIMEOUT
    top_k: Optional[int] = None
    work_dir: str = "/tmp/mmsctl"

    @property
    def model_from_s3(self) -> bool:
        return self.model.startswith("s3://")

    @classmethod
    def from_environ(cls, environ: Optional[Mapping[str, str]] = None) -> "HandlerSettings":
        """Read and check the ``MMSCTL_LAMBDA_*`` variables.

        Raises:
            ConfigError: no model, or a number out of its range.
        """
        env = os.environ if environ is None else environ
        model = env.get(ENV_MODEL, "").strip()
        if not model:
            raise ConfigError(f"{ENV_MODEL} is not set: the image names no model",
                              hint="build the image with `mmsctl lambda build MODEL`, or deploy with --model")
        top_k = _int(env, ENV_TOP_K, None, 1, _MAX_TOP_K)
        return cls(
            model=model,
            model_version=env.get(ENV_MODEL_VERSION) or None,
            input_bucket=env.get(ENV_INPUT_BUCKET) or None,
            input_prefix=env.get(ENV_INPUT_PREFIX, ""),
            output_bucket=env.get(ENV_OUTPUT_BUCKET) or None,
            output_prefix=env.get(ENV_OUTPUT_PREFIX, ""),
            max_image_bytes=int(_int(env, ENV_MAX_IMAGE_BYTES, _DEFAULT_MAX_BYTES, 1, _MAX_MAX_BYTES) or 0),
            max_pixels=int(_int(env, ENV_MAX_PIXELS, _DEFAULT_MAX_PIXELS, 1, _MAX_MAX_PIXELS) or 0),
            url_timeout=_float(env, ENV_URL_TIMEOUT, _DEFAULT_URL_TIMEOUT, 0.1, _MAX_URL_TIMEOUT),
            top_k=top_k,
            work_dir=env.get(ENV_WORK_DIR) or "/tmp/mmsctl",
        )


def _int(env: Mapping[str, str], key: str, default: Optional[int], low: int, high: int) -> Optional[int]:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a whole number") from None
    if not low <= value <= high:
        raise ConfigError(f"{key}={value} is out of range ({low}..{high})")
    return value


def _float(env: Mapping[str, str], key: str, default: float, low: float, high: float) -> float:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a number") from None
    if not low <= value <= high:  # also refuses nan
        raise ConfigError(f"{key}={value:g} is out of range ({low:g}..{high:g})")
    return value


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
