"""The boot script: valid bash, models quoted once, the right server installed, bad locations refused."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mmsctl.cloud.instance.userdata import (
    EC2_USER_DATA_LIMIT,
    READY_WAIT_S,
    AssetsRef,
    LifecycleHook,
    UserDataSpec,
    agent_source,
    parse_models,
    render_user_data,
)
from mmsctl.errors import UsageError

URL = "https://bucket.s3.amazonaws.com/r18.mar?X-Amz-Signature=ab%2Fcd&X-Amz-Expires=86400"


def _bash_syntax_ok(script: str) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not installed")
    proc = subprocess.run([bash, "-n"], input=script, text=True, capture_output=True, timeout=10)
    assert proc.returncode == 0, proc.stderr


def test_mmsctl_script_installs_and_serves_under_systemd() -> None:
    script = render_user_data(UserDataSpec(models=parse_models(["squeezenet", f"r18={URL}"]),
                                           accelerator="eia1.medium", version="9.9.9"))
    _bash_syntax_ok(script)
    assert script.startswith("#!/bin/bash\n")
    assert '"$VENV/bin/pip" install mmsctl==9.9.9' in script
    # Presigned URLs carry & and %: quoted once, inside a file systemd runs without re-parsing.
    assert f"--models squeezenet=squeezenet --models 'r18={URL}'" in script
    assert "ExecStart=/opt/mmsctl/run-server.sh" in script
    assert "systemctl enable --now mmsctl.service" in script
    assert "--inference-address http://0.0.0.0:8080 --management-address http://127.0.0.1:8081" in script
    assert "amazonei_mxnet" in script  # says honestly what EI would need


def test_mms_script_writes_config_and_installs_java() -> None:
    script = render_user_data(UserDataSpec(models=parse_models([f"r18={URL}"]), server="mms"))
    _bash_syntax_ok(script)
    assert "multi-model-server==1.1.11" in script and "openjdk-17-jre-headless" in script
    assert "management_address=http://127.0.0.1:8081" in script
    assert f"--models 'r18={URL}'" in script
    with pytest.raises(UsageError, match="MMS needs an archive URL"):
        render_user_data(UserDataSpec(models=parse_models(["squeezenet"]), server="mms"))


def test_pip_spec_override_is_quoted() -> None:
    script = render_user_data(UserDataSpec(pip_spec="mmsctl @ https://example.com/mmsctl-0.1.0-py3-none-any.whl"))
    assert "install 'mmsctl @ https://example.com/mmsctl-0.1.0-py3-none-any.whl'" in script
    _bash_syntax_ok(script)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("s3://bucket", "an S3 model is s3://bucket/key"),
        ("bad name=squeezenet", "spaces"),
        ("x=$(reboot)", "not a zoo name"),
    ],
)
def test_bad_model_locations_are_refused(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_models([value])


def test_model_names() -> None:
    specs = parse_models(["squeezenet,resnet-18", "https://example.com/models/vgg16.mar"])
    assert [(s.name, s.location) for s in specs] == [
        ("squeezenet", "squeezenet"), ("resnet-18", "resnet-18"), ("vgg16", "https://example.com/models/vgg16.mar")]
    with pytest.raises(UsageError, match="given twice"):
        parse_models(["a=squeezenet", "a=resnet-18"])


def test_wait_for_server_polls_ping() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from mmsctl.cloud.ec2.query import wait_for_server

    hits: list[str] = []

    class Ping(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            hits.append(self.path)
            self.send_response(200 if len(hits) >= 2 else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ping)
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert wait_for_server(url, timeout=30, interval=0.01) is True
        assert hits == ["/ping", "/ping"]
    finally:
        server.shutdown()
        server.server_close()
    now = [0.0]
    assert wait_for_server(url, timeout=3, interval=1, clock=lambda: now[0],
                           sleep=lambda s: now.__setitem__(0, now[0] + s)) is False


def test_without_assets_only_what_the_instance_reaches_itself() -> None:
    """A pip spec (or MMS) installs from the index: a local file or an s3:// model cannot reach the instance."""
    for value, message in (("./model.mar", "a local file is not on the instance"), ("s3://b/m.mar", "s3:// models")):
        with pytest.raises(UsageError, match=message):
            render_user_data(UserDataSpec(models=parse_models([value]), pip_spec="mmsctl==0.1.0"))


def _settings(script: str) -> dict[str, Any]:
    """The agent's boot.json as the script writes it."""
    return dict(json.loads(script.split("boot.json\" <<'MMSCTL_EOF'\n", 1)[1].split("\n", 1)[0]))


def test_with_assets_the_script_fetches_and_installs_without_an_index() -> None:
    models = parse_models(["own=/opt/mmsctl/assets/models/own.mar"])
    script = render_user_data(UserDataSpec(models=models, version="9.9.9", assets=AssetsRef(
        "mmsctl-assets-1-us-east-1", "fleet/p/", "us-east-1", "3.10", "ab" * 32)))
    assert _settings(script)["assets"] == {"bucket": "mmsctl-assets-1-us-east-1", "prefix": "fleet/p/",
                                           "region": "us-east-1", "dest": "/opt/mmsctl/assets",
                                           "manifest_sha256": "ab" * 32}
    assert 'step fetch\npython3 "$APP_DIR/boot.py" fetch' in script
    assert "metadata-token" in agent_source()  # IMDSv2, the instance role's keys
    assert '"$VENV/bin/pip" install --no-index --no-compile --find-links "$APP_DIR/assets/wheelhouse" mmsctl==9.9.9' in script
    assert "pip install --upgrade pip" not in script and "--models own=/opt/mmsctl/assets/models/own.mar" in script
    # the wheels' Python is checked first: a wrong AMI fails in a second, not after the packages
    assert script.index("step python") < script.index("step packages") < script.index("step fetch")
    _bash_syntax_ok(script)


def test_the_script_reports_every_boot_to_the_hook_and_waits_for_readiness() -> None:
    """The agent is carried compressed and unpacks to the agent; boot.json names the hook and what "ready" is;
    the readiness unit is enabled for every later boot; apt waits for the dpkg lock, bounded."""
    import base64
    import gzip

    hook = LifecycleHook("mmsctl-fleet-p", "mmsctl-fleet-p-launching")
    script = render_user_data(UserDataSpec(models=parse_models(["squeezenet"]), lifecycle_hook=hook))
    blob = script.split('base64 -d <<\'MMSCTL_EOF\' | gunzip > "$APP_DIR/boot.py"\n', 1)[1].split("\nMMSCTL_EOF", 1)[0]
    assert gzip.decompress(base64.b64decode(blob)).decode() == agent_source()
    assert _settings(script) == {"console": "/dev/console", "wait_s": READY_WAIT_S, "assets": None,
                                 "hook": {"group": "mmsctl-fleet-p", "name": "mmsctl-fleet-p-launching"},
                                 "ready": "http://127.0.0.1:8080/v2/health/ready"}
    assert "hook mmsctl-fleet-p-launching of group mmsctl-fleet-p" in script  # the header says so
    assert "ExecStart=/usr/bin/env python3 /opt/mmsctl/boot.py ready" in script
    assert "After=network-online.target mmsctl.service" in script
    assert "systemctl enable mmsctl-ready.service\nsystemctl enable --now mmsctl.service" in script
    assert script.rstrip().endswith('python3 "$APP_DIR/boot.py" ready || exit 1')
    assert script.count("apt-get -o DPkg::Lock::Timeout=600 ") == 2
    assert render_user_data(UserDataSpec(models=parse_models(["squeezenet"]))) == render_user_data(
        UserDataSpec(models=parse_models(["squeezenet"])))  # the same spec, the same bytes (gzip without a date)
    mms = render_user_data(UserDataSpec(models=parse_models([f"r18={URL}"]), server="mms"))
    assert _settings(mms)["ready"] == "http://127.0.0.1:8080/ping" and _settings(mms)["hook"] is None
    _bash_syntax_ok(script)


def test_the_largest_script_leaves_room_for_models() -> None:
    """EC2 takes 16 KB of user data: what the script needs besides its models (assets, a hook, MMS's longer
    install lines) leaves most of it to them, and a script over the limit is refused before any AWS call."""
    hook = LifecycleHook("mmsctl-fleet-abcdefghijklmnopqrs-green", "mmsctl-fleet-abcdefghijklmnopqrs-launching")
    assets = AssetsRef("mmsctl-assets-123456789012-ap-southeast-2", "fleet/abcdefghijklmnopqrs/", "ap-southeast-2",
                       "3.12", "ab" * 32)
    bare = max(len(render_user_data(UserDataSpec(assets=assets, lifecycle_hook=hook, accelerator="eia2.xlarge",
                                                 management_host="0.0.0.0")).encode()),
               len(render_user_data(UserDataSpec(server="mms", lifecycle_hook=hook, accelerator="eia2.xlarge")).encode()))
    assert bare < 11 * 1024, bare
    one = parse_models([f"m{'x' * 60}=/opt/mmsctl/assets/models/m{'x' * 60}.mar"])
    with_one = len(render_user_data(UserDataSpec(models=one, assets=assets, lifecycle_hook=hook)).encode())
    per_model = with_one - len(render_user_data(UserDataSpec(assets=assets, lifecycle_hook=hook)).encode())
    assert (EC2_USER_DATA_LIMIT - bare) // per_model >= 25  # long names: 25 models at least
    many = parse_models([f"m{i}{'x' * 60}=/opt/mmsctl/assets/models/m{i}.mar" for i in range(60)])
    with pytest.raises(UsageError, match="EC2 allows 16384"):
        render_user_data(UserDataSpec(models=many, assets=assets, lifecycle_hook=hook))


def test_the_printed_script_is_the_assets_form_unless_a_pip_spec(capsys, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`user-data` prints what launch and create send: the assets fetched from a placeholder bucket and prefix,
    pip with no index; with --pip-spec, the package index and the zoo name as given. A local model that is not
    there is refused, as launch refuses it."""
    from tests.support.cli import run_mmsctl

    monkeypatch.chdir(tmp_path)
    assert run_mmsctl(capsys, "fleet", "user-data", "-m", "own=./own.mar").code == 3
    (tmp_path / "own.mar").write_bytes(b"PK")
    fleet = run_mmsctl(capsys, "fleet", "user-data", "-m", "squeezenet", "-m", "own=./own.mar")
    assert fleet.code == 0, fleet.stderr
    assert _settings(fleet.stdout)["assets"] == {"bucket": "<asset-bucket>", "prefix": "fleet/<name>/",
                                                 "region": "<region>", "dest": "/opt/mmsctl/assets",
                                                 "manifest_sha256": "<manifest-sha256>"}
    assert "--models own=/opt/mmsctl/assets/models/own.mar" in fleet.stdout
    assert '--no-index --no-compile --find-links "$APP_DIR/assets/wheelhouse"' in fleet.stdout
    _bash_syntax_ok(fleet.stdout)
    ec2 = run_mmsctl(capsys, "ec2", "user-data", "-m", "squeezenet")
    assert _settings(ec2.stdout)["assets"]["prefix"] == "ec2/<name>/"
    index = run_mmsctl(capsys, "ec2", "user-data", "-m", "squeezenet", "--pip-spec", "mmsctl==0.1.0")
    assert index.code == 0 and "--models squeezenet=squeezenet" in index.stdout
    assert "<asset-bucket>" not in index.stdout and "--no-index" not in index.stdout
