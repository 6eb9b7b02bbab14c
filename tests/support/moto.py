"""One real moto server on 127.0.0.1 per test process, and the environment that points boto3 at it.

A start costs about 3 s of CPU, so every test package shares the process's one server (the fixtures live in
tests/conftest.py) and each test resets it. The server is moto with one of its bugs fixed (below).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from tests.support._proc import any_free_port
from tests.support.waiting import wait_until

__all__ = ["AMAZON_IMAGE", "FAKE_AWS", "Moto", "moto_skip_reason", "running_moto", "share_client_classes",
           "share_clients"]

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    # Never read the developer's ~/.aws.
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}

#: moto 5 stores the UserData of create_launch_template_version unparsed, and then fails (AssertionError, an
#: XML error to the client) when a group launches from that version (`fleet rollout`). This is moto with that
#: one method fixed the way create_launch_template already parses it. moto also drops CreateAutoScalingGroup's
#: LifecycleHookSpecificationList (AWS adds those hooks "before instances are launched", botocore's model says),
#: and keeps a group's hooks after the group is deleted, so a group made again under the name (a rollout's
#: green after a rollback) would show the old group's: here hooks are made with their group and go with it. And moto lists its own package folder
#: (a listdir and ~150 isdir calls) for every request it routes: ~9 % of its CPU in tests/cloud/test_fleet.py
#: (py-spy); the list never changes while it runs, so it is read once. Everything else is moto as it is.
_PATCHED_MOTO = """
import sys
from moto.ec2.models import launch_templates as lt
from moto.core.types import Base64EncodedString
from moto.ec2.utils import parse_user_data
_create_version = lt.LaunchTemplate.create_version
def create_version(self, data, description):
    data = dict(data)
    if data.get("UserData") is not None and not isinstance(data["UserData"], Base64EncodedString):
        data["UserData"] = parse_user_data(data["UserData"])
    return _create_version(self, data, description)
lt.LaunchTemplate.create_version = create_version
from moto.autoscaling import models as asm, responses as asr
_create_group = asr.AutoScalingResponse.create_auto_scaling_group
def create_auto_scaling_group(self):
    answer = _create_group(self)
    for hook in self._get_params().get("LifecycleHookSpecificationList") or []:
        self.autoscaling_backend.create_lifecycle_hook(
            hook["LifecycleHookName"], self._get_param("AutoScalingGroupName"), hook["LifecycleTransition"],
            int(hook.get("HeartbeatTimeout") or 3600), hook.get("DefaultResult") or "ABANDON")
    return answer
asr.AutoScalingResponse.create_auto_scaling_group = create_auto_scaling_group
_delete_group = asm.AutoScalingBackend.delete_auto_scaling_group
def delete_auto_scaling_group(self, group_name):
    _delete_group(self, group_name)
    for key in [k for k, h in self.lifecycle_hooks.items() if h.auto_scaling_group_name == group_name]:
        del self.lifecycle_hooks[key]
asm.AutoScalingBackend.delete_auto_scaling_group = delete_auto_scaling_group
from moto import backends
_modules = tuple(backends.list_of_moto_modules())
backends.list_of_moto_modules = lambda: iter(_modules)
from moto.server import main
main(sys.argv[1:])
"""


#: The AMIs the server knows. moto's own ~1,300 in us-east-1 (its default, "latest" and ECS-optimized lists) are
#: built again for every backend at each reset, which was most of its CPU in tests/cloud/test_fleet.py; the
#: tests need one Amazon image: the Deep Learning AMI mmsctl picks by default (Ubuntu 22.04, python3 3.10, the
#: wheels' default Python: `ec2 launch` refuses an AMI that says it has another).
_AMIS = [{
    "ami_id": "ami-0e5c3a1b2d4f60789", "name": "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20241001",
    "description": "Supported EC2 instances: G4dn, G5, G6, Gr6, G6e, P4d, P4de, P5, P5e. Release notes: "
                   "https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html",
    "owner_id": "898082745236", "public": True, "state": "available",
    "image_location": "amazon/Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20241001",
    "architecture": "x86_64", "virtualization_type": "hvm", "hypervisor": "xen", "image_type": "machine",
    "root_device_type": "ebs", "root_device_name": "/dev/sda1", "sriov": "simple",
}]
#: The one image the tests' moto knows (a reset keeps it).
AMAZON_IMAGE = _AMIS[0]["ami_id"]


@dataclass
class Moto:
    url: str

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a subprocess that must only ever talk to this moto server."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(FAKE_AWS, AWS_ENDPOINT_URL=self.url, NO_COLOR="1", COLUMNS="200")
        env.update(extra)
        return env

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=10)


def moto_skip_reason() -> Optional[str]:
    """Why moto's server cannot run here, or None."""
    try:
        found = importlib.util.find_spec("moto.server") is not None
    except ImportError:
        found = False
    return None if found else f"moto's server is not installed for {sys.executable} (pip install 'moto[server]')"


def share_client_classes() -> None:
    """Build each boto3 client class once per test process, not once per client.

    Every `mmsctl` command the tests run in-process opens its own session, as a command's process does, and
    botocore builds a new client class for every client (a method and its docstring object for each
    operation, ~700 for EC2): a fifth of the CPU of tests/cloud/test_fleet.py's process (py-spy). A class
    holds only those methods, built from the service's model; the session, credentials, region, endpoint and
    config live in each client (``cls(**client_args)``), so clients of every session can share it. Every
    session here is a boto3 session (mmsctl's and the tests'), whose class hooks are the same.
    """
    from botocore.client import ClientCreator

    if getattr(ClientCreator, "_tests_share_classes", False):
        return
    build = ClientCreator._create_client_class
    built: dict[tuple[str, str], type] = {}

    def create_client_class(self: ClientCreator, service_name: str, service_model: object) -> type:
        key = (service_name, str(getattr(service_model, "api_version", "")))
        if key not in built:
            built[key] = build(self, service_name, service_model)
        return built[key]

    ClientCreator._create_client_class = create_client_class  # type: ignore[method-assign]
    ClientCreator._tests_share_classes = True  # type: ignore[attr-defined]


def share_clients() -> None:
    """Give the in-process commands of a test process the clients an earlier one built with the same settings.

    Each `mmsctl` command run in-process opens its own AwsSession, whose clients botocore builds afresh (its
    endpoint resolver, event hooks and retry handler: ~7 % of the CPU of tests/cloud/test_fleet.py's process
    after :func:`share_client_classes`; py-spy). A client is a stateless caller of one endpoint, so one built for
    the same service, region, timeouts, retries, credentials, profile and ``AWS_*`` settings is the client a new
    session would build; any change to them builds another. mmsctl attaches nothing to its clients (a test's
    botocore Stubber is removed when its block ends).
    """
    from mmsctl.cloud.aws.session import AwsSession

    if getattr(AwsSession, "_tests_share_clients", False):
        return
    build = AwsSession.client
    built: dict[tuple[object, ...], Any] = {}

    def client(self: AwsSession, service: str, region: Optional[str] = None, *, read_timeout: float = 60.0,
               max_attempts: int = 4) -> Any:
        boto = self._boto
        try:
            credentials = boto.get_credentials() if boto is not None else None
        except Exception:  # noqa: BLE001 - a broken credential source: the command's own path reports it
            boto = None
        if boto is None:
            return build(self, service, region, read_timeout=read_timeout, max_attempts=max_attempts)
        key = (service, region or self.region, read_timeout, max_attempts, self.profile,
               credentials.get_frozen_credentials() if credentials is not None else None,
               tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))))
        if key not in built:
            built[key] = build(self, service, region, read_timeout=read_timeout, max_attempts=max_attempts)
        self._clients[(service, region or self.region, read_timeout, max_attempts)] = built[key]
        return built[key]

    AwsSession.client = client  # type: ignore[method-assign]
    AwsSession._tests_share_clients = True  # type: ignore[attr-defined]


def running_moto(log: Path) -> Iterator[Moto]:
    """Start moto's server on a free port, yield it once it answers, stop it after."""
    port = any_free_port()
    amis = log.with_name("amis.json")
    amis.write_text(json.dumps(_AMIS))
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", _PATCHED_MOTO, "-H", "127.0.0.1", "-p", str(port)],
                                stdout=fh, stderr=fh, env={**os.environ, "MOTO_AMIS_PATH": str(amis)})
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
            return True

    try:
        try:
            wait_until(answers, timeout=30, what="moto_server answering",
                       alive=lambda: None if proc.poll() is None else "exited")
        except (TimeoutError, RuntimeError):
            raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}") from None
        yield Moto(url)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
