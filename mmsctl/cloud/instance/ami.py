"""Which image an instance boots: ``--ami ami-…``, ``--ami resolve:ssm:/param``, or the accelerator's DLAMI.

The default is the Deep Learning AMI's public SSM parameter, read with
GetParameter so the plan shows the real AMI id (RunInstances also accepts
``resolve:ssm:`` itself, but then nobody sees which image was picked).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.instance.accelerators import AcceleratorChoice
from mmsctl.errors import UsageError

__all__ = ["AmiChoice", "AmiParameterNotFound", "SSM_PREFIX", "ami_python", "resolve_ami"]


class AmiParameterNotFound(ResourceNotFound):
    """The SSM parameter that should name the AMI is not there (in this region)."""

    reference = "cloud-ami-parameter-not-found"

SSM_PREFIX = "resolve:ssm:"


@dataclass(frozen=True)
class AmiChoice:
    image_id: str
    source: str  # "given" (an AMI id asked for) or "ssm:<parameter>"
    name: Optional[str] = None
    description: Optional[str] = None


#: The python3 each distribution release ships, as an AMI's name or description states the release: Ubuntu's
#: own images (``ubuntu/images/…/ubuntu-jammy-22.04-amd64-server-…``), Amazon Linux (``al2023-ami-…``,
#: ``amzn2-ami-…``) and the Deep Learning AMIs built on them (``… (Ubuntu 22.04) …``, ``… (Amazon Linux 2023) …``).
_RELEASES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"ubuntu[- ]?(?:\S+-)?18\.04|bionic", re.I), "Ubuntu 18.04", "3.6"),
    (re.compile(r"ubuntu[- ]?(?:\S+-)?20\.04|focal", re.I), "Ubuntu 20.04", "3.8"),
    (re.compile(r"ubuntu[- ]?(?:\S+-)?22\.04|jammy", re.I), "Ubuntu 22.04", "3.10"),
    (re.compile(r"ubuntu[- ]?(?:\S+-)?24\.04|noble", re.I), "Ubuntu 24.04", "3.12"),
    (re.compile(r"amazon linux 2023|\bal2023-ami", re.I), "Amazon Linux 2023", "3.9"),
    (re.compile(r"amazon linux 2(?!\d)|\bamzn2-ami", re.I), "Amazon Linux 2", "3.7"),
)


def ami_python(ami: AmiChoice) -> Optional[tuple[str, str]]:
    """(release, python3 version) the AMI's name or description states, or None when it does not tell."""
    text = " ".join(t for t in (ami.name, ami.description) if t)
    for pattern, release, python in _RELEASES:
        if pattern.search(text):
            return release, python
    return None


def resolve_ami(aws: AwsSession, ami: Optional[str], choice: AcceleratorChoice) -> AmiChoice:
    """The AMI to launch, checked to exist in the session's region."""
    spec = (ami or f"{SSM_PREFIX}{choice.ami_parameter}").strip()
    if spec.startswith(SSM_PREFIX):
        parameter = spec[len(SSM_PREFIX):]
        try:
            image_id = aws.call("ssm", "get_parameter", Name=parameter)["Parameter"]["Value"]
        except ResourceNotFound as exc:
            raise AmiParameterNotFound(f"AMI parameter {parameter} not found in {aws.region}",
                                       hint="give an AMI id (ami-…) or resolve:ssm:/your/parameter") from exc
        source = f"ssm:{parameter}"
    elif spec.startswith("ami-"):
        image_id, source = spec, "given"
    else:
        raise UsageError(f"AMI must be an AMI id (ami-…) or resolve:ssm:/parameter, not {spec!r}", param="ami")
    try:
        images = aws.call("ec2", "describe_images", ImageIds=[image_id])["Images"]
    except ResourceNotFound as exc:
        raise ResourceNotFound(f"AMI {image_id} not found in {aws.region}") from exc
    if not images:
        raise ResourceNotFound(f"AMI {image_id} not found in {aws.region}")
    return AmiChoice(image_id, source, images[0].get("Name"), images[0].get("Description"))
