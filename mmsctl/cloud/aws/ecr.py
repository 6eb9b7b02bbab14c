"""Amazon ECR image URIs: ``ACCOUNT.dkr.ecr.REGION.DOMAIN/REPOSITORY[:TAG|@sha256:HEX]``, where DOMAIN is the
region's partition's (``amazonaws.com``, ``amazonaws.com.cn``, ``amazonaws.eu``, …: :func:`~mmsctl.cloud.aws.session.dns_suffix`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from mmsctl.cloud.aws.session import dns_suffix

__all__ = ["EcrImage", "parse_ecr_image", "repository_uri"]

_IMAGE = re.compile(r"^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.([a-z0-9.-]+?)/([a-z0-9._/-]+)"
                    r"(?::([\w.-]{1,128})|@(sha256:[0-9a-f]{64}))?$")


@dataclass(frozen=True)
class EcrImage:
    """An image URI's parts; neither tag nor digest when the URI names the repository alone."""

    account: str
    region: str
    repository: str
    tag: Optional[str]
    digest: Optional[str]


def parse_ecr_image(uri: str) -> Optional[EcrImage]:
    """*uri*'s parts, or None when it is no ECR image URI (its domain not its region's included)."""
    match = _IMAGE.match(uri or "")
    if match is None or match.group(3) != dns_suffix(match.group(2)):
        return None
    account, region, _, repository, tag, digest = match.groups()
    return EcrImage(account, region, repository, tag, digest)


def repository_uri(account: str, region: str, repository: str) -> str:
    """The URI of *repository* in *account* and *region*, under the region's domain."""
    return f"{account}.dkr.ecr.{region}.{dns_suffix(region)}/{repository}"
