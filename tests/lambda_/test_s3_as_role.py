"""The S3 pipeline with the function's own role: the real handler and the real SqueezeNet, behind a stand-in
that answers as S3 does for the policy `lambda deploy` gives the role (tests/support/s3_policy_standin.py).

moto answers every call, and a missing key with 404 to anyone; S3 refuses what the role's policy
does not allow, and answers a HEAD or GET of a missing key with 403 to a caller that may not list
the whole bucket: which every new object's answer is, until the handler writes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Optional

import boto3
import pytest

from mmsctl.cloud.lambda_.policy import RoleScope, permissions_policy
from mmsctl.errors import CloudError
from mmsctl.lambda_.runtime import Runtime
from mmsctl.lambda_.served_model import ServedModel
from mmsctl.lambda_.settings import HandlerSettings
from tests.lambda_.conftest import put_event as _event
from tests.support.moto import Moto
from tests.support.s3_policy_standin import ACCOUNT, S3AsRole, allowed, serving_s3_as_role

KEY = "incoming/cats/my kitten (1)+é.jpg"
OUT_KEY = "predictions/cats/my kitten (1)+é.jpg.json"
SCOPE = RoleScope("aws", "us-east-1", ACCOUNT, "kitten", model_bucket="models", model_key="models/sq.mar",
                  input_bucket="in-bucket", input_prefix="incoming/", output_bucket="out-bucket",
                  output_prefix="predictions/")


@pytest.fixture
def s3(moto: Moto) -> Any:
    admin = boto3.client("s3")  # the account owner, straight to moto: sets the scene, reads the results
    for name in ("in-bucket", "out-bucket"):
        admin.create_bucket(Bucket=name)
    admin.put_bucket_versioning(Bucket="in-bucket", VersioningConfiguration={"Status": "Enabled"})
    return admin


@pytest.fixture
def as_role(moto: Moto) -> Iterator[S3AsRole]:
    with serving_s3_as_role(moto.url, permissions_policy(SCOPE)) as standin:
        yield standin


def _runtime(served: ServedModel, standin: S3AsRole, owner: Optional[str] = ACCOUNT) -> Runtime:
    settings = HandlerSettings(model="(loaded)", input_bucket="in-bucket", input_prefix="incoming/",
                               output_bucket="out-bucket", output_prefix="predictions/", bucket_owner=owner)
    return Runtime(settings, served, lambda: boto3.client("s3", endpoint_url=standin.url))


def test_the_stand_in_answers_a_missing_key_as_s3_does_for_this_role(s3: Any, as_role: S3AsRole) -> None:
    """The rule the handler lives with: the role may list under its prefix, but a HEAD of a missing key is 403."""
    policy = permissions_policy(SCOPE)
    output = "arn:aws:s3:::out-bucket"
    assert allowed(policy, "s3:ListBucket", output, {"s3:prefix": OUT_KEY})
    assert not allowed(policy, "s3:ListBucket", output, {})  # a HEAD or GET carries no s3:prefix
    assert not allowed(policy, "s3:ListBucket", output, {"s3:prefix": "elsewhere/"})
    role = boto3.client("s3", endpoint_url=as_role.url)
    with pytest.raises(Exception) as missing:
        role.head_object(Bucket="out-bucket", Key=OUT_KEY)
    assert missing.value.response["Error"]["Code"] == "403"  # type: ignore[attr-defined]
    open_role = {"Version": "2012-10-17", "Statement": [*policy["Statement"], {
        "Effect": "Allow", "Action": "s3:ListBucket", "Resource": output}]}
    as_role.policy = open_role  # the role with an unconditioned ListBucket: then S3 says 404
    with pytest.raises(Exception) as missing:
        role.head_object(Bucket="out-bucket", Key=OUT_KEY)
    assert missing.value.response["Error"]["Code"] == "404"  # type: ignore[attr-defined]


def test_a_new_object_is_answered_and_a_retry_skips_it(served: ServedModel, s3: Any, as_role: S3AsRole,
                                                      kitten_jpg: Path) -> None:
    event = _event(s3, KEY, kitten_jpg.read_bytes())
    rt = _runtime(served, as_role)
    answer = rt.handle(event)
    assert answer == {"processed": [{"input": f"s3://in-bucket/{KEY}", "output": f"s3://out-bucket/{OUT_KEY}",
                                     "status": 200}]}
    doc = json.loads(s3.get_object(Bucket="out-bucket", Key=OUT_KEY)["Body"].read())
    assert doc["status"] == 200 and doc["result"][0]["class"] == "n02124075 Egyptian cat"
    assert as_role.actions() == [("s3:ListBucket", 200), ("s3:GetObjectVersion", 200), ("s3:PutObject", 200)]
    assert as_role.seen[0].context == {"s3:prefix": OUT_KEY, "s3:max-keys": "1"}
    assert {d.owner for d in as_role.seen} == {ACCOUNT}  # every call names the buckets' account

    as_role.seen.clear()  # Lambda's retry of the same event: found by the listing, read, skipped
    retried = rt.handle(event)["processed"][0]
    assert retried["skipped"] is True and retried["status"] == 200
    assert as_role.actions() == [("s3:ListBucket", 200), ("s3:GetObject", 200)]

    as_role.seen.clear()  # a new version of the input is a new answer
    again = rt.handle(_event(s3, KEY, kitten_jpg.read_bytes()))["processed"][0]
    assert again["status"] == 200 and "skipped" not in again
    assert [a for a, _ in as_role.actions()] == ["s3:ListBucket", "s3:GetObject", "s3:GetObjectVersion",
                                                 "s3:PutObject"]


def test_an_input_gone_before_the_function_ran_gets_an_error_object(served: ServedModel, s3: Any,
                                                                    as_role: S3AsRole) -> None:
    """Reading a deleted input is a 403 for this role (it may not list the input bucket): answered, not retried."""
    event = _event(s3, "incoming/gone.jpg", b"x")
    s3.delete_object(Bucket="in-bucket", Key="incoming/gone.jpg",
                     VersionId=event["Records"][0]["s3"]["object"]["versionId"])
    answer = _runtime(served, as_role).handle(event)
    assert answer["processed"][0]["status"] == 403
    error = json.loads(s3.get_object(Bucket="out-bucket", Key="predictions/gone.jpg.error.json")["Body"].read())
    assert error["error"]["type"] == "AccessDenied" and "gone since the event" in error["error"]["message"]


@pytest.mark.parametrize("dropped, refused", [("FindOutput", "s3:ListBucket"), ("WriteOutput", "s3:PutObject"),
                                              ("ReadInput", "s3:GetObjectVersion")])
def test_a_role_without_a_needed_statement_fails_as_aws_would(served: ServedModel, s3: Any, as_role: S3AsRole,
                                                              kitten_jpg: Path, dropped: str, refused: str) -> None:
    """Without a statement the handler needs, S3 refuses; the record fails loudly, never silently passes."""
    policy = permissions_policy(SCOPE)
    as_role.policy = {**policy, "Statement": [s for s in policy["Statement"] if s.get("Sid") != dropped]}
    event = _event(s3, KEY, kitten_jpg.read_bytes())
    rt = _runtime(served, as_role)
    if dropped == "ReadInput":  # the object cannot be read: an error object says so, Lambda does not retry
        assert rt.handle(event)["processed"][0]["status"] == 403
    else:  # the output cannot be found or written: raised, so Lambda retries and then sends the event on
        with pytest.raises(CloudError, match=r"1 of 1 object\(s\) failed and may succeed on retry: .*access denied"):
            rt.handle(event)
    assert (refused, 403) in as_role.actions()
    written = [o["Key"] for o in s3.list_objects_v2(Bucket="out-bucket").get("Contents", [])]
    assert written == (["predictions/cats/my kitten (1)+é.jpg.error.json"] if dropped == "ReadInput" else [])


def test_an_output_bucket_now_of_another_account_is_never_written(served: ServedModel, s3: Any, as_role: S3AsRole,
                                                                 kitten_jpg: Path) -> None:
    """Bucket names are global and the role's policy names no account: if the output bucket's name were taken by
    an account that lets anyone write, only the expected owner the handler names stops the answer going there."""
    event = _event(s3, KEY, kitten_jpg.read_bytes())
    as_role.owners["out-bucket"] = "210987654321"
    with pytest.raises(CloudError, match=r"1 of 1 object\(s\) failed and may succeed on retry: .*access denied"):
        _runtime(served, as_role).handle(event)
    assert ("s3:ListBucket", 403) in as_role.actions()
    assert s3.list_objects_v2(Bucket="out-bucket").get("KeyCount") == 0

    written = _runtime(served, as_role, owner=None).handle(event)  # without it, S3 would take the answer
    assert written["processed"][0]["status"] == 200 and s3.list_objects_v2(Bucket="out-bucket")["KeyCount"] == 1


@pytest.mark.parametrize("versioned", [True, False])
def test_the_role_may_download_the_model_it_is_deployed_with(moto: Moto, tmp_path: Path, versioned: bool) -> None:
    """The cold start's download (that version, when deploy pinned one) under the role deploy writes for it."""
    from mmsctl.lambda_.served_model import download_model

    admin = boto3.client("s3")
    admin.create_bucket(Bucket="models")
    admin.put_bucket_versioning(Bucket="models", VersioningConfiguration={"Status": "Enabled"})
    version = admin.put_object(Bucket="models", Key="models/sq.mar", Body=b"an archive")["VersionId"]
    scope = RoleScope("aws", "us-east-1", ACCOUNT, "kitten", model_bucket="models", model_key="models/sq.mar",
                      model_versioned=versioned)
    with serving_s3_as_role(moto.url, permissions_policy(scope)) as standin:
        role = boto3.client("s3", endpoint_url=standin.url)
        got = download_model(role, "s3://models/models/sq.mar", version if versioned else None, tmp_path)
        assert got.read_bytes() == b"an archive"
        assert standin.actions() == [("s3:GetObjectVersion" if versioned else "s3:GetObject", 200)]
        with pytest.raises(CloudError, match="cannot download the model"):  # nothing else in that bucket
            download_model(role, "s3://models/models/other.mar", None, tmp_path)
