"""What ``mmsctl ec2 launch`` is asked for, and what it made: plain data, checked by :func:`~.launch.launch`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.cloud.aws.network import Placement
from mmsctl.cloud.instance.accelerators import AcceleratorChoice
from mmsctl.cloud.instance.ami import AmiChoice
from mmsctl.cloud.instance.userdata import ModelSpec, ServerKind

__all__ = ["LaunchRequest", "LaunchResult"]


@dataclass
class LaunchRequest:
    """What ``mmsctl ec2 launch`` was asked for."""

    accelerator: AcceleratorChoice
    models: list[ModelSpec] = field(default_factory=list)
    instance_type: Optional[str] = None
    subnet: Optional[str] = None
    key_name: Optional[str] = None
    ami: Optional[str] = None
    count: int = 1
    server: ServerKind = "mmsctl"
    allow_cidrs: list[str] = field(default_factory=list)
    allow_world_ssh: bool = False
    name: Optional[str] = None
    pip_spec: Optional[str] = None
    instance_python: str = "3.10"  # the AMI's python3: the wheelhouse is built for it

    @property
    def uses_assets(self) -> bool:
        """The mmsctl server without a pip spec boots from the asset bucket, not the package index."""
        return self.server == "mmsctl" and not self.pip_spec


@dataclass
class LaunchResult:
    """What a launch made (or, in a dry run, would make)."""

    instances: list[dict[str, Any]]
    ami: AmiChoice
    placement: Placement
    instance_type: str
    accelerator: str
    created: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "instance_type": self.instance_type,
            "accelerator": self.accelerator,
            "ami": {"id": self.ami.image_id, "source": self.ami.source, "name": self.ami.name},
            "subnet": self.placement.subnet_id,
            "vpc": self.placement.vpc_id,
            "availability_zone": self.placement.availability_zone,
            "created": self.created,
            "reused": self.reused,
            "warnings": self.warnings,
        }
