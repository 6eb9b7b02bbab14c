"""The deployment's buckets (model, input, output): created private and tagged, or reused."""

from __future__ import annotations

from typing import Any

from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.cloud.lambda_.resources import bucket_tags, ours
from mmsctl.errors import CloudError

__all__ = ["ForeignBucket", "ensure_bucket"]


class ForeignBucket(CloudError):
    """A bucket deploy would create exists, and mmsctl did not make it for this function."""

    reference = "lambda-foreign-bucket"


def ensure_bucket(t: Target, bucket: str, component: str, *, versioned: bool = False,
                  must_be_ours: bool = False) -> bool:
    """Create *bucket* (tagged, private) if missing; True if it is ours."""
    found = bucket_tags(t.aws, bucket)
    if found is None:
        params: dict[str, Any] = {"Bucket": bucket}
        if t.aws.region != "us-east-1":
            params["CreateBucketConfiguration"] = {"LocationConstraint": t.aws.region}
        t.aws.call("s3", "create_bucket", **params)
        t.aws.call("s3", "put_public_access_block", Bucket=bucket, PublicAccessBlockConfiguration={
            "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True})
        if versioned:
            t.aws.call("s3", "put_bucket_versioning", Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        t.aws.call("s3", "put_bucket_tagging", Bucket=bucket, Tagging={
            "TagSet": [{"Key": k, "Value": v} for k, v in t.tags(component).items()]})
        t.note("create", component, bucket)
        return True
    if ours(found, t.name):
        t.note("reuse", component, bucket)
        return True
    if must_be_ours:
        raise ForeignBucket(f"bucket {bucket} exists and was not made by mmsctl for {t.name}",
                            hint="name it as the model bucket to use it on purpose")
    t.note("reuse", component, f"{bucket} (yours: kept on destroy)")
    return False
