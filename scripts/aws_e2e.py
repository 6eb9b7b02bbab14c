#!/usr/bin/env python3
"""`make aws-e2e`: prove the AWS half on a real account, then remove everything it made.

    MMSCTL_E2E=1 .venv/bin/python scripts/aws_e2e.py [--yes] [--region R] [--profile P] [--image kitten.jpg]
    MMSCTL_E2E=1 .venv/bin/python scripts/aws_e2e.py --teardown RUN_ID     # finish an interrupted run's removal

One run, named ``e2e-RUN_ID``: the Lambda pipeline (the image built and pushed, deployed with a function URL,
two images through S3 with S3's real event, one of them under a non-ASCII key, the URL called signed), a
SageMaker serverless endpoint from the same image (scripts/sagemaker_e2e.py: deploy, invoke, update, destroy),
an instance (`ec2 launch --wait`), and a small fleet (create with a warm pool, a prediction through its load
balancer, a blue/green rollout to a model set without the first model, a scale-out, a rolling rollout that
pauses at its checkpoints for ``--checkpoint-delay``).
Then everything is removed by its names and ``mmsctl:*`` tags (`lambda destroy`, `ec2 terminate`, `fleet
destroy`), also after a failed step, Ctrl-C or SIGTERM, and the Resource Groups Tagging API is asked whether
anything tagged for the run is left. It prints what it will make with a time and cost estimate (the bundled
prices, docs/aws.md "Proving it on a real account") and asks first; without ``MMSCTL_E2E=1`` or credentials it
does nothing.

On a stand-in (``AWS_ENDPOINT_URL`` on loopback: moto, as tests/cloud/test_aws_e2e.py runs this very script)
the steps that need AWS's real lifecycle are adapted, and each says so when it runs:

* no docker there: the image is not built; the run uses the one already in ECR (``--lambda-image``, or what
  `lambda build --push` leaves under ``mmsctl-lambda/NAME``);
* S3 fires no trigger and moto runs no image: the object is put in the input bucket and `lambda run-local
  --s3-put` runs the function's own handler on the very event S3 would send;
* moto's function URLs answer nothing: the signed call goes to ``MMSCTL_LAMBDA_FUNCTION_URL`` when it names
  a stand-in (the test's checks SigV4 as AWS does), else the step is skipped with that reason;
* instances do not boot and the load balancer serves nothing: `ec2 launch` does not ``--wait`` for ``/ping``
  and no prediction goes through the balancer (moto reports every target healthy, so `fleet --wait` runs);
* moto has no instance refresh: the rolling rollout is skipped;
* moto's sagemaker-runtime answers canned results and it has no UpdateEndpoint: the endpoint is deployed,
  deployed again (nothing changes), described and destroyed, not invoked or updated.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence, TextIO

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "scripts"):  # run as `python scripts/aws_e2e.py` from a checkout; sagemaker_e2e beside it
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

#: The flags each command of the run gets beyond its names. A flag added to a command later (fleet create's
#: ``--checkpoint-delay``, a lifecycle-hook option) is one line here.
FLAGS: dict[str, list[str]] = {
    "fleet create": ["--min", "1", "--max", "2", "--warm-pool", "1", "--wait-timeout", "1500"],
    "fleet rollout": ["--wait-timeout", "1500"],
    "fleet rollout --strategy rolling": ["--checkpoint-delay", "60s"],
    "fleet scale": ["--desired", "2", "--wait-timeout", "1500"],
    "ec2 launch": ["--wait-timeout", "900"],
    "lambda deploy": ["--memory", "1024", "--timeout", "60", "--input-prefix", "incoming/",
                      "--output-prefix", "predictions/"],
    "lambda invoke --s3": ["--timeout", "300"],
}
#: Watching the new group before the old one goes: long enough to see it serve on AWS; moto has nothing to see.
AUTO_FINISH = {"aws": "2m", "stand-in": "0s"}
#: A rolling rollout's instance refresh, polled until it ends.
REFRESH_TIMEOUT_S, REFRESH_POLL_S = 2400, 20
MODEL_NAME = "e2e"
#: The second image through the pipeline: S3 URL-encodes its key in the event, and it must stay ASCII in metadata.
NON_ASCII_NAME = "été.jpg"
EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130


@dataclass(frozen=True)
class Phase:
    """One part of the run for the estimate: its wall time, and what is billed by the hour meanwhile."""

    what: str
    minutes: float
    instances: int
    balancer: bool = False


#: Estimates (not measurements): EC2's start and cloud-init (60-90 s) plus the boot script (20-60 s, docs/ec2.md),
#: an Application Load Balancer's provisioning (a few minutes), a docker build and push of the Lambda image.
PHASES = (
    Phase("lambda: build and push the image (docker), deploy, one image through S3, the URL signed", 10, 0),
    Phase("ec2 launch --wait: one instance until /ping answers", 4, 1),
    Phase("fleet create --wait: balancer, group of 1, warm pool of 1 booted then stopped", 7, 2, True),
    Phase("fleet rollout (blue/green): a green group and its warm pool, then the blue group deleted", 8, 3, True),
    Phase("fleet scale --desired 2 --wait", 4, 2, True),
    Phase("fleet rollout --strategy rolling: both members replaced in place, a 60 s pause at each checkpoint", 12, 3,
          True),
    Phase("sagemaker: a serverless endpoint deployed, invoked, updated to resnet-18, destroyed", 15, 0),
    Phase("teardown: lambda destroy, ec2 terminate --wait, fleet destroy", 8, 2, True),
)
#: What the estimate assumes beyond the bundled prices (mmsctl/cloud/aws/prices.json).
ROOT_VOLUME_GIB = 100  # a Deep Learning AMI's root volume, order of magnitude
GP3_PER_GIB_MONTH = 0.08  # EBS gp3, US East (N. Virginia), aws.amazon.com/ebs/pricing
LAMBDA_CALLS, LAMBDA_CALL_MS = 4, 10_000  # cold starts included


class StepFailed(Exception):
    """A step of the run did not do what it should; the message says what."""


class Abandoned(BaseException):
    """Ctrl-C during the teardown, twice: stop removing (not an Exception, so no part of the teardown catches it)."""


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def subprocess_runner(*, detached: bool = False) -> Runner:
    """``mmsctl ARGS`` as its own process, its progress on this terminal, its stdout captured (``-o json``).
    *detached* runs it in a session of its own, so a Ctrl-C at the terminal does not stop it (the teardown)."""
    def run(args: Sequence[str]) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([sys.executable, "-m", "mmsctl", *args], stdout=subprocess.PIPE, text=True,
                              start_new_session=detached, cwd=REPO)
    return run


#: The environment variables botocore's chain takes credentials from before it reads ``AWS_PROFILE``'s.
_ENVIRONMENT_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN",
                            "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_SESSION_NAME")


@dataclass
class Plan:
    """The run's names and what it found before making anything."""

    run_id: str
    account: str
    region: str
    stand_in: Optional[str]  # the loopback endpoint, or None for AWS
    model: str
    image: Path
    instance_type: str
    allow_cidr: Optional[str] = None
    lambda_image: Optional[str] = None
    ami: Optional[str] = None
    asset_bucket_existed: bool = True
    server_group_existed: bool = True
    profile: Optional[str] = None  # --profile, or None for the default chain's

    @property
    def name(self) -> str:
        return f"e2e-{self.run_id}"

    @property
    def function(self) -> str:
        return f"mmsctl-e2e-{self.run_id}"

    @property
    def buckets(self) -> tuple[str, str]:
        return f"mmsctl-e2e-{self.run_id}-{self.account}-in", f"mmsctl-e2e-{self.run_id}-{self.account}-out"

    @property
    def mode(self) -> str:
        return "stand-in" if self.stand_in else "aws"

    def session(self) -> Any:
        """A session on the run's region and profile (never the default chain's, which --region may differ from)."""
        from mmsctl.cloud.aws.session import open_session

        return open_session(region=self.region, profile=self.profile)

    def environment(self) -> dict[str, Optional[str]]:
        """What every `mmsctl` the run starts needs to work where the run does: its region and profile (None: the
        variable is unset). With a profile, the environment's own credentials go (keys, and a web identity's role
        and token file): botocore prefers them to ``AWS_PROFILE``, and the run would make things in one account
        and check and remove them in another."""
        keys: dict[str, Optional[str]] = {"AWS_PROFILE": self.profile, **dict.fromkeys(_ENVIRONMENT_CREDENTIALS)}
        return {"AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region, **(keys if self.profile else {})}

    def machine(self) -> list[str]:
        """The instance type and AMI flags `ec2 launch` and `fleet create` share."""
        return ["--instance-type", self.instance_type, *(["--ami", self.ami] if self.ami else [])]


@dataclass
class Run:
    """Runs the steps and remembers how each went."""

    plan: Plan
    mmsctl_runner: Runner
    out: TextIO
    results: list[tuple[str, str, float]] = field(default_factory=list)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def mmsctl(self, *args: str, show: bool = True) -> "subprocess.CompletedProcess[str]":
        """``mmsctl ARGS``; what it prints is shown indented (*show*), a non-zero exit is a failed step."""
        self.say(f"    $ mmsctl {' '.join(args)}")
        done = self.mmsctl_runner(list(args))
        if show and done.stdout:
            self.say("\n".join(f"      {line}" for line in done.stdout.rstrip().splitlines()))
        if done.returncode != 0:
            said = (done.stderr or "").strip().splitlines()
            raise StepFailed(f"`mmsctl {' '.join(args[:2])}` exited {done.returncode}"
                             + (f": {said[0]}" if said else ""))
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.mmsctl(*args, "-o", "json", show=False).stdout)

    def step(self, title: str, action: Callable[[], Optional[str]]) -> None:
        """Run *action*; what it returns is a note (an adapted or skipped step says why)."""
        from mmsctl.errors import MmsError

        self.say(f"==> {title}")
        started = time.monotonic()
        try:
            note = action()
        except StepFailed:
            self.results.append((title, "failed", time.monotonic() - started))
            raise
        except (MmsError, OSError, ValueError, KeyError) as exc:
            self.results.append((title, "failed", time.monotonic() - started))
            raise StepFailed(f"{title}: {getattr(exc, 'message', None) or exc}") from exc
        status = "passed" if note is None else note
        self.results.append((title, status, time.monotonic() - started))
        if note is not None:
            self.say(f"    {note}")


# --- the steps --------------------------------------------------------------------------------------------------


def lambda_steps(run: Run) -> None:
    plan = run.plan
    run.step(f"lambda build --push --name {plan.function}", lambda: _build(run))
    run.step(f"lambda deploy {plan.function} (function URL, S3 trigger {plan.buckets[0]} -> {plan.buckets[1]})",
             lambda: _deploy(run))
    run.step("one image through the S3 pipeline", lambda: _through_s3(run))
    run.step("the function URL, signed with SigV4 (`lambda invoke --url`)", lambda: _through_url(run))


def _build(run: Run) -> Optional[str]:
    plan = run.plan
    if plan.lambda_image:
        return f"skipped: the image is given (--lambda-image {plan.lambda_image})"
    if plan.stand_in:
        return ("adapted: no docker on the stand-in; the run uses the image already in ECR "
                f"(mmsctl-lambda/{plan.function}:latest, what `lambda build --push` leaves)")
    with tempfile.TemporaryDirectory(prefix="mmsctl-e2e-") as work:
        run.mmsctl("lambda", "build", plan.model, "--out", str(Path(work) / "build"), "--push", "--name",
                   plan.function)
    return None


def _deploy(run: Run) -> Optional[str]:
    plan = run.plan
    args = ["lambda", "deploy", plan.function, "--model", plan.model, "--function-url",
            "--input-bucket", plan.buckets[0], "--output-bucket", plan.buckets[1], *FLAGS["lambda deploy"]]
    if plan.lambda_image:
        args += ["--image", plan.lambda_image]
    run.mmsctl(*args)
    return None


def _top1(answer: Any) -> str:
    result = answer.get("result") if isinstance(answer, dict) else answer
    if not isinstance(result, list) or not result or not isinstance(result[0], dict):
        raise StepFailed(f"no top-5 in the answer: {str(answer)[:200]}")
    return str(result[0].get("class") or result[0])


def _through_s3(run: Run) -> Optional[str]:
    """The image, then the same bytes under a non-ASCII name (its key arrives URL-encoded in S3's event)."""
    plan = run.plan
    with tempfile.TemporaryDirectory(prefix="mmsctl-e2e-") as work:
        renamed = Path(work) / NON_ASCII_NAME
        shutil.copyfile(plan.image, renamed)
        for image in (plan.image, renamed):
            (_through_s3_here if plan.stand_in else _through_s3_on_aws)(run, image)
    if not plan.stand_in:
        return None
    return ("adapted: S3 fires no trigger on the stand-in; `lambda run-local --s3-put` ran the function's handler "
            "on the event S3 sends for each object put")


def _through_s3_on_aws(run: Run, image: Path) -> None:
    answer = run.json("lambda", "invoke", run.plan.function, "--s3", str(image), *FLAGS["lambda invoke --s3"])
    if answer.get("status") != 200:
        raise StepFailed(f"the pipeline answered {answer.get('status')} for {image.name}: {str(answer)[:200]}")
    run.say(f"    top-1: {_top1(answer)} ({answer.get('output')})")


def _through_s3_here(run: Run, image: Path) -> None:
    plan = run.plan
    aws = plan.session()
    key = f"incoming/{image.name}"
    aws.call("s3", "put_object", Bucket=plan.buckets[0], Key=key, Body=image.read_bytes())
    run.mmsctl("lambda", "run-local", plan.function, "--s3-put", f"s3://{plan.buckets[0]}/{key}")
    written = aws.call("s3", "get_object", Bucket=plan.buckets[1], Key=f"predictions/{image.name}.json")
    run.say(f"    top-1: {_top1(json.loads(written['Body'].read()))} "
            f"(s3://{plan.buckets[1]}/predictions/{image.name}.json)")


def _through_url(run: Run) -> Optional[str]:
    if run.plan.stand_in and not os.environ.get("MMSCTL_LAMBDA_FUNCTION_URL"):
        return "skipped: the stand-in serves no function URL (set MMSCTL_LAMBDA_FUNCTION_URL to one that does)"
    run.say(f"    top-1: {_top1(run.json('lambda', 'invoke', run.plan.function, str(run.plan.image), '--url'))}")
    return None


def instance_steps(run: Run) -> None:
    run.step(f"ec2 launch --name {run.plan.function}", lambda: _launch(run))


def _launch(run: Run) -> Optional[str]:
    plan = run.plan
    args = ["ec2", "launch", "--name", plan.function, "-m", f"{MODEL_NAME}={plan.model}", *plan.machine(),
            *FLAGS["ec2 launch"]]
    if plan.stand_in:
        run.json(*args)
        return "adapted: instances do not boot on the stand-in; not waiting for /ping"
    run.mmsctl(*args, "--allow-cidr", str(plan.allow_cidr), "--wait")
    return None


def fleet_steps(run: Run) -> None:
    name = run.plan.name
    run.step(f"fleet create {name} --warm-pool 1 --wait", lambda: _create(run))
    run.step(f"a prediction through {name}'s load balancer", lambda: _predict_through_balancer(run))
    run.step(f"fleet rollout {name} (blue/green, to a model set without the first model)", lambda: _rollout(run))
    run.step(f"a prediction through {name}'s load balancer, of the model rolled out",
             lambda: _predict_through_balancer(run, f"{MODEL_NAME}2"))
    run.step(f"fleet scale {name} --desired 2 --wait", lambda: _scale(run))
    run.step(f"fleet rollout {name} --strategy rolling (paused {FLAGS['fleet rollout --strategy rolling'][1]} at "
             "each checkpoint)", lambda: _rolling(run))


def _create(run: Run) -> Optional[str]:
    plan = run.plan
    run.mmsctl("fleet", "create", plan.name, "-m", f"{MODEL_NAME}={plan.model}", *plan.machine(),
               *FLAGS["fleet create"], "--wait")
    described = run.json("fleet", "describe", plan.name)
    if not described.get("warm_pool"):
        raise StepFailed(f"fleet {plan.name} has no warm pool: {str(described)[:200]}")
    return None


def _endpoint(run: Run) -> str:
    described = run.json("fleet", "describe", run.plan.name)
    endpoint = described.get("endpoint")
    if not endpoint:
        raise StepFailed(f"fleet {run.plan.name} has no endpoint: {str(described)[:200]}")
    return str(endpoint)


def _predict_through_balancer(run: Run, model: str = MODEL_NAME) -> Optional[str]:
    endpoint = _endpoint(run)
    if run.plan.stand_in:
        return f"skipped: the stand-in's load balancer ({endpoint}) serves nothing"
    request = urllib.request.Request(f"{endpoint}/predictions/{model}", data=run.plan.image.read_bytes(),
                                     method="POST", headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - the fleet's own http(s) endpoint
        run.say(f"    top-1: {_top1(json.loads(answer.read()))}")
    return None


def _rollout(run: Run) -> Optional[str]:
    plan = run.plan
    # the new set leaves out the model the fleet was made with: its health check must not name a model
    done = run.json("fleet", "rollout", plan.name, "-m", f"{MODEL_NAME}2={plan.model}",
                    "--auto-finish", AUTO_FINISH[plan.mode], *FLAGS["fleet rollout"])
    if done.get("state") != "finished":
        raise StepFailed(f"the rollout ended {done.get('state')!r}, not finished: {str(done)[:200]}")
    return None


def _scale(run: Run) -> Optional[str]:
    run.mmsctl("fleet", "scale", run.plan.name, *FLAGS["fleet scale"], "--wait")
    return None


def _rolling(run: Run) -> Optional[str]:
    """An instance refresh to a third model set; polled until AWS ends it, which must be Successful."""
    plan = run.plan
    if plan.stand_in:
        return "skipped: the stand-in has no instance refresh"
    flags = FLAGS["fleet rollout --strategy rolling"]
    started = run.json("fleet", "rollout", plan.name, "--strategy", "rolling", "-m", f"{MODEL_NAME}3={plan.model}",
                       *flags)
    if started.get("checkpoint_delay_s") is None:
        raise StepFailed(f"the rolling rollout shows no checkpoint delay: {str(started)[:200]}")
    deadline = time.monotonic() + REFRESH_TIMEOUT_S
    while time.monotonic() < deadline:
        refresh = run.json("fleet", "rollout", plan.name, "--status").get("instance_refresh") or {}
        status = refresh.get("status")
        if status == "Successful":
            run.say(f"    instance refresh {refresh.get('id')}: Successful, {refresh.get('checkpoint_delay_s')} s "
                    "at each checkpoint")
            return _predict_through_balancer(run, f"{MODEL_NAME}3")
        if status in ("Failed", "Cancelled", "RollbackSuccessful", "RollbackFailed", "Baking"):
            raise StepFailed(f"the instance refresh ended {status}: {refresh.get('status_reason')}")
        time.sleep(REFRESH_POLL_S)
    raise StepFailed(f"the instance refresh did not end within {REFRESH_TIMEOUT_S} s")


def sagemaker_steps(run: Run) -> None:
    run.step(f"sagemaker: endpoint {run.plan.function} from the same image (scripts/sagemaker_e2e.py)",
             lambda: _sagemaker(run))


def _sagemaker(run: Run) -> Optional[str]:
    from sagemaker_e2e import run_sagemaker_e2e

    plan = run.plan
    image = plan.lambda_image or f"{plan.account}.dkr.ecr.{plan.region}.amazonaws.com/mmsctl-lambda/{plan.function}:latest"

    def mmsctl(argv: list[str]) -> "subprocess.CompletedProcess[str]":
        run.say(f"    $ mmsctl {' '.join(argv)}")
        return run.mmsctl_runner(argv)

    failures = run_sagemaker_e2e(mmsctl, name=plan.function, image=image, photo=plan.image, model=plan.model,
                                 region=plan.region, say=run.say, invoke=not plan.stand_in)
    if failures:
        raise StepFailed(f"sagemaker: {'; '.join(failures)}")
    if plan.stand_in:
        return ("adapted: moto's sagemaker-runtime answers canned results and has no UpdateEndpoint; the endpoint "
                "was deployed, deployed again, described and destroyed")
    return None


# --- the teardown -----------------------------------------------------------------------------------------------


def teardown(plan: Plan, runner: Runner, out: TextIO) -> list[str]:
    """Remove what the run made, each part even when another failed; what is left (one line each)."""
    left: list[str] = []

    def attempt(what: str, action: Callable[[], object]) -> None:
        print(f"==> teardown: {what}", file=out, flush=True)
        try:
            action()
        except (StepFailed, OSError, ValueError) as exc:
            left.append(f"{what}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a CloudError from the in-process calls: reported, next part
            left.append(f"{what}: {getattr(exc, 'message', exc)}")

    run = Run(plan, runner, out)
    attempt(f"sagemaker destroy {plan.function}",
            lambda: run.mmsctl("sagemaker", "destroy", plan.function, "--delete-data", "--yes"))
    attempt(f"lambda destroy {plan.function}",
            lambda: run.mmsctl("lambda", "destroy", plan.function, "--delete-data", "--yes"))
    attempt(f"ec2 terminate the instances of {plan.function}", lambda: _terminate(run))
    attempt(f"fleet destroy {plan.name}", lambda: run.mmsctl("fleet", "destroy", plan.name))
    attempt("what the run made that every launch shares", lambda: _shared(plan, out))
    attempt("nothing tagged for the run is left (Resource Groups Tagging API)", lambda: _nothing_tagged(plan))
    return left


def _terminate(run: Run) -> None:
    ids = [str(r["id"]) for r in run.json("ec2", "list") if r.get("name") == run.plan.function]
    if ids:
        run.mmsctl("ec2", "terminate", *ids, "--wait")


def _shared(plan: Plan, out: TextIO) -> None:
    """The ``mmsctl-server`` group and the asset bucket, when this run made them (they were not there before)."""
    from mmsctl.cloud.aws import tags
    from mmsctl.cloud.aws.asset_bucket import WHEELS, bucket_name, delete_prefix
    from mmsctl.cloud.aws.errors import aws_code
    from mmsctl.cloud.aws.security_groups import delete_security_group
    from mmsctl.errors import CloudError

    aws = plan.session()
    if not plan.server_group_existed:
        for group in aws.call("ec2", "describe_security_groups", Filters=tags.managed_filter(
                tags.SERVER_SECURITY_GROUP))["SecurityGroups"]:
            delete_security_group(aws, group["GroupId"])
            print(f"    deleted security group {group['GroupId']} (mmsctl-server)", file=out)
    if not plan.asset_bucket_existed:
        bucket = bucket_name(plan.account, plan.region)
        try:
            delete_prefix(aws, bucket, WHEELS)
            aws.call("s3", "delete_bucket", Bucket=bucket)
        except CloudError as exc:
            if aws_code(exc) not in ("NoSuchBucket", "404"):
                raise
            return  # the run failed before it made the bucket
        print(f"    deleted bucket {bucket}", file=out)


def _nothing_tagged(plan: Plan) -> None:
    """Ask the tagging API for the run's tags until only what is already gone answers (it lags a deletion)."""
    from mmsctl.cloud.aws import tags
    aws = plan.session()
    live: list[str] = []
    for attempt in range(1 if plan.stand_in else 7):
        if attempt:
            time.sleep(10)
        found: set[str] = set()
        for key, value in ((tags.FLEET, plan.name), (tags.LAMBDA, plan.function), ("Name", plan.function)):
            found.update(m["ResourceARN"] for m in aws.paginate(
                "resourcegroupstaggingapi", "get_resources", "ResourceTagMappingList",
                TagFilters=[{"Key": key, "Values": [value]}]))
        live = sorted(arn for arn in found if not _gone(aws, arn))
        if not live:
            return
    raise StepFailed(f"still tagged for the run: {', '.join(live)}")


def _gone(aws: Any, arn: str) -> bool:
    """A terminated instance keeps its tags for a while, and so may its volume, deleted with it."""
    from mmsctl.cloud.aws.errors import ResourceNotFound

    kind, _, resource = arn.rpartition(":")[2].partition("/")
    try:
        if kind == "instance":
            found = aws.call("ec2", "describe_instances", InstanceIds=[resource])["Reservations"]
            return all(i["State"]["Name"] in ("terminated", "shutting-down") for r in found for i in r["Instances"])
        if kind == "volume":
            return not aws.call("ec2", "describe_volumes", VolumeIds=[resource])["Volumes"]
    except ResourceNotFound:
        return True
    return False


# --- the plan, its estimate, and the question ---------------------------------------------------------------------


def estimate(instance_type: str) -> tuple[float, float, list[str]]:
    """(minutes, dollars, notes) of a run on AWS, from :data:`PHASES` and the bundled prices."""
    from mmsctl.cloud.aws.prices import NoBundledPrice, balancer_price, bundled_prices, lambda_estimate

    notes = []
    try:
        hourly = float(bundled_prices()["instances"][instance_type])
    except KeyError:
        hourly = 0.0
        notes.append(f"no bundled price for {instance_type}: its instance-hours are left out")
    volume = ROOT_VOLUME_GIB * GP3_PER_GIB_MONTH / 730
    dollars = sum(p.minutes / 60 * (p.instances * (hourly + volume) + (balancer_price() if p.balancer else 0.0))
                  for p in PHASES)
    try:
        dollars += lambda_estimate(1024, LAMBDA_CALL_MS, LAMBDA_CALLS).total
    except NoBundledPrice:  # pragma: no cover - the table has Lambda's prices
        pass
    notes.append(f"{instance_type} ${hourly:.4f}/h, the load balancer ${balancer_price():.4f}/h (bundled us-east-1 "
                 f"on-demand prices), a {ROOT_VOLUME_GIB} GiB gp3 root volume per instance, {LAMBDA_CALLS} Lambda "
                 f"calls of up to {LAMBDA_CALL_MS // 1000} s; ECR, S3 and CloudWatch Logs add fractions of a cent")
    return sum(p.minutes for p in PHASES), dollars, notes


def describe_plan(plan: Plan, out: TextIO) -> None:
    say = lambda text="": print(text, file=out)  # noqa: E731
    where = f"the stand-in at {plan.stand_in}" if plan.stand_in else "AWS"
    say(f"mmsctl end-to-end run {plan.run_id}: account {plan.account}, region {plan.region}, on {where}")
    say(f"  Lambda: function {plan.function} (its image in ECR mmsctl-lambda/{plan.function}, role, log group, "
        f"model bucket, function URL), buckets {plan.buckets[0]} and {plan.buckets[1]}")
    say(f"  EC2: one {plan.instance_type} instance named {plan.function}, its role and boot assets"
        + (f"; port 8080 and 22 open to {plan.allow_cidr}" if plan.allow_cidr else ""))
    say(f"  fleet {plan.name}: an Application Load Balancer, target group, launch template, Auto Scaling group of "
        f"1-2 {plan.instance_type} with a warm pool of 1, a second group during the rollout, security groups, role")
    if not plan.server_group_existed or not plan.asset_bucket_existed:
        made = [what for what, there in (("the mmsctl-server security group", plan.server_group_existed),
                                         (f"the asset bucket mmsctl-assets-{plan.account}-{plan.region}",
                                          plan.asset_bucket_existed)) if not there]
        say(f"  and, as this account has none yet, {' and '.join(made)} (removed at the end too)")
    minutes, dollars, notes = estimate(plan.instance_type)
    say(f"Estimate (not a measurement): about {minutes:.0f} minutes and ${dollars:.2f}; " + "; ".join(notes))
    say("Everything is removed at the end, also after a failure or Ctrl-C; if that is cut short, "
        f"`MMSCTL_E2E=1 scripts/aws_e2e.py --teardown {plan.run_id}` finishes it.")


def confirm(yes: bool, stdin: TextIO, out: TextIO) -> bool:
    if yes:
        return True
    if not stdin.isatty():
        raise SystemExit(_usage("refusing to make paid resources without a terminal to ask on: pass --yes", out))
    print("Make these now? [y/N] ", end="", file=out, flush=True)
    return stdin.readline().strip().lower() in ("y", "yes")


def _usage(message: str, out: TextIO) -> int:
    print(f"error: {message}", file=out)
    return EXIT_USAGE


def _caller_cidr() -> str:
    """This machine's public address as AWS sees it (checkip.amazonaws.com), for `ec2 launch --wait`."""
    with urllib.request.urlopen("https://checkip.amazonaws.com", timeout=10) as answer:  # noqa: S310
        return f"{answer.read().decode().strip()}/32"


def make_plan(args: argparse.Namespace, out: TextIO) -> Plan:
    """The names, and what exists already (reads only). Raises the CloudError of missing credentials."""
    from mmsctl.cloud.aws import tags
    from mmsctl.cloud.aws.asset_bucket import bucket_name
    from mmsctl.cloud.aws.session import local_endpoint, open_session
    from mmsctl.errors import CloudError

    aws = open_session(region=args.region, profile=args.profile)
    plan = Plan(args.run_id or secrets.token_hex(3), aws.account_id(), aws.region, local_endpoint("ec2"),
                args.model, Path(args.image), args.instance_type, args.allow_cidr, args.lambda_image, args.ami,
                profile=args.profile)
    groups = aws.call("ec2", "describe_security_groups", Filters=tags.managed_filter(tags.SERVER_SECURITY_GROUP))
    plan.server_group_existed = bool(groups["SecurityGroups"])
    try:
        aws.call("s3", "head_bucket", Bucket=bucket_name(plan.account, plan.region))
    except CloudError:
        plan.asset_bucket_existed = False
    return plan


def preflight(plan: Plan, teardown_only: bool) -> Optional[str]:
    """What stops the run before anything is made (one line), or None."""
    if teardown_only:
        return None
    if not plan.image.is_file():
        return f"no image {plan.image} to send through the pipeline (run `make demo` for kitten.jpg, or pass --image)"
    if not plan.stand_in and not plan.lambda_image and not (shutil.which("docker") or shutil.which("podman")):
        return "building the Lambda image needs docker or podman (or pass --lambda-image URI of a pushed one)"
    if not plan.stand_in and plan.allow_cidr is None:
        try:
            plan.allow_cidr = _caller_cidr()
        except OSError as exc:
            return f"could not find this machine's public address ({exc}): pass --allow-cidr CIDR"
    return None


# --- main -----------------------------------------------------------------------------------------------------------


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="aws_e2e.py", description=__doc__.split("\n")[0])
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask (unattended runs)")
    parser.add_argument("--region")
    parser.add_argument("--profile")
    parser.add_argument("--model", default="squeezenet", help="zoo name or .mar served everywhere (squeezenet)")
    parser.add_argument("--image", default=str(REPO / "kitten.jpg"), help="the image sent (kitten.jpg of make demo)")
    parser.add_argument("--instance-type", default="t3.medium")
    parser.add_argument("--ami", help="ami-… or resolve:ssm:/parameter (default: the Deep Learning AMI ec2 launch picks)")
    parser.add_argument("--allow-cidr", help="who may reach the instance's 8080 (default: this machine's address)")
    parser.add_argument("--lambda-image", help="an ECR image URI already pushed: no docker build")
    parser.add_argument("--run-id", help="the run's id (default: 6 random hex digits)")
    parser.add_argument("--teardown", metavar="RUN_ID", help="only remove what run RUN_ID made")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] = (), *, runner: Optional[Runner] = None, teardown_runner: Optional[Runner] = None,
         stdin: TextIO = sys.stdin, out: TextIO = sys.stderr) -> int:
    """The whole run; its exit status (0: every step passed and nothing is left)."""
    args = parse(argv)
    if os.environ.get("MMSCTL_E2E") != "1":
        return _usage("set MMSCTL_E2E=1 to run the end-to-end proof: it makes (and pays for) real AWS resources",
                      out)
    from mmsctl.errors import MmsError

    args.run_id = args.teardown or args.run_id
    try:
        plan = make_plan(args, out)
        stop = preflight(plan, bool(args.teardown))
        if stop:
            return _usage(stop, out)
        if not args.teardown:
            describe_plan(plan, out)
        if not confirm(args.yes, stdin, out):
            print("nothing was made", file=out)
            return EXIT_USAGE
    except MmsError as exc:
        print(f"error: {exc.message}", file=out)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted: nothing was made", file=out)
        return EXIT_INTERRUPTED
    with aws_environment(plan):
        status = 0 if args.teardown else run_steps(plan, runner or subprocess_runner(), out)
        return finish(plan, teardown_runner or subprocess_runner(detached=True), out, status)


@contextmanager
def aws_environment(plan: Plan) -> Iterator[None]:
    """This process's environment with the plan's region and profile (:meth:`Plan.environment`) while the run
    goes, put back after: every `mmsctl` it runs, as a process or in this one, inherits them."""
    wanted = plan.environment()
    saved = {key: os.environ.get(key) for key in wanted}
    _set_environment(wanted)
    try:
        yield
    finally:
        _set_environment(saved)


def _set_environment(values: dict[str, Optional[str]]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_steps(plan: Plan, runner: Runner, out: TextIO) -> int:
    """Every step, in order, until one fails; the exit status so far."""
    from mmsctl.errors import MmsError

    run = Run(plan, runner, out)
    previous = signal.signal(signal.SIGTERM, _interrupted)  # a SIGTERM is a Ctrl-C: the teardown still runs
    status = 0
    try:
        for part in (lambda_steps, sagemaker_steps, instance_steps, fleet_steps):
            part(run)
    except (StepFailed, MmsError, OSError, ValueError, KeyError) as exc:
        print(f"error: {getattr(exc, 'message', None) or exc}", file=out)
        status = EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted: removing what the run made", file=out)
        status = EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
    for title, how, seconds in run.results:
        print(f"  {seconds:7.1f} s  {how.split(':', 1)[0]:8}  {title}", file=out)
    return status


def finish(plan: Plan, runner: Runner, out: TextIO, status: int) -> int:
    """The teardown (a first Ctrl-C or SIGTERM does not stop it, a second does); the run's final exit status."""
    pressed: list[int] = []

    def patient(signum: int, frame: Any) -> None:
        pressed.append(signum)
        if len(pressed) > 1:
            raise Abandoned
        print("the teardown goes on (Ctrl-C again stops it, leaving what is not removed yet)", file=out, flush=True)

    previous = {sig: signal.signal(sig, patient) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        left = teardown(plan, runner, out)
    except Abandoned:
        left = ["the teardown was stopped before it finished"]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if left:
        print(f"left behind by run {plan.run_id} (`MMSCTL_E2E=1 scripts/aws_e2e.py --teardown {plan.run_id}` "
              "tries again):", file=out)
        for line in left:
            print(f"  {line}", file=out)
        return status or EXIT_FAILED
    print(f"run {plan.run_id}: everything it made is gone", file=out)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
