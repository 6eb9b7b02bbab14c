"""The handler's settings, read from its ``MMSCTL_LAMBDA_*`` environment once, at the container's start.

The Dockerfile of ``mmsctl lambda build`` sets defaults (a baked model); the function's
environment, written by ``mmsctl lambda deploy``, wins over them. The variables' names are
the control plane's too (:mod:`mmsctl.cloud.lambda_.env`); their meaning and ceilings are
here. Every number has a ceiling, checked here once, so a bad value fails the container's
start, not a request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional

from mmsctl.cloud.lambda_.env import (
    ENV_BUCKET_OWNER,
    ENV_FETCH_ALLOW,
    ENV_INPUT_BUCKET,
    ENV_INPUT_PREFIX,
    ENV_MAX_IMAGE_BYTES,
    ENV_MAX_PIXELS,
    ENV_MODEL,
    ENV_MODEL_VERSION,
    ENV_OUTPUT_BUCKET,
    ENV_OUTPUT_PREFIX,
    ENV_TOP_K,
    ENV_URL_TIMEOUT,
    ENV_WORK_DIR,
)
from mmsctl.errors import ConfigError
from mmsctl.addresses import AllowList

__all__ = ["HandlerSettings"]

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
    #: The input and output buckets' account (12 digits), named in every call on them; None: not checked.
    bucket_owner: Optional[str] = None
    max_image_bytes: int = _DEFAULT_MAX_BYTES
    max_pixels: int = _DEFAULT_MAX_PIXELS
    url_timeout: float = _DEFAULT_URL_TIMEOUT
    top_k: Optional[int] = None
    work_dir: str = "/tmp/mmsctl"
    fetch_allow: AllowList = AllowList()

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
                              hint="build the image with its model (`mmsctl lambda build MODEL`), or deploy it with a model")
        top_k = _int(env, ENV_TOP_K, None, 1, _MAX_TOP_K)
        return cls(
            model=model,
            model_version=env.get(ENV_MODEL_VERSION) or None,
            input_bucket=env.get(ENV_INPUT_BUCKET) or None,
            input_prefix=env.get(ENV_INPUT_PREFIX, ""),
            output_bucket=env.get(ENV_OUTPUT_BUCKET) or None,
            output_prefix=env.get(ENV_OUTPUT_PREFIX, ""),
            bucket_owner=_account(env),
            max_image_bytes=int(_int(env, ENV_MAX_IMAGE_BYTES, _DEFAULT_MAX_BYTES, 1, _MAX_MAX_BYTES) or 0),
            max_pixels=int(_int(env, ENV_MAX_PIXELS, _DEFAULT_MAX_PIXELS, 1, _MAX_MAX_PIXELS) or 0),
            url_timeout=_float(env, ENV_URL_TIMEOUT, _DEFAULT_URL_TIMEOUT, 0.1, _MAX_URL_TIMEOUT),
            top_k=top_k,
            work_dir=env.get(ENV_WORK_DIR) or "/tmp/mmsctl",
            fetch_allow=_allow(env),
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


def _account(env: Mapping[str, str]) -> Optional[str]:
    raw = env.get(ENV_BUCKET_OWNER, "").strip()
    if raw and not (len(raw) == 12 and raw.isdigit() and raw.isascii()):
        raise ConfigError(f"{ENV_BUCKET_OWNER}={raw[:40]!r} is not an AWS account id (12 digits)")
    return raw or None


def _allow(env: Mapping[str, str]) -> AllowList:
    """The ``?url=`` allow-list, checked at the container's start (a typo fails the init, not a request)."""
    try:
        return AllowList.parse(env.get(ENV_FETCH_ALLOW, ""))
    except ConfigError as exc:
        raise ConfigError(f"{ENV_FETCH_ALLOW}: {exc}") from None
