"""The image the model runs: found in ECR (in the endpoint's region: SageMaker pulls from there alone) and
pinned to its digest, so a new push under the same tag is noticed by the next deploy and never changes a
running endpoint behind its back."""

from __future__ import annotations

from typing import Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.spec import ImageUri, parse_image
from mmsctl.errors import CloudError, UsageError

__all__ = ["MissingImage", "check_image_region", "pin_image"]

_MISSING = ("RepositoryNotFoundException", "ImageNotFoundException")


class MissingImage(UsageError):
    """The image is not in ECR: it has to be built and pushed first (nothing was changed)."""

    reference = "sagemaker-missing-image"


def check_image_region(region: str, uri: str) -> ImageUri:
    """The image's parts, once its region is the endpoint's *region* (unless that is not known: a plan without
    AWS and without --region).

    Raises:
        UsageError: the image is in another region (SageMaker pulls only from the endpoint's own).
    """
    image = parse_image(uri)
    if not region.startswith("<") and image.region != region:
        raise UsageError(f"image {uri} is in {image.region}, the endpoint in {region}: SageMaker pulls only "
                         "from the endpoint's own region", param="image", hint=f"push the image to {region} too")
    return image


def pin_image(t: Target, uri: str) -> tuple[str, ImageUri]:
    """The image as ``…@sha256:…``, and its parts.

    Raises:
        UsageError: the image is in another region.
        MissingImage: no such repository, tag or digest.
    """
    image = check_image_region(t.aws.region, uri)
    if t.aws.unlooked is not None:  # a plan without AWS: the image as given
        return uri, image
    wanted = {"imageDigest": image.digest} if image.digest else {"imageTag": image.tag or "latest"}
    found: Optional[str] = None
    try:
        details = t.aws.call("ecr", "describe_images", registryId=image.account, repositoryName=image.repository,
                             imageIds=[wanted])["imageDetails"]
        found = str(details[0]["imageDigest"]) if details else None
    except CloudError as exc:
        if aws_code(exc) not in _MISSING:
            raise
    if found is None:
        raise MissingImage(f"image {uri} is not in ECR: nothing was changed", param="image")
    return image.pinned(found), image
