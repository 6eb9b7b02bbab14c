"""The private bucket an instance boots from: one per account and region, ``mmsctl-assets-ACCOUNT-REGION``.

``ec2 launch`` and ``fleet create`` put what an instance needs under a prefix of their own
(``fleet/NAME/``, ``ec2/NAME/``): the models and a manifest, which lists them and the wheels (mmsctl's and its
dependencies', shared by all under ``wheels/``) with their sha256. Every key names its content's sha256
(``models/SHA256/FILE``, ``manifests/SHA256.json``): what one launch template version boots is never
overwritten by a later rollout or launch, and its user data pins the manifest by that sha256. The bucket blocks
public access, encrypts by default (SSE-S3), keeps versions and is tagged ``mmsctl:managed``; an object
is uploaded only when it is not there yet, so the second fleet of a version uploads only its
models. The instance role may read exactly its prefix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.session import AwsSession, partition
from mmsctl.errors import CloudError

__all__ = ["Asset", "MANIFESTS", "WHEELS", "bucket_name", "delete_owned_prefix", "delete_prefix", "ensure_bucket",
           "manifest_document", "manifest_key", "merge_read_statements", "read_statement", "sha256_of", "upload"]

#: Under a prefix: one manifest per content, ``manifests/SHA256.json``.
MANIFESTS = "manifests/"
#: Wheels are shared by every prefix (a wheel's file name names its version): uploaded once per account and region.
WHEELS = "wheels/"
_BATCH = 1000


@dataclass(frozen=True)
class Asset:
    """One file an instance fetches: its object key, where it is here, its sha256, and where it goes on the
    instance (relative to its assets folder)."""

    key: str
    path: Path
    sha256: str
    dest: str
    size: int = 0


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bucket_name(account: str, region: str) -> str:
    return f"mmsctl-assets-{account}-{region}"


def ensure_bucket(aws: AwsSession, made: list[str], reused: list[str]) -> str:
    """The account's asset bucket in this region, created private, encrypted, versioned and tagged if missing.

    Raises:
        CloudError: a bucket of that name exists without the ``mmsctl:managed`` tag.
    """
    bucket = bucket_name(aws.account_id(), aws.region)
    try:
        found = aws.call("s3", "get_bucket_tagging", Bucket=bucket).get("TagSet") or []
    except CloudError as exc:
        code = aws_code(exc)
        if code == "NoSuchTagSet":
            raise CloudError(f"bucket {bucket} exists without mmsctl's tags; refusing to put instance assets in it",
                             hint="delete or rename it, or use another account") from exc
        if code not in ("NoSuchBucket", "404", "NotFound"):
            raise
        _create(aws, bucket)
        made.append(f"s3 bucket {bucket}")
        return bucket
    if tags.as_dict(found).get(tags.MANAGED) != "true":
        raise CloudError(f"bucket {bucket} exists and was not made by mmsctl; refusing to put instance assets in it")
    reused.append(f"s3 bucket {bucket}")
    return bucket


def _create(aws: AwsSession, bucket: str) -> None:
    location: dict[str, Any] = ({} if aws.region == "us-east-1"
                                else {"CreateBucketConfiguration": {"LocationConstraint": aws.region}})
    aws.call("s3", "create_bucket", Bucket=bucket, **location)
    aws.call("s3", "put_public_access_block", Bucket=bucket, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    aws.call("s3", "put_bucket_encryption", Bucket=bucket, ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}]})
    aws.call("s3", "put_bucket_versioning", Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    aws.call("s3", "put_bucket_tagging", Bucket=bucket, Tagging={"TagSet": tags.tag_list(
        tags.base_tags("asset-bucket", bucket))})


def manifest_document(assets: list[Asset], extra: Optional[dict[str, Any]] = None) -> bytes:
    """The manifest an instance fetches: every asset's key, sha256, size and place on the instance (and *extra*:
    the ``s3://`` models read in place). The same assets make the same bytes, so its sha256 can be rendered into
    user data before it is uploaded."""
    document = {"assets": [{"key": a.key, "sha256": a.sha256, "dest": a.dest, "size": a.size} for a in assets],
                **(extra or {})}
    return json.dumps(document, indent=1, sort_keys=True).encode("utf-8")


def manifest_key(prefix: str, document: bytes) -> str:
    return f"{prefix}{MANIFESTS}{hashlib.sha256(document).hexdigest()}.json"


def upload(aws: AwsSession, bucket: str, prefix: str, assets: list[Asset],
           manifest: bytes) -> tuple[list[str], list[str]]:
    """Put each asset unless the object there has the same sha256, then the *manifest* document under its
    sha256; (uploaded, unchanged) keys."""
    uploaded, unchanged = [], []
    for asset in assets:
        key = asset.key
        if aws.dry_run:  # a plan: nothing is read from disk or compared
            aws.call("s3", "put_object", Bucket=bucket, Key=key, Body=f"<{asset.path.name}>")
            uploaded.append(key)
            continue
        try:
            head = aws.call("s3", "head_object", Bucket=bucket, Key=key)
            same = (head.get("Metadata") or {}).get("sha256") == asset.sha256
        except CloudError as exc:
            if aws_code(exc) not in ("404", "NoSuchKey", "NotFound"):
                raise
            same = False
        if same:
            unchanged.append(key)
            continue
        with open(asset.path, "rb") as fh:
            aws.call("s3", "put_object", Bucket=bucket, Key=key, Body=fh, Metadata={"sha256": asset.sha256},
                     read_timeout=600.0)
        uploaded.append(key)
    aws.call("s3", "put_object", Bucket=bucket, Key=manifest_key(prefix, manifest), ContentType="application/json",
             Body=manifest)
    return uploaded, unchanged


def delete_prefix(aws: AwsSession, bucket: str, prefix: str) -> int:
    """Delete every version and delete marker under *prefix* (never the bucket, never another prefix)."""
    if not prefix or not prefix.endswith("/"):
        raise ValueError(f"refusing to delete under {prefix!r}: a prefix ends with '/'")
    try:
        entries = [{"Key": item["Key"], "VersionId": item["VersionId"]}
                   for key in ("Versions", "DeleteMarkers")
                   for item in aws.paginate("s3", "list_object_versions", key, Bucket=bucket, Prefix=prefix)
                   if str(item["Key"]).startswith(prefix)]
    except CloudError as exc:
        if aws_code(exc) in ("NoSuchBucket", "404"):
            return 0
        raise
    for start in range(0, len(entries), _BATCH):
        aws.call("s3", "delete_objects", Bucket=bucket, Delete={"Objects": entries[start:start + _BATCH], "Quiet": True})
    return len(entries)


def read_statement(bucket: str, prefix: str, region: str, in_place: list[str],
                   versioned: Optional[list[str]] = None) -> dict[str, Any]:
    """The instance role's permission: read its prefix and the shared wheels (and the ``s3://`` models used
    where they are; the pinned version of those in *versioned*: GetObject with a versionId is
    s3:GetObjectVersion)."""
    part = partition(region)
    resources = [f"arn:{part}:s3:::{bucket}/{prefix}*", f"arn:{part}:s3:::{bucket}/{WHEELS}*"]
    resources += [f"arn:{part}:s3:::{uri.removeprefix('s3://')}" for uri in in_place]
    statements = [{"Sid": "ReadBootAssets", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": resources}]
    if versioned:
        statements.append({"Sid": "ReadPinnedModelVersions", "Effect": "Allow", "Action": ["s3:GetObjectVersion"],
                           "Resource": [f"arn:{part}:s3:::{uri.removeprefix('s3://')}" for uri in versioned]})
    return {"Version": "2012-10-17", "Statement": statements}


def merge_read_statements(new: dict[str, Any], old: dict[str, Any], *, keep: set[str]) -> dict[str, Any]:
    """*new* (a :func:`read_statement` document) plus the resources of *old*'s statements that are in *keep*,
    each under the statement of the same ``Sid`` (added where *new* has none)."""
    merged = {"Version": new.get("Version", "2012-10-17"),
              "Statement": [dict(st, Resource=list(_resources(st))) for st in new.get("Statement", [])]}
    by_sid = {st.get("Sid"): st for st in merged["Statement"]}
    for st in old.get("Statement", []) if isinstance(old, dict) else []:
        kept = [r for r in _resources(st) if r in keep]
        if not kept:
            continue
        target = by_sid.get(st.get("Sid"))
        if target is None:
            target = by_sid[st.get("Sid")] = dict(st, Resource=[])
            merged["Statement"].append(target)
        target["Resource"] += [r for r in kept if r not in target["Resource"]]
    return merged


def _resources(statement: dict[str, Any]) -> list[str]:
    resource = statement.get("Resource") or []
    return [resource] if isinstance(resource, str) else list(resource)


def delete_owned_prefix(aws: AwsSession, prefix: str) -> tuple[str, int]:
    """Every version under *prefix* in this account's asset bucket, if mmsctl made the bucket (tagged
    ``mmsctl:managed=true``): (the bucket, how many versions went); never the bucket, never another prefix."""
    bucket = bucket_name(aws.account_id(), aws.region)
    try:
        owned = tags.as_dict(aws.call("s3", "get_bucket_tagging", Bucket=bucket).get("TagSet")).get(tags.MANAGED)
    except CloudError as exc:
        if aws_code(exc) in ("NoSuchBucket", "NoSuchTagSet", "404"):
            return bucket, 0
        raise
    return bucket, delete_prefix(aws, bucket, prefix) if owned == "true" else 0
