"""What an mmsctl model-server instance boots: AMI, instance type, boot script and accelerator request.

Shared by ``ec2 launch`` (RunInstances parameters) and ``fleet create`` (the same
parameters in a launch template), so both start exactly the same server.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.instance.accelerators import EI_RETIRED_WARNING, AcceleratorChoice, check_ei_region
from mmsctl.cloud.instance.ami import AmiChoice, ami_python, resolve_ami
from mmsctl.cloud.instance.userdata import (
    READY_PATHS,
    AssetsRef,
    LifecycleHook,
    ModelSpec,
    ServerKind,
    UserDataSpec,
    render_user_data,
)
from mmsctl.errors import UsageError

__all__ = ["INFERENCE_PORT", "MANAGEMENT_PORT", "AmiPythonMismatch", "METADATA_OPTIONS", "READY_PATH", "ServerImage", "server_image"]

INFERENCE_PORT = 8080
MANAGEMENT_PORT = 8081
#: IMDSv2 only (a stolen-credential SSRF cannot read the role's keys with a plain GET).
METADATA_OPTIONS = {"HttpTokens": "required", "HttpEndpoint": "enabled"}
#: The mmsctl server's readiness: 200 only when every model it serves has a READY worker. It names no
#: model, so one check holds for any model set (a rollout's old and new groups share one target group).
#: The boot's agent waits for the same answer before it reports the instance ready.
READY_PATH = READY_PATHS["mmsctl"]


@dataclass(frozen=True)
class ServerImage:
    """One instance's boot: which image, which type, which script, which accelerator."""

    ami: AmiChoice
    instance_type: str
    accelerator: AcceleratorChoice
    user_data: str
    warnings: list[str] = field(default_factory=list)

    def ei_request(self) -> list[dict[str, Any]]:
        """``ElasticInferenceAccelerators`` for RunInstances or a launch template ([] without EI)."""
        return [{"Type": self.accelerator.ei_type, "Count": 1}] if self.accelerator.is_ei else []

    def user_data_base64(self) -> str:
        """The script as a launch template wants it (RunInstances base64-encodes it itself)."""
        return base64.b64encode(self.user_data.encode("utf-8")).decode("ascii")


def server_image(
    aws: AwsSession,
    accelerator: AcceleratorChoice,
    *,
    models: list[ModelSpec],
    server: ServerKind = "mmsctl",
    ami: Optional[str] = None,
    instance_type: Optional[str] = None,
    pip_spec: Optional[str] = None,
    management_host: str = "127.0.0.1",
    assets: Optional[AssetsRef] = None,
    lifecycle_hook: Optional[LifecycleHook] = None,
) -> ServerImage:
    """Check the accelerator's region, render the boot script, and resolve the AMI.

    The script is rendered before any AWS call, so a bad ``--models``/``--server``
    combination fails before anything is created.

    Raises:
        UnsupportedRegion: Elastic Inference asked for where it never existed.
        UsageError: models the server cannot load (``--server mms`` with zoo names), a script over 16 KB, an AMI
            whose name or description states another Python than the wheels' (the boot would fail).
        ResourceNotFound: the AMI or its SSM parameter is not there.
    """
    warnings: list[str] = []
    if accelerator.is_ei:
        if aws.unlooked is None or not aws.region.startswith("<"):  # a plan without a region cannot check it
            check_ei_region(aws.region)
        warnings.append(EI_RETIRED_WARNING)
    user_data = render_user_data(UserDataSpec(
        models=models, server=server, accelerator=accelerator.label, pip_spec=pip_spec,
        inference_port=INFERENCE_PORT, management_port=MANAGEMENT_PORT, management_host=management_host,
        assets=assets, lifecycle_hook=lifecycle_hook,
    ))
    choice = resolve_ami(aws, ami, accelerator)
    if assets is not None and aws.unlooked is None:
        warnings += _check_python(choice, assets.python)
    return ServerImage(choice, instance_type or accelerator.instance_type, accelerator, user_data, warnings)


def _check_python(ami: AmiChoice, python: str) -> list[str]:
    """Refuse an AMI that states another python3 than the wheels'; a warning when it does not say."""
    stated = ami_python(ami)
    named = f"AMI {ami.image_id}" + (f" ({ami.name})" if ami.name else "")
    if stated is None:
        return [f"{named} does not say which Python it has; the boot checks that its python3 is {python}, the "
                "wheels' Python, and fails at its first step if not"]
    release, found = stated
    if found != python:
        raise AmiPythonMismatch(f"{named} is {release}, whose python3 is {found}; the wheels are for {python}",
                                found, params=("instance_python", "ami"))
    return []


class AmiPythonMismatch(UsageError):
    """The AMI states another python3 than the wheels are built for (*found*: that Python); the CLI's hint names
    the flag that fixes it."""

    reference = "cloud-ami-python"

    def __init__(self, message: str, found: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.found = found
