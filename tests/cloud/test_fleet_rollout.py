"""`mmsctl fleet rollout` on a moto server: a new launch template version, a second group on it behind the
same target group, --finish, --rollback, refusal of a second rollout; the rolling strategy by its exact calls."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from tests.cloud.test_fleet import _asg, _create, _tg, aws, cli  # noqa: F401 - fixtures

BLUE, GREEN = "mmsctl-fleet-ro", "mmsctl-fleet-ro-green"


def _group(aws: dict[str, Any], name: str) -> dict[str, Any]:
    found = aws["asg"].describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return found[0] if found else {}


def _user_data(aws: dict[str, Any], template_id: str, version: str) -> str:
    data = aws["ec2"].describe_launch_template_versions(LaunchTemplateId=template_id, Versions=[version])
    raw = base64.b64decode(data["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"])
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()


def test_blue_green_rollout_finish_rollback_and_refusal(aws: dict[str, Any]) -> None:
    cli = aws["cli"]
    _create(aws, "ro", "-m", "squeezenet", "--min", "1", "--max", "3", "--warm-pool", "1")
    tg_arn = _tg(aws, "ro")["TargetGroupArn"]
    proc = cli("fleet", "rollout", "ro", "-m", "squeezenet", "-m", "sq2=squeezenet", "-o", "json")
    assert proc.code == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["state"], out["from_version"], out["to_version"], out["group"]) == ("shifted", "1", "2", GREEN)
    assert "sq2" in _user_data(aws, out["template"], "2") and "sq2" not in _user_data(aws, out["template"], "1")
    green, blue = _group(aws, GREEN), _group(aws, BLUE)
    assert green["TargetGroupARNs"] == [tg_arn] and blue["TargetGroupARNs"] == []  # traffic shifted
    assert green["LaunchTemplate"]["Version"] == "2" and blue["LaunchTemplate"]["Version"] == "1"  # blue pinned
    assert aws["asg"].describe_warm_pool(AutoScalingGroupName=GREEN)["WarmPoolConfiguration"]["MinSize"] == 1
    assert aws["asg"].describe_policies(AutoScalingGroupName=GREEN)["ScalingPolicies"]
    ids = {i["InstanceId"] for i in green["Instances"]}
    healthy = aws["elb"].describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"]
    assert ids and ids <= {h["Target"]["Id"] for h in healthy if h["TargetHealth"]["State"] == "healthy"}

    again = cli("fleet", "rollout", "ro", "-m", "squeezenet")
    assert again.code != 0 and "has a rollout in progress" in again.stderr and "--finish" in again.stderr
    status = json.loads(cli("fleet", "rollout", "ro", "--status", "-o", "json").stdout)
    assert status["state"] == "shifted" and [g["group"] for g in status["groups"]] == [GREEN, BLUE]

    back = cli("fleet", "rollout", "ro", "--rollback", "-o", "json")
    assert back.code == 0, back.stderr
    assert _group(aws, GREEN) == {} and _group(aws, BLUE)["TargetGroupARNs"] == [tg_arn]
    assert json.loads(cli("fleet", "rollout", "ro", "--status", "-o", "json").stdout)["state"] == "none"

    # roll out again (to the green name), then finish: the old blue group goes, green serves alone
    assert cli("fleet", "rollout", "ro", "-m", "squeezenet", "-m", "sq3=squeezenet").code == 0
    done = cli("fleet", "rollout", "ro", "--finish", "-o", "json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["deleted_group"] == BLUE and _group(aws, BLUE) == {}
    desc = json.loads(cli("fleet", "describe", "ro", "-o", "json").stdout)
    assert desc["models"] == "squeezenet,sq3=squeezenet" and desc["drift"] == []
    assert {i["template_version"] for i in desc["instances"]} == {"3"}
    nothing = cli("fleet", "rollout", "ro", "--finish")
    assert nothing.code != 0 and "no rollout in progress" in nothing.stderr
    gone = cli("fleet", "destroy", "ro", "-o", "json")
    assert gone.code == 0, gone.stderr and _group(aws, GREEN) == {}
