"""What an endpoint runs now: its configuration's models, their images and model data. Read before a change, so
the role may still serve the old fleet while the new one starts, and so what the change replaced can be
removed once the endpoint runs the new configuration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.sagemaker.resources import describe
from mmsctl.cloud.sagemaker.spec import parse_image

__all__ = ["Running", "running"]


@dataclass
class Running:
    """An endpoint configuration and what its variants run."""

    config: Optional[str] = None
    models: list[str] = field(default_factory=list)
    #: ``ACCOUNT/REPOSITORY`` of each image, and ``s3://…`` of each model data object.
    repositories: list[str] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)
    variants: list[dict[str, Any]] = field(default_factory=list)


def running(aws: AwsSession, config: Optional[str]) -> Running:
    """What configuration *config* runs (empty when there is none, or it is gone)."""
    found = Running(config)
    described = describe(aws, "endpoint-config", config) if config else None
    if described is None:
        return found
    found.variants = list(described.get("ProductionVariants") or [])
    for variant in found.variants:
        name = str(variant.get("ModelName", ""))
        model = describe(aws, "model", name) if name else None
        found.models.append(name)
        container = (model or {}).get("PrimaryContainer") or {}
        image = container.get("Image")
        if image:
            try:
                parts = parse_image(str(image))
            except Exception:  # noqa: BLE001 - an image that is not ECR's needs no pull permission of ours
                parts = None
            if parts is not None:
                found.repositories.append(f"{parts.account}/{parts.repository}")
        if container.get("ModelDataUrl"):
            found.objects.append(str(container["ModelDataUrl"]))
    return found
