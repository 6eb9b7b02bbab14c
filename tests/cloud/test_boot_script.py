"""The boot script an instance runs, run for real (tests/support/boot_run.py): from moto's S3, with every
package index unreachable, it installs mmsctl from the wheelhouse, fetches the user's own archive with the
role's keys (IMDSv2), starts the server under the `systemctl` shim, waits until it is ready and reports the
boot: the instance's `mmsctl:boot` tag (in moto, through a stand-in that checks the signature) and the fleet's
lifecycle action (CONTINUE; the stand-in checks the SigV4 signature as AWS does). Then the instance boots again
as a warm pool's does (no user data: only the units it enabled) and serves and reports again; and a boot that
fails at a step reports that step and its log line and ABANDONs the action.

The dependencies' wheels are downloaded at set-up (`make test` runs scripts/boot_wheels.py, with the index, as it
installs the reference servers; ~/.cache/mmsctl-test-wheelhouse); the test builds this checkout's wheel offline and
reaches nothing beyond 127.0.0.1, and the boot itself is cut off from every index.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import boto3
import httpx
import pytest

from mmsctl.cloud.instance.userdata import LifecycleHook
from tests.cloud.conftest import FAKE_AWS, Moto
from tests.cloud.conftest import run_cli_here as run_cli
from tests.cloud.lambda_support import noop_mar
from tests.support.boot_run import BootRun, boot, boot_again, build_test_wheelhouse, endpoints, paths_in, run_script, stop
from tests.support.boot_standins import serving_imds, serving_query_api
from tests.support.moto import AMAZON_IMAGE

KEYS = {"AccessKeyId": FAKE_AWS["AWS_ACCESS_KEY_ID"], "SecretAccessKey": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
        "Token": FAKE_AWS["AWS_SESSION_TOKEN"]}
HOOK = LifecycleHook("mmsctl-fleet-boot", "mmsctl-fleet-boot-launching")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("bash") is None:
        pytest.skip("the boot script needs bash")
    try:
        return build_test_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    stop(tmp_path)


@pytest.fixture
def instance(moto: Moto) -> Iterator[dict[str, Any]]:
    """An mmsctl instance in moto, and what EC2 gives it: the metadata service (its id, the role's keys) and the
    Query APIs its agent reports to (CreateTags goes on to moto)."""
    [made] = boto3.client("ec2").run_instances(ImageId=AMAZON_IMAGE, MinCount=1, MaxCount=1, TagSpecifications=[
        {"ResourceType": "instance", "Tags": [{"Key": "mmsctl:managed", "Value": "true"},
                                              {"Key": "mmsctl:component", "Value": "instance"}]}])["Instances"]
    with serving_imds(KEYS, instance_id=made["InstanceId"]) as imds, \
            serving_query_api(KEYS, ec2_url=moto.url) as api:
        yield {"id": made["InstanceId"], "imds": imds, "api": api}


def _boot_tag(moto: Moto, instance_id: str) -> str:
    """What `mmsctl ec2 list` shows of the instance's boot."""
    listed = run_cli(moto, "ec2", "list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    return str({r["id"]: r for r in json.loads(listed.stdout)}[instance_id]["boot"])


def _lifecycle(api: Any) -> list[str]:
    return [c["LifecycleActionResult"] for c in api.actions("CompleteLifecycleAction")
            if (c["AutoScalingGroupName"], c["LifecycleHookName"]) == (HOOK.group, HOOK.name)]


@pytest.mark.slow  # installs mmsctl and its dependencies into a fresh virtualenv
def test_an_instance_boots_reports_and_boots_again_from_what_it_installed(
        moto: Moto, wheels: Path, root: Path, instance: dict[str, Any],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from mmsctl.cloud.aws.session import open_session

    archive = noop_mar(tmp_path_factory.mktemp("mine"), "mine")
    api = instance["api"]
    run = boot(open_session(), root, [f"mine={archive}"], wheels, s3_endpoint=moto.url, imds_endpoint=instance["imds"],
               query_endpoint=api.url, hook=HOOK)
    assert run.returncode == 0, run.log[-4000:]
    assert "mmsctl-init: fetched" in run.log and "server ready" in run.log
    assert not [c for c in run.calls if c.startswith(("apt-get", "dnf", "useradd"))], run.calls  # nothing from outside
    assert (root / "opt" / "assets" / "models" / "mine.mar").read_bytes() == archive.read_bytes()
    venv = root / "opt" / "venv"
    assert list(venv.glob("lib/python3*/site-packages/mmsctl")), "mmsctl installed from the wheelhouse"

    assert httpx.get(f"{run.inference_url}/v2/health/ready", timeout=10).status_code == 200
    answer = httpx.post(f"{run.inference_url}/predictions/mine", content=b"hello", timeout=30)
    assert answer.status_code == 200, answer.text
    models = httpx.get(f"{run.management_url}/models", timeout=10).json()["models"]
    assert [m["modelName"] for m in models] == ["mine"]
    # Reported once the server was ready: every call signed for its service, the tag in EC2, CONTINUE.
    assert [c.refused for c in api.calls] == [None, None]
    assert _lifecycle(api) == ["CONTINUE"] and _boot_tag(moto, instance["id"]) == "ready"
    assert "systemctl enable mmsctl-ready.service" in run.calls

    _boots_again(moto, root, run, instance)
    _never_ready(moto, root, run, instance)


def _boots_again(moto: Moto, root: Path, run: BootRun, instance: dict[str, Any]) -> None:
    """Stopped and started again (a warm pool's instance leaving the pool): systemd starts what the boot enabled,
    the server serves from what was installed, and the new lifecycle wait is completed again."""
    stop(root)
    installed = (root / "opt" / "venv").stat().st_mtime_ns
    boot_tag_calls = len(instance["api"].actions("CreateTags"))
    report = boot_again(root, run)
    assert "server ready" in report and "CONTINUE mmsctl-fleet-boot-launching" in report, report
    assert httpx.get(f"{run.inference_url}/v2/health/ready", timeout=10).status_code == 200
    assert _lifecycle(instance["api"]) == ["CONTINUE", "CONTINUE"]
    assert len(instance["api"].actions("CreateTags")) == boot_tag_calls + 1
    log = (root / "init.log").read_text()
    assert log.count("mmsctl-init: installed") == 1 and log.count("mmsctl-init: start") == 1  # no user data again
    assert (root / "opt" / "venv").stat().st_mtime_ns == installed


def _never_ready(moto: Moto, root: Path, run: BootRun, instance: dict[str, Any]) -> None:
    """A boot whose server never gets ready (here it does not start at all): the report says so after its wait,
    tags the step and ABANDONs the action."""
    stop(root)
    settings = root / "opt" / "boot.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "wait_s": 1}))
    (root / "shim-state" / "enabled").write_text("mmsctl-ready.service\n")  # the server's unit is not started
    report = boot_again(root, run)
    assert "FAILED at server: not ready (GET http://127.0.0.1:" in report, report
    assert _lifecycle(instance["api"]) == ["CONTINUE", "CONTINUE", "ABANDON"]
    assert _boot_tag(moto, instance["id"]).startswith("failed: server: not ready (GET http://127.0.0.1:")
    assert "mmsctl-init: FAILED at server" in (root / "console").read_text()


def _tampered_manifest(moto: Moto, root: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Assets staged, then the manifest in S3 replaced by someone who may write to the bucket."""
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.instance.assets import assets_ref, plan_assets, stage_assets
    from mmsctl.cloud.instance.userdata import parse_models

    aws = open_session()
    wheels = root / "wheels"
    wheels.mkdir()
    (wheels / "dep-1.0-py3-none-any.whl").write_bytes(b"wheel")
    plan = plan_assets(parse_models([f"own={noop_mar(root, 'own')}"]), "fleet/boot/", wheelhouse=wheels,
                       paths=paths_in(root))
    ref = assets_ref(aws, plan, f"{os.sys.version_info.major}.{os.sys.version_info.minor}")
    stage_assets(aws, plan, ref.python, [], [])
    key = f"{ref.prefix}manifests/{ref.manifest_sha256}.json"
    boto3.client("s3").put_object(Bucket=ref.bucket, Key=key, Body=plan.manifest().replace(b"own.mar", b"evil.mar"))
    return {**spec, "models": plan.models, "assets": ref}


def _other_python(moto: Moto, root: Path, spec: dict[str, Any]) -> dict[str, Any]:
    from mmsctl.cloud.instance.userdata import AssetsRef

    return {**spec, "assets": AssetsRef("b", "fleet/boot/", "us-east-1", "3.9", "0" * 64)}


@pytest.mark.parametrize(("case", "shim_env", "step", "line"), [
    # apt waits for the dpkg lock (bounded), then its refusal is the line
    ("apt-locked", {"SHIM_NO_VENV": "1", "SHIM_APT_LOCKED": "1"}, "packages",
     "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?"),
    ("tampered-manifest", {}, "fetch", "does not match the sha256 in the user data"),
    ("other-python", {}, "python", "the wheels are for Python 3.9, this AMI's python3 is Python 3."),
])
def test_a_failing_boot_shows_its_step_and_line_and_abandons(
        moto: Moto, root: Path, instance: dict[str, Any], case: str, shim_env: dict[str, str], step: str,
        line: str) -> None:
    from mmsctl.cloud.instance.userdata import UserDataSpec, render_user_data

    spec: dict[str, Any] = {"pip_spec": "mmsctl==0.1.0"}
    if case == "tampered-manifest":
        spec = _tampered_manifest(moto, root, {})
    elif case == "other-python":
        spec = _other_python(moto, root, {})
    script = render_user_data(UserDataSpec(**spec, paths=paths_in(root), lifecycle_hook=HOOK, test_endpoints=endpoints(
        s3=moto.url, imds=instance["imds"], query=instance["api"].url)))
    run = run_script(root, script, shim_env=shim_env, timeout=120)
    assert run.returncode != 0, run.log[-3000:]
    assert f"mmsctl-init: FAILED at {step}: " in run.log and line in run.log.split("FAILED at", 1)[1], run.log[-3000:]
    assert f"mmsctl-init: FAILED at {step}: " in (root / "console").read_text()
    assert _lifecycle(instance["api"]) == ["ABANDON"] and [c.refused for c in instance["api"].calls] == [None, None]
    tag = _boot_tag(moto, instance["id"])
    assert tag.startswith(f"failed: {step}: ") and line[:60] in tag and "mmsctl-init" not in tag, tag
    if case == "apt-locked":
        assert run.calls[0] == "apt-get -o DPkg::Lock::Timeout=600 update -y", run.calls
        assert not (root / "opt" / "venv").exists()
