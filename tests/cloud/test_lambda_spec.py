"""What `lambda deploy` refuses before any AWS call, and the names and policies it derives (pure code)."""

from __future__ import annotations

import pytest

from mmsctl.cloud.lambda_ import policy
from mmsctl.cloud.lambda_.spec import DeploySpec, check_bucket_name, model_bucket_name, parse_schedule
from mmsctl.errors import UsageError


def spec(**kw: object) -> DeploySpec:
    base: dict[str, object] = {"name": "kitten", "model": "squeezenet"}
    base.update(kw)
    return DeploySpec(**base).check()  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "seconds", "expression"), [
    ("1m", 60, "rate(1 minute)"), ("5m", 300, "rate(5 minutes)"), ("120s", 120, "rate(2 minutes)"),
    ("90 min", 5400, "rate(90 minutes)"), ("1h", 3600, "rate(1 hour)"), ("2d", 172800, "rate(2 days)"),
    ("60m", 3600, "rate(1 hour)"),
])
def test_schedules_become_eventbridge_rates(text: str, seconds: int, expression: str) -> None:
    assert parse_schedule(text) == (seconds, expression)


def test_a_sub_minute_schedule_is_refused_and_says_why() -> None:
    with pytest.raises(UsageError) as info:
        parse_schedule("15s")
    assert "EventBridge schedules run at most once a minute" in info.value.message
    assert "15 s keep-warm of the source article" in info.value.message
    assert info.value.params == ("warm",) and "provisioned" in (info.value.hint or "")  # the CLI: --warm, --provisioned
    with pytest.raises(UsageError, match="whole minutes"):
        parse_schedule("90s")
    with pytest.raises(UsageError, match="not a duration"):
        parse_schedule("often")


@pytest.mark.parametrize(("kw", "message"), [
    ({"memory": 127}, "memory 127: Lambda allows 128-10240 MB"),
    ({"memory": 10241}, "memory 10241: Lambda allows 128-10240 MB"),
    ({"timeout": 0}, "timeout 0: Lambda allows 1-900 seconds"),
    ({"timeout": 901}, "timeout 901: Lambda allows 1-900 seconds"),
    ({"warm": "15s"}, "at most once a minute"),
    ({"warm": "5m", "provisioned": 2}, "a warm-up schedule or provisioned concurrency, not both"),
    ({"provisioned": 0}, "provisioned concurrency 0"),
    ({"input_bucket": "same-b", "output_bucket": "same-b"}, "invocation loop"),
    ({"input_bucket": "same-b", "output_bucket": "same-b", "input_prefix": "in/", "output_prefix": "in/out/"},
     "invocation loop"),
    ({"input_bucket": "in-b"}, "an input bucket and an output bucket go together"),
    ({"input_bucket": "in-b", "output_bucket": "Out_B"}, "not a valid S3 bucket name"),
    ({"input_bucket": "in-b", "output_bucket": "out-b", "input_prefix": "/x/"}, "S3 keys do not start with '/'"),
    ({"input_bucket": "in-b", "output_bucket": "out-b", "suffixes": (".jpg", ".thumb.jpg")}, "overlap"),
    ({"input_bucket": "in-b", "output_bucket": "out-b", "suffixes": ("jpg",)}, "a suffix looks like .jpg"),
    ({"public": True}, "ask for a function URL too"),
    ({"name": "Kitten"}, "function name 'Kitten'"),
    ({"name": "a" * 41}, "use 1-40"),
    ({"image": "docker.io/library/python:3.11"}, "not an Amazon ECR image URI"),
    ({"model_source": "image"}, "model source image needs an image"),
    ({"model": "s3://b/m.mar", "model_bucket": "mine-b"}, "an s3:// model stays where it is"),
])
def test_refusals(kw: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as info:
        spec(**kw)
    assert message in info.value.message
    if "name" not in kw:  # a refusal of what was asked says which fields (the CLI names their flags)
        assert info.value.params and set(info.value.params) <= set(DeploySpec.__dataclass_fields__)


def test_same_bucket_with_disjoint_prefixes_is_allowed_and_warnings_are_collected() -> None:
    ok = spec(input_bucket="one-b", output_bucket="one-b", input_prefix="incoming/", output_prefix="predictions/",
              memory=256, timeout=3, url=True, public=True)
    assert len(ok.warnings) == 3  # little memory, a short timeout, a public URL
    assert any("public" in w for w in ok.warnings)


def test_bucket_names() -> None:
    for good in ("abc", "my.bucket-1", "a" * 63):
        assert check_bucket_name(good, "input_bucket") == good
    for bad in ("ab", "a" * 64, "-abc", "abc-", "a..b", "192.168.1.1", "ABC", "xn--abc", "a.-b"):
        with pytest.raises(UsageError):
            check_bucket_name(bad, "input_bucket")
    name = model_bucket_name("a" * 40, "123456789012", "ap-southeast-2")
    assert len(name) <= 63 and check_bucket_name(name, "x") == name
    assert name != model_bucket_name("a" * 40, "123456789012", "us-east-1")


def test_the_role_policy_names_exactly_what_the_function_touches() -> None:
    scope = policy.RoleScope("aws", "us-east-1", "123456789012", "kitten", model_bucket="mb", model_key="models/m.mar",
                             model_versioned=True, input_bucket="in-b", input_prefix="incoming/",
                             output_bucket="out-b", output_prefix="predictions/")
    assert policy.permissions_policy(scope) == {"Version": "2012-10-17", "Statement": [
        {"Sid": "OwnLogGroup", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/kitten:*"},
        {"Sid": "ReadModel", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
         "Resource": "arn:aws:s3:::mb/models/m.mar"},
        {"Sid": "ReadInput", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
         "Resource": "arn:aws:s3:::in-b/incoming/*"},
        {"Sid": "WriteOutput", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": "arn:aws:s3:::out-b/predictions/*"},
        {"Sid": "FindOutput", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": "arn:aws:s3:::out-b",
         "Condition": {"StringLike": {"s3:prefix": ["predictions/*"]}}},
    ]}
    http_only = policy.permissions_policy(policy.RoleScope("aws", "eu-west-1", "1", "web"))
    assert [s["Sid"] for s in http_only["Statement"]] == ["OwnLogGroup"]
    # failed events to a bucket: writing there and nowhere else (SQS and SNS are checked on moto)
    to_bucket = policy.permissions_policy(policy.RoleScope("aws", "eu-west-1", "1", "web",
                                                           failure_arn="arn:aws:s3:::failed-photos"))
    assert to_bucket["Statement"][-1] == {"Sid": "SendFailures", "Effect": "Allow",
                                          "Action": ["s3:PutObject", "s3:ListBucket"],
                                          "Resource": ["arn:aws:s3:::failed-photos", "arn:aws:s3:::failed-photos/*"]}


def test_commands_on_any_function_take_lambdas_own_names() -> None:
    from mmsctl.cloud.lambda_.spec import check_lambda_name

    assert check_lambda_name("My_Function-2") == "My_Function-2"
    for bad in ("", "a b", "x" * 65, "arn:aws:lambda:us-east-1:1:function:f"):
        with pytest.raises(UsageError):
            check_lambda_name(bad)
