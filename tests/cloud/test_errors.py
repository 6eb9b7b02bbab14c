"""botocore failures become one clear CloudError line (exit 9)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError

from mmsctl.cloud.aws.errors import (
    AccessDenied,
    NoCredentials,
    NoRegion,
    QuotaExceeded,
    ResourceNotFound,
    UnknownRegion,
    UnsupportedRegion,
)
from mmsctl.cloud.aws.session import translate_error
from mmsctl.cloud.instance.accelerators import EI_REGIONS, check_ei_region, choose, parse_eia
from mmsctl.errors import CloudError, UsageError


def _client_error(code: str, message: str = "nope") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "RunInstances")


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (NoCredentialsError(), NoCredentials, "no AWS credentials found (run `aws configure` or set AWS_PROFILE)"),
        (NoRegionError(), NoRegion, "no AWS region configured"),
        (_client_error("UnauthorizedOperation", "You are not authorized"), AccessDenied,
         "access denied: ec2 RunInstances: You are not authorized"),
        (_client_error("AccessDenied"), AccessDenied, "access denied"),
        (_client_error("InstanceLimitExceeded", "limit 20"), QuotaExceeded, "quota exceeded: ec2 RunInstances"),
        (_client_error("VcpuLimitExceeded"), QuotaExceeded, "quota exceeded"),
        (_client_error("InvalidInstanceID.NotFound"), ResourceNotFound, "ec2 RunInstances: nope"),
        (_client_error("InvalidParameterValue", "bad"), CloudError, "ec2 RunInstances failed: InvalidParameterValue: bad"),
    ],
)
def test_translate(exc: Exception, kind: type, text: str) -> None:
    err = translate_error(exc, service="ec2", operation="run_instances")
    assert type(err) is kind
    assert err is not None and text in err.message and "\n" not in err.message
    assert err.exit_code == 9


def test_not_botocore_is_left_alone() -> None:
    assert translate_error(ValueError("x")) is None


def test_accelerator_choices() -> None:
    assert parse_eia("medium") == "eia1.medium" and parse_eia("eia2.xlarge") == "eia2.xlarge"
    assert choose(None, "large").ei_type == "eia1.large"
    assert choose("inf2", None).instance_type == "inf2.xlarge" and not choose("inf2", None).is_ei
    assert choose(None, None).name == "none"
    with pytest.raises(UsageError):
        choose("g5", "medium")
    with pytest.raises(UsageError):
        choose("tpu", None)
    for region in EI_REGIONS:
        check_ei_region(region)
    with pytest.raises(UnsupportedRegion):
        check_ei_region("eu-central-1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ec2", "terminate"], "error: name the instances to terminate (INSTANCE_ID…), or pass --all"),
        (["ec2", "terminate", "i-0123456789abcdef0", "--all"], "error: pass INSTANCE_IDs or --all, not both"),
        (["ec2", "launch", "--server", "torchserve", "--dry-run"],
         "error: unknown server 'torchserve'; choose one of: mmsctl, mms (--server)"),
        (["ec2", "launch", "--eia", "medium", "--accelerator", "g5", "--dry-run"],
         "error: Elastic Inference cannot be combined with accelerator g5 (--eia, --accelerator)"),
        (["ec2", "user-data", "-m", "squeezenet", "--server", "mms"],
         "error: model squeezenet=squeezenet: MMS needs an archive URL, not a zoo name (--models, --server)"),
    ],
)
def test_usage_errors_come_before_aws(capsys, monkeypatch, args: list[str], message: str) -> None:
    """A wrong command line is exit 2 with its own message, not a region/credentials error (exit 9)."""
    from tests.support.cli import run_mmsctl

    for key, value in {"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                       "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    r = run_mmsctl(capsys, *args)
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr.splitlines()[0] == message


@pytest.mark.parametrize(
    ("args", "code", "hint"),
    [
        (["ec2", "list"], 9, "hint: pass --region or set AWS_DEFAULT_REGION"),
        (["ec2", "user-data", "-m", "squeezenet", "--server", "mms"], 2,
         "hint: use --server mmsctl, which resolves zoo names itself"),
        (["ec2", "cost", "--instance-type", "zz.large", "--throughput", "3"], 2,
         "hint: pass --price DOLLARS_PER_HOUR, or --live to ask the AWS Pricing API"),
    ],
)
def test_the_cli_names_the_flags_the_core_does_not(capsys, monkeypatch, args: list[str], code: int,
                                                   hint: str) -> None:
    """The core says what is wrong in its own words; the CLI's hint names the flag that fixes it."""
    from tests.support.cli import run_mmsctl

    for key, value in {"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                       "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    r = run_mmsctl(capsys, *args)
    assert r.code == code
    assert r.stderr.splitlines()[1:] == [hint]


def test_no_region_is_still_an_unknown_region() -> None:
    """Callers that catch UnknownRegion (no region, or a wrong one) keep catching both."""
    assert issubclass(NoRegion, UnknownRegion) and NoRegion.reference != UnknownRegion.reference


def test_sessions_share_one_loader_of_parsed_service_models(monkeypatch) -> None:
    """A process that opens several sessions (one per region, one per command run in-process) parses EC2's
    service model once: the second session's client is made from the first one's cached model."""
    from mmsctl.cloud.aws.session import open_session

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    first, second = open_session(region="us-east-1"), open_session(region="eu-west-1")
    loader = first._boto._session.get_component("data_loader")
    assert second._boto._session.get_component("data_loader") is loader
    assert len(loader.search_paths) == len(set(loader.search_paths))  # each session's data folder kept once
    first.client("ec2")
    assert ("load_data_with_path", "ec2/2016-11-15/service-2") in loader._cache
    second.client("ec2")
    assert second.client("ec2").meta.region_name == "eu-west-1"
