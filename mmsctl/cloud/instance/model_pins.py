"""``s3://`` models an instance reads where they are: which region and URL form reach each, and what pins it.

Resolved when the fleet or launch is made, on the user's machine, and recorded in the boot manifest (whose
sha256 the user data pins), so the instance's standard-library fetcher signs each request for the bucket's own
region and uses the form whose certificate holds:

- region: HeadBucket's ``x-amz-bucket-region`` (S3 sends it whatever the caller may do, with a 301, 400 or 403
  too), else GetBucketLocation. A request signed for another region is refused (301 PermanentRedirect,
  400 AuthorizationHeaderMalformed).
- form: virtual-hosted (``BUCKET.s3.REGION.amazonaws.com``), or path-style (``s3.REGION.amazonaws.com/BUCKET``)
  for a name with dots, which the ``*.s3.REGION`` wildcard certificate does not cover; the partition's domain
  (``amazonaws.com.cn`` in China) comes from the region on the instance.
- pin: the object's VersionId when the bucket keeps versions (a version never changes), else its sha256,
  computed here by reading it once; its size, a ceiling for the download.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.session import AwsSession, partition
from mmsctl.errors import CloudError, UsageError, causes

__all__ = ["bucket_region", "pin_models", "url_style"]

#: A bucket name that works as a host name label under ``*.s3.REGION.amazonaws.com`` (no dots, no capitals).
_VIRTUAL = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_LEGACY_LOCATIONS = {"": "us-east-1", "EU": "eu-west-1"}


def url_style(bucket: str) -> str:
    """``virtual`` where the bucket's name is one DNS label under the wildcard certificate, else ``path``."""
    return "virtual" if _VIRTUAL.match(bucket) else "path"


def _header_region(exc_or_answer: Any) -> Optional[str]:
    """``x-amz-bucket-region`` of a HeadBucket answer, or of the error response behind a translated error."""
    responses: list[Any] = ([exc_or_answer] if isinstance(exc_or_answer, dict)
                            else [getattr(c, "response", None) for c in causes(exc_or_answer)])
    for response in responses:
        if isinstance(response, dict):
            headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
            region = response.get("BucketRegion") or headers.get("x-amz-bucket-region")
            if region:
                return str(region)
    return None


def bucket_region(aws: AwsSession, bucket: str) -> str:
    """The region *bucket* lives in (HeadBucket's header, else GetBucketLocation).

    Raises:
        UsageError: there is no such bucket.
        CloudError: neither call answers (access denied to both, …).
    """
    try:
        region = _header_region(aws.call("s3", "head_bucket", Bucket=bucket))
    except CloudError as exc:
        if aws_code(exc) in ("404", "NoSuchBucket", "NotFound"):
            raise UsageError(f"model s3://{bucket}/…: no such bucket", param="models") from exc
        region = _header_region(exc)
    if region is None:
        found = aws.call("s3", "get_bucket_location", Bucket=bucket).get("LocationConstraint") or ""
        region = _LEGACY_LOCATIONS.get(found, found)
    return region


def pin_models(aws: AwsSession, entries: list[dict[str, Any]], *, read: bool = True) -> None:
    """Add to each in-place model entry (``uri``, ``dest``) its ``region``, ``style``, ``size`` and pin: ``version``
    when the bucket keeps versions, else ``sha256`` of the object read now (*read* false, in a plan: left out).

    Raises:
        UsageError: a bucket in another partition than this session's region (an instance cannot sign for it).
    """
    for entry in entries:
        bucket, key = entry["uri"].removeprefix("s3://").split("/", 1)
        region = bucket_region(aws, bucket)
        if partition(region) != partition(aws.region):
            raise UsageError(f"model {entry['uri']}: the bucket is in {region}, another AWS partition than "
                             f"{aws.region}", param="models")
        head = aws.call("s3", "head_object", region=region, Bucket=bucket, Key=key)
        entry.update(region=region, style=url_style(bucket), size=int(head.get("ContentLength") or 0))
        version = head.get("VersionId")
        if version and version != "null":
            entry["version"] = str(version)
        elif read:
            entry["sha256"] = _sha256_of_object(aws, region, bucket, key, entry["size"])


def _sha256_of_object(aws: AwsSession, region: str, bucket: str, key: str, size: int) -> str:
    """Read the object once (no more than the *size* HeadObject gave) and hash it."""
    body = aws.call("s3", "get_object", region=region, read_timeout=600.0, Bucket=bucket, Key=key)["Body"]
    digest, got = hashlib.sha256(), 0
    for block in iter(lambda: body.read(1 << 20), b""):
        got += len(block)
        if got > size:
            raise CloudError(f"s3://{bucket}/{key} changed while it was read (larger than {size} bytes)")
        digest.update(block)
    return digest.hexdigest()
