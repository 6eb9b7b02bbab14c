"""scripts/aws_e2e.py (`make aws-e2e`) against moto, so the real-account proof cannot rot.

The very script a maintainer runs on AWS runs here, its `mmsctl` commands in this process (tests/support/cli.py
`run_here`) against the session's moto. What needs AWS's real lifecycle is adapted by the script itself and
says so (its docstring lists how): the S3 event is delivered with `lambda run-local --s3-put`, the function URL
is a stand-in that checks SigV4 as AWS does and runs the real handler, nothing waits for an instance to boot.
"""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path
from typing import Any, Iterator, Sequence

import boto3
import pytest

from tests.cloud.conftest import REPO, Moto
from tests.cloud.lambda_support import pushed_image
from tests.lambda_.conftest import squeezenet_archive  # noqa: F401 - the fixture
from tests.support.cli import run_here
from tests.support.moto import AMAZON_IMAGE
from tests.support.scripts import load_script
from tests.support.sigv4_standin import StandIn, serving_function_url

aws_e2e = load_script("aws_e2e")

RUN = "abc123"
FUNCTION = f"mmsctl-e2e-{RUN}"


def in_process(args: Sequence[str]) -> Any:
    return run_here(*args, cwd=REPO)


@pytest.fixture
def function_url(squeezenet_archive: Path, tmp_path: Path) -> Iterator[StandIn]:  # noqa: F811
    """The function URL: checks the signature as AWS does, then runs the handler on the real SqueezeNet."""
    from mmsctl.lambda_.runtime import Runtime
    from mmsctl.lambda_.served_model import load_model
    from mmsctl.lambda_.settings import HandlerSettings

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MMSCTL_CACHE_DIR", str(tmp_path / "cache"))
        served = load_model(HandlerSettings(model=str(squeezenet_archive)))
    try:
        with serving_function_url(Runtime(HandlerSettings(model="(loaded)"), served,
                                          lambda: boto3.client("s3")).handle) as url:
            yield url
    finally:
        served.close()


@pytest.fixture
def e2e(moto: Moto, instance_assets: Path, monkeypatch: pytest.MonkeyPatch, kitten_jpg: Path,
        squeezenet_archive: Path) -> list[str]:  # noqa: F811
    monkeypatch.setenv("MMSCTL_E2E", "1")
    pushed_image(FUNCTION)  # what `lambda build --push --name mmsctl-e2e-abc123` leaves in ECR (no docker here)
    return ["--yes", "--run-id", RUN, "--model", str(squeezenet_archive), "--image", str(kitten_jpg),
            "--ami", AMAZON_IMAGE]  # moto has no Deep Learning AMI parameter


def _left() -> dict[str, list[str]]:
    """What moto still holds of mmsctl's (the ECR repository the test pushed to included)."""
    ec2, elb, asg = boto3.client("ec2"), boto3.client("elbv2"), boto3.client("autoscaling")
    live = [i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
            if i["State"]["Name"] not in ("terminated", "shutting-down")]
    return {
        "instances": live,
        "groups": [g["AutoScalingGroupName"] for g in asg.describe_auto_scaling_groups()["AutoScalingGroups"]],
        "balancers": [lb["LoadBalancerName"] for lb in elb.describe_load_balancers()["LoadBalancers"]],
        "security-groups": [g["GroupName"] for g in ec2.describe_security_groups()["SecurityGroups"]
                            if g["GroupName"] != "default"],
        "functions": [f["FunctionName"] for f in boto3.client("lambda").list_functions()["Functions"]],
        "buckets": [b["Name"] for b in boto3.client("s3").list_buckets()["Buckets"]],
        "roles": [r["RoleName"] for r in boto3.client("iam").list_roles()["Roles"] if r["Path"].startswith("/mmsctl")],
        "repositories": [r["repositoryName"] for r in boto3.client("ecr").describe_repositories()["repositories"]],
        "endpoints": [e["EndpointName"] for e in boto3.client("sagemaker").list_endpoints()["Endpoints"]]
        + [m["ModelName"] for m in boto3.client("sagemaker").list_models()["Models"]],
    }


NOTHING: dict[str, list[str]] = {k: [] for k in ("instances", "groups", "balancers", "security-groups", "functions",
                                                 "buckets", "roles", "repositories", "endpoints")}


@pytest.mark.slow
def test_the_whole_run_on_moto_proves_each_part_and_leaves_nothing(e2e: list[str], function_url: StandIn,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSCTL_LAMBDA_FUNCTION_URL", function_url.url)
    out = io.StringIO()
    status = aws_e2e.main(e2e, runner=in_process, teardown_runner=in_process, out=out)
    said = out.getvalue()
    assert status == 0, said
    # the plan and its estimate came first, then every step, each adapted step saying how
    minutes, dollars, _ = aws_e2e.estimate("t3.medium")
    assert said.index(f"Estimate (not a measurement): about {minutes:.0f} minutes and ${dollars:.2f}") < said.index(
        "==> lambda deploy")
    for step in ("lambda deploy mmsctl-e2e-abc123", "one image through the S3 pipeline",
                 "sagemaker: endpoint mmsctl-e2e-abc123", "ec2 launch", "fleet create e2e-abc123 --warm-pool 1 --wait",
                 "fleet rollout e2e-abc123 (blue/green, to a model set without the first model)", "fleet scale",
                 "fleet rollout e2e-abc123 --strategy rolling"):
        assert f"==> {step}" in said
    assert "adapted: S3 fires no trigger on the stand-in; `lambda run-local --s3-put`" in said
    # through S3 twice (the second under a key S3 URL-encodes), and through the signed function URL
    assert said.count("top-1: n02124075 Egyptian cat") == 3
    assert f"predictions/{aws_e2e.NON_ASCII_NAME}.json" in said
    assert "sagemaker e2e: deploy again changes nothing: ok" in said and "sagemaker e2e: destroy: ok" in said
    assert "adapted: moto's sagemaker-runtime answers canned results" in said
    assert "skipped: the stand-in has no instance refresh" in said
    assert [s.refused for s in function_url.seen] == [None]  # the URL call was signed, and AWS's check passed
    assert "adapted: instances do not boot on the stand-in" in said
    assert "skipped: the stand-in's load balancer" in said
    assert "nothing tagged for the run is left" in said and "run abc123: everything it made is gone" in said
    assert _left() == NOTHING


def test_a_failed_step_still_removes_everything(e2e: list[str]) -> None:
    """The fleet's rollout fails (after the Lambda part, the instance and the fleet were made): all of it goes."""
    def failing(args: Sequence[str]) -> Any:
        if list(args[:2]) == ["fleet", "rollout"]:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the run
        return in_process(args)

    out = io.StringIO()
    status = aws_e2e.main(e2e, runner=failing, teardown_runner=in_process, out=out)
    said = out.getvalue()
    assert status == 130, said
    assert "interrupted: removing what the run made" in said
    assert "skipped: the stand-in serves no function URL" in said  # no MMSCTL_LAMBDA_FUNCTION_URL here
    assert "==> teardown: fleet destroy e2e-abc123" in said and "everything it made is gone" in said
    assert _left() == NOTHING


def test_sigterm_is_a_ctrl_c_and_a_second_ctrl_c_stops_the_teardown(e2e: list[str]) -> None:
    def terminated(args: Sequence[str]) -> Any:
        if list(args[:2]) == ["lambda", "deploy"]:
            done = in_process(args)
            os.kill(os.getpid(), signal.SIGTERM)  # `kill`, or the CI runner stopping the job
            return done
        return in_process(args)

    out = io.StringIO()
    assert aws_e2e.main(e2e, runner=terminated, teardown_runner=in_process, out=out) == 130
    assert "interrupted: removing what the run made" in out.getvalue() and _left() == NOTHING

    def impatient(args: Sequence[str]) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C at each teardown command: the second stops it
        return in_process(args)

    out = io.StringIO()
    assert aws_e2e.main(e2e, runner=terminated, teardown_runner=impatient, out=out) == 130
    said = out.getvalue()
    assert "the teardown goes on (Ctrl-C again stops it" in said
    assert "left behind by run abc123 (`MMSCTL_E2E=1 scripts/aws_e2e.py --teardown abc123` tries again)" in said
    # the first Ctrl-C let `lambda destroy` finish; the second stopped the teardown at its next command
    assert _left()["functions"] == [] and "==> teardown: fleet destroy" not in said
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_teardown_alone_finds_a_run_by_its_names_and_tags(e2e: list[str]) -> None:
    made = run_here("fleet", "create", "e2e-abc123", "-m", "squeezenet", "--min", "1", "--max", "1", "--ami",
                    AMAZON_IMAGE, cwd=REPO)
    assert made.returncode == 0, made.stderr
    out = io.StringIO()
    assert aws_e2e.main(["--teardown", RUN, "--yes"], runner=in_process, teardown_runner=in_process, out=out) == 0
    assert "Estimate" not in out.getvalue() and _left()["groups"] == [] and _left()["balancers"] == []


@pytest.mark.parametrize(("env", "message", "code"), [
    ({}, "error: set MMSCTL_E2E=1 to run the end-to-end proof: it makes (and pays for) real AWS resources", 2),
    ({"MMSCTL_E2E": "1", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
      "AWS_DEFAULT_REGION": "us-east-1"}, "error: no AWS credentials found", 9),
])
def test_nothing_happens_without_the_switch_or_credentials(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                                           message: str, code: int) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out = io.StringIO()

    def never(args: Sequence[str]) -> Any:
        raise AssertionError(f"ran mmsctl {args}")

    assert aws_e2e.main(["--yes"], runner=never, teardown_runner=never, out=out) == code
    assert out.getvalue().splitlines()[0].startswith(message)


def test_without_a_terminal_or_yes_it_asks_nothing_and_makes_nothing(moto: Moto, monkeypatch: pytest.MonkeyPatch,
                                                                   kitten_jpg: Path) -> None:
    monkeypatch.setenv("MMSCTL_E2E", "1")
    out = io.StringIO()
    with pytest.raises(SystemExit) as stopped:
        aws_e2e.main(["--image", str(kitten_jpg)], runner=in_process, stdin=io.StringIO("y\n"), out=out)
    assert stopped.value.code == 2 and "error: refusing to make paid resources without a terminal" in out.getvalue()
    assert _left() == NOTHING


def test_the_estimate_is_the_phases_at_the_bundled_prices() -> None:
    minutes, dollars, notes = aws_e2e.estimate("t3.medium")
    hours = {p.what: p.minutes / 60 for p in aws_e2e.PHASES}
    volume = aws_e2e.ROOT_VOLUME_GIB * aws_e2e.GP3_PER_GIB_MONTH / 730
    expected = sum(hours[p.what] * (p.instances * (0.0416 + volume) + (0.0225 if p.balancer else 0))
                   for p in aws_e2e.PHASES)
    assert minutes == sum(p.minutes for p in aws_e2e.PHASES)
    assert expected < dollars < expected + 0.01  # Lambda's few calls: fractions of a cent
    # docs/aws.md quotes the same figures
    page = (REPO / "docs" / "aws.md").read_text()
    assert f"about **{minutes:.0f} minutes**" in page and f"about **${dollars:.2f}** with t3.medium" in page
    assert f"${aws_e2e.estimate('c5.xlarge')[1]:.2f} with `--instance-type c5.xlarge`" in page
    assert f"${aws_e2e.estimate('g5.xlarge')[1]:.2f} with g5.xlarge" in page
    assert "t3.medium $0.0416/h" in notes[-1]
    _, _, unknown = aws_e2e.estimate("x9.huge")
    assert unknown[0] == "no bundled price for x9.huge: its instance-hours are left out"


def test_the_run_works_in_the_region_asked_for_not_the_environments(e2e: list[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """--region us-west-2 while the environment says us-east-1: each `mmsctl` the run starts, and its own look-ups
    and teardown, work in us-west-2 (stopped after the Lambda part, as by a Ctrl-C)."""
    with monkeypatch.context() as mp:
        mp.setenv("AWS_DEFAULT_REGION", "us-west-2")
        pushed_image(FUNCTION)
    landed: dict[str, list[str]] = {}

    def lambda_part_only(args: Sequence[str]) -> Any:
        if args[0] == "sagemaker":
            for region in ("us-east-1", "us-west-2"):
                listed = boto3.client("lambda", region_name=region).list_functions()["Functions"]
                landed[region] = [f["FunctionName"] for f in listed]
            raise KeyboardInterrupt
        return in_process(args)

    out = io.StringIO()
    status = aws_e2e.main([*e2e, "--region", "us-west-2"], runner=lambda_part_only, teardown_runner=in_process,
                          out=out)
    said = out.getvalue()
    assert status == 130 and "region us-west-2" in said, said
    assert landed == {"us-east-1": [], "us-west-2": [FUNCTION]}
    assert "everything it made is gone" in said
    assert boto3.client("lambda", region_name="us-west-2").list_functions()["Functions"] == []
    assert os.environ["AWS_DEFAULT_REGION"] == "us-east-1"  # put back


@pytest.mark.parametrize("profile", [None, "e2e"])
def test_a_profile_run_starts_every_mmsctl_with_that_profile_alone(profile: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials in the environment (keys, a web identity) win over AWS_PROFILE in botocore's chain: with
    --profile, the run's `mmsctl` processes see none of them (else they would make things in that account while
    the run's checks and teardown look in the profile's); without one, the environment is left as it is. Both
    are put back after."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::210987654321:role/ci")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    plan = aws_e2e.Plan(RUN, "123456789012", "eu-west-1", None, "squeezenet", Path("kitten.jpg"), "t3.medium",
                        profile=profile)
    with aws_e2e.aws_environment(plan):
        seen = {k: os.environ.get(k) for k in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                               "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_DEFAULT_REGION")}
    if profile:
        assert seen == {"AWS_PROFILE": "e2e", "AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None,
                        "AWS_ROLE_ARN": None, "AWS_WEB_IDENTITY_TOKEN_FILE": None, "AWS_DEFAULT_REGION": "eu-west-1"}
    else:
        assert seen == {"AWS_PROFILE": None, "AWS_ACCESS_KEY_ID": "AKIAENVIRONMENT", "AWS_SECRET_ACCESS_KEY": "secret",
                        "AWS_ROLE_ARN": "arn:aws:iam::210987654321:role/ci",
                        "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token", "AWS_DEFAULT_REGION": "eu-west-1"}
    assert (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_ROLE_ARN"], "AWS_PROFILE" in os.environ) == (
        "AKIAENVIRONMENT", "arn:aws:iam::210987654321:role/ci", False)
