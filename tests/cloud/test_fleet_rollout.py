"""`mmsctl fleet rollout` on a moto server: a new launch template version, a second group on it behind the
same target group, --finish, --rollback, refusal of a second rollout; the rolling strategy by its exact calls."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

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
    from mmsctl.cli.fleet_rollout import persist_command

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


def test_rolling_strategy_is_an_instance_refresh(aws: dict[str, Any]) -> None:
    """moto has no instance refresh: the exact call is checked with botocore's Stubber (that call only), and the
    whole rolling rollout as a dry run on moto (reads real, changes listed, none made)."""
    from botocore.stub import Stubber

    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.fleet.rollout import start_refresh

    session = open_session()
    with Stubber(session.client("autoscaling")) as stub:
        stub.add_response("start_instance_refresh", {"InstanceRefreshId": "ir-1"}, {
            "AutoScalingGroupName": "g", "Strategy": "Rolling",
            "DesiredConfiguration": {"LaunchTemplate": {"LaunchTemplateId": "lt-1", "Version": "4"}},
            "Preferences": {"MinHealthyPercentage": 75, "CheckpointPercentages": [50, 100], "AutoRollback": True,
                            "SkipMatching": True}})
        assert start_refresh(session, "g", "lt-1", "4", 75) == "ir-1"
        stub.assert_no_pending_responses()

    cli = aws["cli"]
    _create(aws, "rr", "-m", "squeezenet", "--min", "1")
    proc = cli("fleet", "rollout", "rr", "-m", "squeezenet", "--strategy", "rolling", "--dry-run", "-o", "json")
    assert proc.code == 0, proc.stderr
    calls = [c for c in json.loads(proc.stdout)["calls"] if c.get("executed") is False]
    ops = [c["operation"] for c in calls]
    assert ops == ["UpdateAutoScalingGroup", "CreateLaunchTemplateVersion", "StartInstanceRefresh"], ops
    refresh = calls[-1]["parameters"]
    assert refresh["AutoScalingGroupName"] == "mmsctl-fleet-rr"
    assert refresh["Preferences"]["MinHealthyPercentage"] == 90 and refresh["Preferences"]["AutoRollback"] is True
    assert _group(aws, "mmsctl-fleet-rr")["LaunchTemplate"]["Version"] == "$Latest"  # nothing changed
    bad = cli("fleet", "rollout", "rr", "-m", "squeezenet", "--strategy", "canary")
    assert bad.code == 2 and "unknown rollout strategy 'canary'" in bad.stderr and "--strategy" in bad.stderr


def test_register_persist_is_a_rollout_of_the_templates_models_plus_the_new_one(aws: dict[str, Any], capsys) -> None:
    """`models register --persist` on a fleet's context: what the members were told goes into the template too
    (the fan-out itself reaches the members' private addresses, which tests do not; the rollout is shown here)."""
    from mmsctl.cli.fleet_rollout import persist_model

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
