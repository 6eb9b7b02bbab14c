"""`mmsctl fleet rollout` on a moto server: a new launch template version, a second group on it behind the
same target group, --finish, --rollback, refusal of a second rollout; the rolling strategy by its exact calls."""

from __future__ import annotations

import base64
import gzip
import json
import re
from contextlib import contextmanager
from typing import Any, Iterator

import boto3
import pytest

from tests.cloud.test_fleet import PARAM, _create, _tg, aws, cli  # noqa: F401 - fixtures

BLUE, GREEN = "mmsctl-fleet-ro", "mmsctl-fleet-ro-green"


def _group(aws: dict[str, Any], name: str) -> dict[str, Any]:
    found = aws["asg"].describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return found[0] if found else {}


def _user_data(aws: dict[str, Any], template_id: str, version: str) -> str:
    data = aws["ec2"].describe_launch_template_versions(LaunchTemplateId=template_id, Versions=[version])
    raw = base64.b64decode(data["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"])
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()


@pytest.mark.slow
def test_blue_green_rollout_finish_rollback_and_refusal(aws: dict[str, Any]) -> None:
    cli = aws["cli"]
    # an AMI that does not say which Python it has (the default one, Ubuntu 22.04's, says 3.10: not 3.11)
    image = aws["ec2"].register_image(Name="team-base-image", Description="")["ImageId"]
    boto3.client("ssm").put_parameter(Name=PARAM, Value=image, Type="String", Overwrite=True)
    _create(aws, "ro", "-m", "squeezenet", "--min", "1", "--max", "3", "--warm-pool", "1", "--health-check-grace", "450",
            "--instance-python", "3.11")
    tg_arn = _tg(aws, "ro")["TargetGroupArn"]
    proc = cli("fleet", "rollout", "ro", "-m", "squeezenet", "-m", "sq2=squeezenet", "-o", "json")
    assert proc.code == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["state"], out["from_version"], out["to_version"], out["group"]) == ("shifted", "1", "2", GREEN)
    assert "sq2" in _user_data(aws, out["template"], "2") and "sq2" not in _user_data(aws, out["template"], "1")
    # the wheels are built again for the Python the fleet was created for, not the default 3.10
    assert "the wheels are for Python 3.11" in _user_data(aws, out["template"], "2")
    green, blue = _group(aws, GREEN), _group(aws, BLUE)
    assert green["TargetGroupARNs"] == [tg_arn] and blue["TargetGroupARNs"] == []  # traffic shifted
    assert green["LaunchTemplate"]["Version"] == "2" and blue["LaunchTemplate"]["Version"] == "1"  # blue pinned
    assert aws["asg"].describe_warm_pool(AutoScalingGroupName=GREEN)["WarmPoolConfiguration"]["MinSize"] == 1
    assert green["HealthCheckGracePeriod"] == blue["HealthCheckGracePeriod"] == 450  # the override, kept
    assert aws["asg"].describe_policies(AutoScalingGroupName=GREEN)["ScalingPolicies"]
    ids = {i["InstanceId"] for i in green["Instances"]}
    healthy = aws["elb"].describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"]
    assert ids and ids <= {h["Target"]["Id"] for h in healthy if h["TargetHealth"]["State"] == "healthy"}

    again = cli("fleet", "rollout", "ro", "-m", "squeezenet")
    assert again.code != 0 and "has a rollout in progress" in again.stderr and "(--finish, --rollback)" in again.stderr
    status = json.loads(cli("fleet", "rollout", "ro", "--status", "-o", "json").stdout)
    assert status["state"] == "shifted" and [g["group"] for g in status["groups"]] == [GREEN, BLUE]

    back = cli("fleet", "rollout", "ro", "--rollback", "-o", "json")
    assert back.code == 0, back.stderr
    assert _group(aws, GREEN) == {} and _group(aws, BLUE)["TargetGroupARNs"] == [tg_arn]
    assert json.loads(cli("fleet", "rollout", "ro", "--status", "-o", "json").stdout)["state"] == "none"

    # roll out again (to the green name), then finish: the old blue group goes, green serves alone
    assert cli("fleet", "rollout", "ro", "-m", "squeezenet", "-m", "sq3=squeezenet", "--instance-python", "3.12").code == 0
    assert "the wheels are for Python 3.12" in _user_data(aws, out["template"], "3")
    assert {t["Key"]: t["Value"] for t in _group(aws, GREEN)["Tags"]}["mmsctl:instance-python"] == "3.12"
    done = cli("fleet", "rollout", "ro", "--finish", "-o", "json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["deleted_group"] == BLUE and _group(aws, BLUE) == {}
    desc = json.loads(cli("fleet", "describe", "ro", "-o", "json").stdout)
    assert desc["models"].endswith(",sq3=squeezenet") and desc["drift"] == []
    assert {i["template_version"] for i in desc["instances"]} == {"3"}
    from mmsctl.cli.fleet.rollout import persist_command

    assert persist_command("ro", "us-east-1", "new=./x.mar") == (
        f"mmsctl fleet rollout ro --models {desc['models'].replace(',', ' --models ')} --models new=./x.mar "
        "--region us-east-1")
    # --auto-finish: watched for the time given (none here), healthy throughout, so finished in the same command
    auto = cli("fleet", "rollout", "ro", "-m", "squeezenet", "--auto-finish", "0s", "-o", "json")
    assert auto.code == 0, auto.stderr
    result = json.loads(auto.stdout)
    assert (result["auto_finished"], result["state"], result["deleted_group"]) == (True, "finished", GREEN)
    assert _group(aws, GREEN) == {} and _group(aws, BLUE)["TargetGroupARNs"] == [tg_arn]
    bad = cli("fleet", "rollout", "ro", "-m", "squeezenet", "--strategy", "rolling", "--auto-finish", "5m")
    assert bad.code == 2 and "auto-finish is for a blue/green rollout" in bad.stderr
    nothing = cli("fleet", "rollout", "ro", "--finish")
    assert nothing.code != 0 and "no rollout in progress" in nothing.stderr
    gone = cli("fleet", "destroy", "ro", "-o", "json")
    assert gone.code == 0, gone.stderr and _group(aws, GREEN) == {}


REFRESH_ID = "08b91cf7-8fa6-48af-b6a6-d227f40f1b9b"


@contextmanager
def _instance_refresh(session: Any) -> Iterator[list[dict[str, Any]]]:
    """AWS's instance refresh, which moto lacks (it answers 500), on the client mmsctl shares with this test; every
    other call still goes to moto. StartInstanceRefresh is recorded (its parameters, as botocore validated them) and
    answered with an id; DescribeInstanceRefreshes answers for what was started in the shape of AWS's own example
    (botocore's examples-1.json, its reason too): in progress, half the group replaced."""
    from botocore.awsrequest import AWSResponse

    client, started = session.client("autoscaling"), []

    def record(params: dict[str, Any], **_: Any) -> None:
        started.append(json.loads(json.dumps(params)))

    def answer(model: Any, **_: Any) -> Any:
        if model.name == "StartInstanceRefresh":
            return AWSResponse(None, 200, {}, None), {"InstanceRefreshId": REFRESH_ID}
        last = started[-1]
        return AWSResponse(None, 200, {}, None), {"InstanceRefreshes": [{
            "AutoScalingGroupName": last["AutoScalingGroupName"], "InstanceRefreshId": REFRESH_ID,
            "InstancesToUpdate": 1, "PercentageComplete": 50, "Preferences": last["Preferences"],
            "DesiredConfiguration": last["DesiredConfiguration"], "Status": "InProgress",
            "StatusReason": "Waiting for instances to warm up before continuing. For example: i-0645704820a8e83ff "
                            "is warming up."}]}

    events = [("before-parameter-build.auto-scaling.StartInstanceRefresh", record),
              *((f"before-call.auto-scaling.{op}", answer) for op in ("StartInstanceRefresh", "DescribeInstanceRefreshes"))]
    for event, handler in events:
        client.meta.events.register(event, handler, unique_id=f"test-{event}")
    try:
        yield started
    finally:
        for event, _ in events:
            client.meta.events.unregister(event, unique_id=f"test-{event}")


def test_rolling_strategy_is_an_instance_refresh_that_pauses_minutes_not_an_hour(aws: dict[str, Any]) -> None:
    """The exact StartInstanceRefresh call with botocore's Stubber; the whole rolling rollout on moto with a
    stand-in for the instance refresh (above): its checkpoints pause --checkpoint-delay (10 minutes by default,
    where the API's default is an hour), shown in the plan, the result and --status."""
    from botocore.stub import Stubber

    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.fleet.refresh import start_refresh

    session = open_session()
    with Stubber(session.client("autoscaling")) as stub:
        stub.add_response("start_instance_refresh", {"InstanceRefreshId": "ir-1"}, {
            "AutoScalingGroupName": "g", "Strategy": "Rolling",
            "DesiredConfiguration": {"LaunchTemplate": {"LaunchTemplateId": "lt-1", "Version": "4"}},
            "Preferences": {"MinHealthyPercentage": 75, "CheckpointPercentages": [50, 100], "CheckpointDelay": 600,
                            "AutoRollback": True, "SkipMatching": True}})
        assert start_refresh(session, "g", "lt-1", "4", 75) == "ir-1"
        stub.assert_no_pending_responses()

    cli = aws["cli"]
    _create(aws, "rr", "-m", "squeezenet", "--min", "1")
    proc = cli("fleet", "rollout", "rr", "-m", "squeezenet", "--strategy", "rolling", "--dry-run", "-o", "json")
    assert proc.code == 0, proc.stderr
    plan = json.loads(proc.stdout)
    calls = [c for c in plan["calls"] if c.get("executed") is False]
    ops = [c["operation"] for c in calls]
    # the group already has its hook, the role its permission, the target group the readiness check: no change
    assert ops == ["UpdateAutoScalingGroup", "CreateLaunchTemplateVersion", "StartInstanceRefresh",
                   "CreateOrUpdateTags"], ops
    refresh = calls[2]["parameters"]
    assert refresh["AutoScalingGroupName"] == "mmsctl-fleet-rr"
    assert refresh["Preferences"] == {"MinHealthyPercentage": 90, "CheckpointPercentages": [50, 100],
                                      "CheckpointDelay": 600, "AutoRollback": True, "SkipMatching": True}
    # AutoRollback returns to the group's configuration, which must be a version number, not $Latest/$Default
    assert calls[0]["parameters"]["LaunchTemplate"]["Version"] == "1"
    assert plan["rollout"]["checkpoints"] == "50%, 100%, each a 600 s pause"
    assert _group(aws, "mmsctl-fleet-rr")["LaunchTemplate"]["Version"] == "$Latest"  # nothing changed

    with _instance_refresh(session) as started:
        done = cli("fleet", "rollout", "rr", "-m", "squeezenet", "--strategy", "rolling", "--checkpoint-delay", "5m")
        assert done.code == 0, done.stderr
        assert re.search(r"checkpoints +50%, 100%, each a 300 s pause", done.stdout)
        assert [s["Preferences"]["CheckpointDelay"] for s in started] == [300]
        assert started[0]["DesiredConfiguration"]["LaunchTemplate"]["Version"] == "2"
        assert _group(aws, "mmsctl-fleet-rr")["LaunchTemplate"]["Version"] == "1"  # pinned: what a rollback restores
        status = json.loads(cli("fleet", "rollout", "rr", "--status", "-o", "json").stdout)
        table = cli("fleet", "rollout", "rr", "--status")
    assert (f"instance refresh {REFRESH_ID}: InProgress, 50% done, to version 2; checkpoints 50%, 100%, each a 300 s "
            "pause (Waiting for instances to warm up before continuing.") in table.stderr
    shown = status["instance_refresh"]
    assert (shown["id"], shown["status"], shown["percent_complete"], shown["checkpoint_delay_s"],
            shown["checkpoints"], shown["to_version"]) == (REFRESH_ID, "InProgress", 50, 300, [50, 100], "2")
    # A group on $Default is pinned to the default's number (1 here), not the latest (2): what it runs.
    template_id = _group(aws, "mmsctl-fleet-rr")["LaunchTemplate"]["LaunchTemplateId"]
    aws["asg"].update_auto_scaling_group(AutoScalingGroupName="mmsctl-fleet-rr", LaunchTemplate={
        "LaunchTemplateId": template_id, "Version": "$Default"})
    plan = json.loads(cli("fleet", "rollout", "rr", "-m", "squeezenet", "--strategy", "rolling", "--dry-run",
                          "-o", "json").stdout)
    pins = [c["parameters"]["LaunchTemplate"]["Version"] for c in plan["calls"] if c["operation"] == "UpdateAutoScalingGroup"]
    assert pins == ["1"] and plan["rollout"]["from_version"] == "1"

    for args, message in [
        (["--checkpoint-delay", "25h"], "--checkpoint-delay '25h' is longer than a day"),
        (["--checkpoint-delay", "soon"], "bad --checkpoint-delay 'soon'"),
        (["--checkpoint-delay", "-5s"], "bad --checkpoint-delay '-5s'"),
    ]:
        bad = cli("fleet", "rollout", "rr", "-m", "squeezenet", "--strategy", "rolling", *args)
        assert bad.code == 2 and message in bad.stderr, bad.stderr
    blue_green = cli("fleet", "rollout", "rr", "-m", "squeezenet", "--checkpoint-delay", "5m")
    assert blue_green.code == 2 and "a checkpoint delay is for a rolling rollout, 0 s to 24 hours" in blue_green.stderr
    bad = cli("fleet", "rollout", "rr", "-m", "squeezenet", "--strategy", "canary")
    assert bad.code == 2 and "unknown rollout strategy 'canary'" in bad.stderr and "--strategy" in bad.stderr


def test_checkpoint_delay_bounds() -> None:
    """The request's own check (for callers other than the CLI): whole seconds, 0 to a day, rolling only."""
    from mmsctl.cloud.fleet.rollout import RolloutRequest
    from mmsctl.errors import UsageError

    assert RolloutRequest("x", ami="ami-1", strategy="rolling").checkpoint_delay == 600
    assert RolloutRequest("x", ami="ami-1", strategy="rolling", checkpoint_delay_s=0.4).checkpoint_delay == 0
    RolloutRequest("x", ami="ami-1", strategy="rolling", checkpoint_delay_s=86400).check()
    for delay, strategy in ((86401, "rolling"), (-1, "rolling"), (60, "blue-green")):
        with pytest.raises(UsageError) as caught:
            RolloutRequest("x", ami="ami-1", strategy=strategy, checkpoint_delay_s=delay).check()
        assert caught.value.param == "checkpoint_delay_s"


def test_register_persist_is_a_rollout_of_the_templates_models_plus_the_new_one(aws: dict[str, Any], capsys) -> None:
    """`models register --persist` on a fleet's context: what the members were told goes into the template too
    (the fan-out itself reaches the members' private addresses, which tests do not; the rollout is shown here)."""
    from mmsctl.cli.fleet.rollout import persist_model

    cli = aws["cli"]
    _create(aws, "pe", "-m", "squeezenet", "--min", "1", "--max", "2")
    persist_model("pe", "us-east-1", "new=https://models.example.com/new.mar", "json")
    result = json.loads(capsys.readouterr().out)
    assert result["state"] == "shifted" and result["to_version"] == "2"
    script = _user_data(aws, result["template"], "2")
    assert "--models new=https://models.example.com/new.mar" in script and "models/squeezenet.mar" in script
    desc = json.loads(cli("fleet", "describe", "pe", "-o", "json").stdout)
    assert desc["models"] == "squeezenet=squeezenet,new=https://models.example.com/new.mar"

    # on a context that is not an AWS fleet, --persist is refused before anything is sent
    assert cli("context", "add", "one", "--inference", "http://127.0.0.1:1", "--management", "http://127.0.0.1:1").code == 0
    refused = cli("models", "register", "x.mar", "--persist", "--context", "one")
    assert refused.code == 2 and "--persist rolls a model out to an AWS fleet" in refused.stderr
    assert cli("fleet", "destroy", "pe").code == 0


def _as_made_before_the_hook(aws: dict[str, Any], name: str) -> str:
    """Turn a fleet into one an mmsctl before the launch hook made: no hook, no permission to complete one, a health
    check naming its first model, and the group on a version whose boot completes no hook; that version's number."""
    group = f"mmsctl-fleet-{name}"
    aws["asg"].delete_lifecycle_hook(AutoScalingGroupName=group, LifecycleHookName="mmsctl-server-ready")
    aws["iam"].delete_role_policy(RoleName=group, PolicyName="mmsctl-complete-lifecycle")
    aws["elb"].modify_target_group(TargetGroupArn=_tg(aws, name)["TargetGroupArn"], HealthCheckPath="/ping/squeezenet")
    template_id = _group(aws, group)["LaunchTemplate"]["LaunchTemplateId"]
    first = aws["ec2"].describe_launch_template_versions(LaunchTemplateId=template_id, Versions=["1"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    version = str(aws["ec2"].create_launch_template_version(
        LaunchTemplateId=template_id, SourceVersion="1", VersionDescription=f"mmsctl fleet {name}",
        LaunchTemplateData={k: first[k] for k in ("ImageId", "InstanceType", "UserData")})[
        "LaunchTemplateVersion"]["VersionNumber"])
    aws["asg"].update_auto_scaling_group(AutoScalingGroupName=group, LaunchTemplate={
        "LaunchTemplateId": template_id, "Version": version})
    return version


@pytest.mark.slow
def test_a_fleet_made_before_the_hook_gets_it_and_the_readiness_check_from_its_next_rollout(
        aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet whose check names a model it may drop, and whose warm pool never served: blue/green moves the check
    to /v2/health/ready before the new group registers, grants the role its permission first, and makes the new
    group with the hook; a rolling rollout adds the hook only where the version the group runs completes it."""
    from mmsctl.cloud.fleet import create
    from mmsctl.cloud.instance import server_image as image

    hooks: list[Any] = []
    real = image.server_image

    def spy(*args: Any, **kwargs: Any) -> Any:
        hooks.append(kwargs.get("lifecycle_hook"))
        return real(*args, **kwargs)

    monkeypatch.setattr(image, "server_image", spy)
    monkeypatch.setattr(create, "server_image", spy)
    cli = aws["cli"]
    _create(aws, "old", "-m", "squeezenet", "--min", "1", "--max", "3", "--warm-pool", "1")
    assert [(h.group, h.name) for h in hooks] == [("mmsctl-fleet-old", "mmsctl-server-ready")]
    _as_made_before_the_hook(aws, "old")
    desc = cli("fleet", "describe", "old")
    assert "the group has no launch lifecycle hook" in desc.stderr and "it never serves" in desc.stderr
    assert "the health check /ping/squeezenet names a model" in desc.stderr
    assert "`mmsctl fleet rollout old` moves it to /v2/health/ready" in desc.stderr

    # Rolling, while the group runs a version whose boot completes no hook: no hook (a rollback launches that version).
    rolling = cli("fleet", "rollout", "old", "-m", "squeezenet", "--strategy", "rolling", "--dry-run", "-o", "json")
    assert rolling.code == 0, rolling.stderr
    ops = [c["operation"] for c in json.loads(rolling.stdout)["calls"] if c.get("executed") is False]
    assert "PutLifecycleHook" not in ops and ops.index("ModifyTargetGroup") < ops.index("StartInstanceRefresh")
    assert json.loads(rolling.stdout)["rollout"]["lifecycle_hook"].startswith("not added: mmsctl-fleet-old's instances")

    # Blue/green: permission, then the check, then the new group with its hook; said in the plan and the output.
    plan = cli("fleet", "rollout", "old", "-m", "squeezenet", "-m", "sq2=squeezenet", "--dry-run", "-o", "json")
    assert plan.code == 0, plan.stderr
    calls = [c for c in json.loads(plan.stdout)["calls"] if c.get("executed") is False]
    ops = [c["operation"] for c in calls]
    assert ops.index("CreateLaunchTemplateVersion") < ops.index("PutRolePolicy") < ops.index("ModifyTargetGroup") \
        < ops.index("CreateAutoScalingGroup"), ops
    assert calls[ops.index("ModifyTargetGroup")]["parameters"]["HealthCheckPath"] == "/v2/health/ready"
    assert calls[ops.index("CreateAutoScalingGroup")]["parameters"]["LifecycleHookSpecificationList"][0][
        "LifecycleHookName"] == "mmsctl-server-ready"
    hooks.clear()
    done = cli("fleet", "rollout", "old", "-m", "sq2=squeezenet")  # drops squeezenet, the model the check named
    assert done.code == 0, done.stderr
    assert "/ping/squeezenet -> /v2/health/ready" in done.stdout
    green = "mmsctl-fleet-old-green"
    assert [(h.group, h.name) for h in hooks] == [(green, "mmsctl-server-ready")]  # the version is for the new group
    assert _tg(aws, "old")["HealthCheckPath"] == "/v2/health/ready"
    assert [h["LifecycleHookName"] for h in aws["asg"].describe_lifecycle_hooks(AutoScalingGroupName=green)[
        "LifecycleHooks"]] == ["mmsctl-server-ready"]
    assert aws["asg"].describe_warm_pool(AutoScalingGroupName=green)["WarmPoolConfiguration"]["MinSize"] == 1
    from tests.cloud.test_fleet import _assert_completes_only_its_groups

    _assert_completes_only_its_groups(aws["iam"], "old")
    assert cli("fleet", "rollout", "old", "--finish").code == 0
    after = json.loads(cli("fleet", "describe", "old", "-o", "json").stdout)
    assert after["notes"] == [] and after["lifecycle_hook"]["name"] == "mmsctl-server-ready"

    # Rolling on a group without the hook whose version completes it (the rollout above made that version): added.
    aws["asg"].delete_lifecycle_hook(AutoScalingGroupName=green, LifecycleHookName="mmsctl-server-ready")
    hooks.clear()
    again = cli("fleet", "rollout", "old", "-m", "sq2=squeezenet", "--strategy", "rolling", "--dry-run", "-o", "json")
    ops = [c["operation"] for c in json.loads(again.stdout)["calls"] if c.get("executed") is False]
    assert ops.index("PutLifecycleHook") < ops.index("StartInstanceRefresh"), ops
    assert [(h.group, h.name) for h in hooks] == [(green, "mmsctl-server-ready")]  # the version is for its own group


def _reads(aws: dict[str, Any], name: str) -> set[str]:
    """The s3:// models the fleet's role may read where they are (the boot-assets policy's model ARNs)."""
    doc = aws["iam"].get_role_policy(RoleName=f"mmsctl-fleet-{name}", PolicyName="mmsctl-boot-assets")["PolicyDocument"]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    return {r.removeprefix("arn:aws:s3:::") for st in doc["Statement"] for r in st["Resource"]
            if r.startswith("arn:aws:s3:::my-models/")}


@pytest.mark.slow
def test_a_rollout_lets_the_role_read_its_new_s3_models_and_keeps_the_serving_ones(aws: dict[str, Any]) -> None:
    """A member of the new version fetches its s3:// models with the fleet's role: the rollout grants them, and
    keeps the serving group's (its scale-outs and a rollback still boot them); the one before that goes."""
    cli = aws["cli"]
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="my-models")
    for key in ("a.mar", "b.mar", "c.mar"):
        s3.put_object(Bucket="my-models", Key=key, Body=key.encode())
    _create(aws, "rd", "-m", "a=s3://my-models/a.mar", "--min", "1", "--max", "2")
    assert _reads(aws, "rd") == {"my-models/a.mar"}
    first = cli("fleet", "rollout", "rd", "-m", "b=s3://my-models/b.mar", "-o", "json")
    assert first.code == 0, first.stderr
    assert _reads(aws, "rd") == {"my-models/a.mar", "my-models/b.mar"}  # blue still boots a; green boots b
    assert cli("fleet", "rollout", "rd", "--finish").code == 0
    second = cli("fleet", "rollout", "rd", "-m", "c=s3://my-models/c.mar", "-o", "json")
    assert second.code == 0, second.stderr
    assert _reads(aws, "rd") == {"my-models/b.mar", "my-models/c.mar"}  # a's group is gone: a is not kept
    assert cli("fleet", "rollout", "rd", "--finish").code == 0
    assert cli("fleet", "destroy", "rd").code == 0


@pytest.mark.parametrize("args, message", [
    (("--checkpoint-delay", "99h"), "error: --checkpoint-delay '99h' is longer than a day"),
    (("--auto-finish", "soon"), "error: bad --auto-finish 'soon': use a number with s, ms, m or h (10s, 500ms, 2m)"),
    (("--finish", "--rollback"), "error: give only one of --finish, --rollback, --status"),
])
def test_a_bad_rollout_flag_is_named_as_typed_before_aws_is_asked(capsys, args: tuple[str, ...], message: str) -> None:
    """The flag, not the request's field (checkpoint_delay_s); no region needed to be told (nothing is looked up)."""
    from tests.support.cli import run_mmsctl

    r = run_mmsctl(capsys, "fleet", "rollout", "prod", *args)
    assert r.code == 2 and r.stderr.splitlines() == [message], r.stderr
