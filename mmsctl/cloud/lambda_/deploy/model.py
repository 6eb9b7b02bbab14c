"""The model the function loads: the archive found before any AWS call, then uploaded to the
versioned model bucket (skipped when the same bytes are there), or an ``s3://`` URI, or none (baked)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.lambda_ import env
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.buckets import ensure_bucket
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.errors import CloudError, UsageError

__all__ = ["ensure_model", "resolve_model_file"]


def resolve_model_file(model: str) -> Path:
    """The archive file deploy uploads for MODEL (zoo name, path, URL), found before any AWS call.

    Raises:
        UsageError: MODEL is a folder (deploy uploads one archive file).
        ModelNotFoundError, OfflineError, DownloadError: from the zoo.
    """
    from mmsctl.zoo import resolve_model

    path = Path(resolve_model(model, progress=False).path)
    if path.is_dir():
        raise UsageError(f"{model} is a folder; deploy uploads one archive file",
                         hint=f"make one with `mmsctl archive create {model}`, or bake it: `mmsctl lambda build`")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_model(t: Target, model_file: Optional[Path]) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """(s3 URI, version id, our bucket) of the model the function loads; (None, None, None) for a baked one."""
    spec = t.spec
    if spec.model_source == "image":
        return None, None, None
    if spec.model.startswith("s3://"):
        where = env.parse_s3_uri(spec.model)
        return f"s3://{where.bucket}/{where.key}", where.version_id, None
    assert model_file is not None
    default = names.model_bucket_name(t.name, t.account, t.aws.region)
    bucket = spec.model_bucket or default
    mine = ensure_bucket(t, bucket, "model-bucket", versioned=True, must_be_ours=spec.model_bucket is None)
    key = f"models/{model_file.name}"
    digest = _sha256(model_file)
    try:
        head = t.aws.call("s3", "head_object", Bucket=bucket, Key=key)
    except CloudError as exc:
        if aws_code(exc) not in ("404", "NoSuchKey", "NotFound", "NoSuchBucket"):
            raise
        head = None
    if head is not None and (head.get("Metadata") or {}).get("mmsctl-sha256") == digest:
        version = head.get("VersionId")
        t.note("reuse", "model-object", f"s3://{bucket}/{key}")
    else:
        with open(model_file, "rb") as fh:
            put = t.aws.call("s3", "put_object", Bucket=bucket, Key=key, Body=fh,
                             ContentType="application/octet-stream", Metadata={"mmsctl-sha256": digest})
        version = put.get("VersionId") or (None if not t.aws.dry_run else "<new version>")
        t.note("create", "model-object", f"s3://{bucket}/{key}")
    if version in ("null", ""):
        version = None
    return f"s3://{bucket}/{key}", version, bucket if mine else None
