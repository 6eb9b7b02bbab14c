"""The model's data: ``model.tar.gz`` in the account's asset bucket under ``sagemaker/NAME/SHA/``, uploaded only
when its sha256 is not there yet (a new model is a new key, so the configuration that still runs the old one
keeps it), or an ``s3://…`` object of yours, used where it is (checked: there, and in the endpoint's region,
where SageMaker requires it)."""

from __future__ import annotations

from typing import Optional

from mmsctl.cloud.aws import asset_bucket
from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.model_data import FILE_NAME, ModelData
from mmsctl.cloud.sagemaker.spec import model_prefix
from mmsctl.errors import CloudError, UsageError

__all__ = ["check_object", "ensure_model_data", "object_key"]

_NOT_THERE = ("404", "NoSuchKey", "NotFound")


def object_key(endpoint: str, data: ModelData) -> str:
    return f"{model_prefix(endpoint)}{data.sha256[:16]}/{FILE_NAME}"


def ensure_model_data(t: Target, data: ModelData) -> str:
    """``s3://ASSET_BUCKET/sagemaker/NAME/SHA/model.tar.gz`` holding *data*."""
    made: list[str] = []
    reused: list[str] = []
    bucket = asset_bucket.ensure_bucket(t.aws, made, reused)
    for item in made:
        t.note("create", "s3-bucket", item.removeprefix("s3 bucket "))
    key = object_key(t.name, data)
    head: Optional[dict] = None
    if not t.aws.dry_run:
        try:
            head = t.aws.call("s3", "head_object", Bucket=bucket, Key=key)
        except CloudError as exc:
            if aws_code(exc) not in _NOT_THERE:
                raise
    if head is not None and (head.get("Metadata") or {}).get("sha256") == data.sha256:
        t.note("reuse", "model-data", f"s3://{bucket}/{key}")
        return f"s3://{bucket}/{key}"
    tagging = f"mmsctl:sagemaker={t.name}"
    with open(data.path, "rb") as fh:  # a plan shows it as <model.tar.gz, N bytes> (cloud/aws/dryrun.py)
        t.aws.call("s3", "put_object", Bucket=bucket, Key=key, Body=fh, ContentType="application/gzip",
                   Metadata={"sha256": data.sha256}, Tagging=tagging, read_timeout=600.0)
    t.note("create", "model-data", f"s3://{bucket}/{key}")
    return f"s3://{bucket}/{key}"


def check_object(t: Target, uri: str) -> str:
    """Your ``s3://bucket/key`` model data: there, and in the endpoint's region.

    Raises:
        UsageError: not an S3 object URI, missing, or in another region.
    """
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not uri.startswith("s3://") or not bucket or not key or key.endswith("/"):
        raise UsageError(f"model {uri!r} is not an S3 object: s3://bucket/model.tar.gz", param="model")
    if t.aws.unlooked is not None:
        return uri
    location = t.aws.call("s3", "get_bucket_location", Bucket=bucket).get("LocationConstraint") or "us-east-1"
    if location == "EU":
        location = "eu-west-1"
    if location != t.aws.region:
        raise UsageError(f"s3://{bucket} is in {location}, the endpoint in {t.aws.region}: SageMaker reads model "
                         "data only from the endpoint's region", param="model")
    try:
        t.aws.call("s3", "head_object", Bucket=bucket, Key=key)
    except CloudError as exc:
        if aws_code(exc) in _NOT_THERE:
            raise UsageError(f"{uri}: no such object", param="model") from exc
        raise
    return uri
