"""What ``--eia`` and ``--accelerator`` mean: the accelerator, a fitting instance type and its AMI.

Amazon Elastic Inference (EI) stopped onboarding customers on 2023-04-15 and
was retired in April 2024. mmsctl still builds the exact EI request, but warns,
and offers today's choices (Inferentia, NVIDIA T4/A10G, or plain CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mmsctl.cloud.aws.errors import UnsupportedRegion
from mmsctl.errors import UsageError

__all__ = [
    "ACCELERATORS",
    "EI_REGIONS",
    "EI_RETIRED_WARNING",
    "EI_TYPES",
    "AcceleratorChoice",
    "check_ei_region",
    "choose",
    "parse_eia",
]

# The six regions where EI was offered (EI developer guide, "Amazon EI regions").
EI_REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1", "ap-northeast-1", "ap-northeast-2")
EI_TYPES = ("eia1.medium", "eia1.large", "eia1.xlarge", "eia2.medium", "eia2.large", "eia2.xlarge")
EI_RETIRED_WARNING = (
    "Amazon Elastic Inference stopped onboarding new customers on 2023-04-15 and was retired in "
    "April 2024; EC2 will most likely refuse the accelerator. The request is sent exactly as EI "
    "expected it, and the accelerator is recorded in the instance's mmsctl:accelerator tag. "
    "Today's accelerators: inf2, g4dn, g5 or none."
)

# Public SSM parameters with the latest AMI ids (AWS Deep Learning AMI release notes).
DLAMI_GPU_BASE = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
DLAMI_NEURON = "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"


@dataclass(frozen=True)
class AcceleratorChoice:
    """One ``--accelerator`` value: what it attaches, where it runs, and which image boots it."""

    name: str
    instance_type: str
    ami_parameter: str
    ssh_user: str
    description: str
    ei_type: Optional[str] = None  # eia1.medium … for Elastic Inference only

    @property
    def is_ei(self) -> bool:
        return self.ei_type is not None

    @property
    def label(self) -> str:
        """What the mmsctl:accelerator tag records."""
        return self.ei_type or self.name


ACCELERATORS: dict[str, AcceleratorChoice] = {
    "eia": AcceleratorChoice("eia", "m5.large", DLAMI_GPU_BASE, "ubuntu",
                             "Elastic Inference accelerator on a CPU instance (retired April 2024)", "eia1.medium"),
    "inf1": AcceleratorChoice("inf1", "inf1.xlarge", DLAMI_NEURON, "ubuntu", "AWS Inferentia (first generation)"),
    "inf2": AcceleratorChoice("inf2", "inf2.xlarge", DLAMI_NEURON, "ubuntu", "AWS Inferentia2"),
    "g4dn": AcceleratorChoice("g4dn", "g4dn.xlarge", DLAMI_GPU_BASE, "ubuntu", "NVIDIA T4 GPU"),
    "g5": AcceleratorChoice("g5", "g5.xlarge", DLAMI_GPU_BASE, "ubuntu", "NVIDIA A10G GPU"),
    "none": AcceleratorChoice("none", "c5.xlarge", DLAMI_GPU_BASE, "ubuntu", "CPU only"),
}


def parse_eia(value: str) -> str:
    """``medium`` -> ``eia1.medium``; ``eia2.large`` stays; anything else is a usage error."""
    text = value.strip().lower()
    candidate = text if text.startswith("eia") else f"eia1.{text}"
    if candidate not in EI_TYPES:
        raise UsageError(f"unknown Elastic Inference accelerator {value!r}; choose medium, large, xlarge "
                         f"(eia1) or one of: {', '.join(EI_TYPES)}")
    return candidate


def choose(accelerator: Optional[str], eia: Optional[str]) -> AcceleratorChoice:
    """The choice for ``--accelerator``/``--eia`` (``--eia X`` is ``--accelerator eia`` of type X)."""
    name = (accelerator or ("eia" if eia else "none")).strip().lower()
    if name not in ACCELERATORS:
        raise UsageError(f"unknown accelerator {accelerator!r}; choose one of: {', '.join(ACCELERATORS)}")
    if eia and name != "eia":
        raise UsageError(f"Elastic Inference cannot be combined with accelerator {name}",
                         params=("eia", "accelerator"))
    choice = ACCELERATORS[name]
    if name == "eia":
        from dataclasses import replace

        choice = replace(choice, ei_type=parse_eia(eia or "medium"))
    return choice


def check_ei_region(region: str) -> None:
    """Refuse a region where Elastic Inference never existed."""
    if region not in EI_REGIONS:
        raise UnsupportedRegion(
            f"Elastic Inference never existed in {region}; it was offered in {', '.join(EI_REGIONS)}")
