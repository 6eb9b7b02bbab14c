"""`s3://` models read in place: each bucket's region and URL form, and the pin, resolved when the fleet or
launch is made. moto for buckets in other regions and versioned ones; botocore's Stubber for what moto does not
answer as S3 does (HeadBucket's 301/400/403 carrying ``x-amz-bucket-region``, GetBucketLocation's legacy
values, a bucket in another partition)."""

from __future__ import annotations

import hashlib
from typing import Any

import boto3
import pytest

from mmsctl.cloud.instance.model_pins import bucket_region, pin_models, url_style
from mmsctl.errors import UsageError
from tests.cloud.conftest import Moto


@pytest.mark.parametrize(("bucket", "style"), [
    ("models", "virtual"), ("my-models-2024", "virtual"),
    ("my.models", "path"),  # the *.s3.REGION certificate covers one label
    ("Legacy_Bucket", "path"),  # not a host name (buckets made before 2018 in us-east-1 may be named so)
])
def test_url_style(bucket: str, style: str) -> None:
    assert url_style(bucket) == style


def test_models_in_other_regions_and_with_dots_are_pinned_on_moto(moto: Moto) -> None:
    from mmsctl.cloud.aws.session import open_session

    west = boto3.client("s3", region_name="eu-west-1")
    west.create_bucket(Bucket="team.models", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    west.put_bucket_versioning(Bucket="team.models", VersioningConfiguration={"Status": "Enabled"})
    version = west.put_object(Bucket="team.models", Key="r.mar", Body=b"resnet")["VersionId"]
    here = boto3.client("s3")
    here.create_bucket(Bucket="plain")
    here.put_object(Bucket="plain", Key="a/s.mar", Body=b"squeeze")
    entries: list[dict[str, Any]] = [{"uri": "s3://team.models/r.mar", "dest": "models/r.mar"},
                                     {"uri": "s3://plain/a/s.mar", "dest": "models/s.mar"}]
    pin_models(open_session(), entries)
    assert entries == [
        {"uri": "s3://team.models/r.mar", "dest": "models/r.mar", "region": "eu-west-1", "style": "path",
         "size": 6, "version": version},
        {"uri": "s3://plain/a/s.mar", "dest": "models/s.mar", "region": "us-east-1", "style": "virtual", "size": 7,
         "sha256": hashlib.sha256(b"squeeze").hexdigest()},  # no versions: read once and hashed
    ]
    plan_only = [{"uri": "s3://plain/a/s.mar", "dest": "models/s.mar"}]
    pin_models(open_session(dry_run=True), plan_only, read=False)  # a plan reads no object
    assert "sha256" not in plan_only[0] and plan_only[0]["region"] == "us-east-1"


def _stubbed(moto: Moto) -> tuple[Any, Any]:
    from botocore.stub import Stubber

    from mmsctl.cloud.aws.session import open_session

    aws = open_session(region="us-east-1")
    return aws, Stubber(aws.client("s3"))


@pytest.mark.parametrize(("status", "code", "message"), [
    (301, "301", "Moved Permanently"),  # a HEAD to the wrong regional endpoint
    (400, "400", "Bad Request"),  # signed for the wrong region
    (403, "403", "Forbidden"),  # no s3:ListBucket: the header comes all the same
])
def test_the_region_comes_from_headbucket_whatever_it_answers(moto: Moto, status: int, code: str,
                                                               message: str) -> None:
    """HeadBucket has no body: botocore's error code is the status. S3 sends x-amz-bucket-region with each."""
    aws, stub = _stubbed(moto)
    with stub:
        stub.add_client_error("head_bucket", service_error_code=code, service_message=message,
                              http_status_code=status, expected_params={"Bucket": "far"},
                              response_meta={"HTTPHeaders": {"x-amz-bucket-region": "ap-southeast-2"}})
        assert bucket_region(aws, "far") == "ap-southeast-2"
        stub.assert_no_pending_responses()


@pytest.mark.parametrize(("location", "region"), [(None, "us-east-1"), ("EU", "eu-west-1"),
                                                  ("sa-east-1", "sa-east-1")])
def test_without_the_header_getbucketlocation_answers(moto: Moto, location: str | None, region: str) -> None:
    aws, stub = _stubbed(moto)
    with stub:
        stub.add_response("head_bucket", {}, {"Bucket": "old"})
        stub.add_response("get_bucket_location", {"LocationConstraint": location} if location else {},
                          {"Bucket": "old"})
        assert bucket_region(aws, "old") == region


def test_no_such_bucket_and_another_partition_are_refused(moto: Moto) -> None:
    aws, stub = _stubbed(moto)
    with stub:
        stub.add_client_error("head_bucket", service_error_code="404", service_message="Not Found",
                              http_status_code=404)
        with pytest.raises(UsageError, match="s3://gone/…: no such bucket"):
            bucket_region(aws, "gone")
        stub.add_client_error("head_bucket", service_error_code="301", service_message="Moved Permanently",
                              http_status_code=301, response_meta={"HTTPHeaders": {"x-amz-bucket-region": "cn-north-1"}})
        with pytest.raises(UsageError, match="cn-north-1, another AWS partition than us-east-1"):
            pin_models(aws, [{"uri": "s3://china/m.mar", "dest": "models/m.mar"}])


def test_a_pinned_version_is_what_the_role_may_read() -> None:
    from mmsctl.cloud.aws.asset_bucket import read_statement

    doc = read_statement("assets", "fleet/p/", "us-east-1", ["s3://a/x.mar", "s3://b/y.mar"], ["s3://b/y.mar"])
    read, versions = doc["Statement"]
    assert read["Action"] == ["s3:GetObject"] and read["Resource"][-2:] == ["arn:aws:s3:::a/x.mar",
                                                                           "arn:aws:s3:::b/y.mar"]
    assert (versions["Action"], versions["Resource"]) == (["s3:GetObjectVersion"], ["arn:aws:s3:::b/y.mar"])
