"""The image the function runs: our ECR repository made or updated, and the tag pinned to its digest."""

from __future__ import annotations

from typing import Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.ecr import repository_uri
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.cloud.lambda_.repository import ensure_repository
from mmsctl.errors import CloudError, UsageError

__all__ = ["MissingImage", "ensure_image", "find_image"]


class MissingImage(UsageError):
    """The function's image is not in ECR: it has to be built and pushed first (nothing was changed)."""

    reference = "lambda-missing-image"

    def __init__(self, message: str, *, function: str, hint: Optional[str] = None) -> None:
        super().__init__(message, hint=hint)
        #: The function whose image is missing.
        self.function = function


def find_image(t: Target) -> str:
    """The image URI the function will run, checked with reads only (before deploy changes anything).

    One in our repository, or in another repository of this account and region, must exist;
    a tag is pinned to its digest, so a new push under the same tag is noticed (Lambda
    resolves a tag only when the code is set).

    Raises:
        MissingImage: no such repository or image (a dry run only warns).
    """
    repo = names.repository_name(t.name)
    uri = t.spec.image or f"{repository_uri(t.account, t.aws.region, repo)}:latest"
    parsed = names.ecr_uri(uri)
    if parsed is None or (parsed[0], parsed[1]) != (t.account, t.aws.region) or parsed[3] is None:
        return uri  # another account's or region's image (Lambda checks it), or a digest already
    try:
        found = t.aws.call("ecr", "describe_images", repositoryName=parsed[2], imageIds=[{"imageTag": parsed[3]}])
    except CloudError as exc:
        if aws_code(exc) not in ("ImageNotFoundException", "RepositoryNotFoundException"):
            raise
        hint = f"build the image of {t.name} and push it to {parsed[2]} first"
        if not t.aws.dry_run:
            raise MissingImage(f"no image {uri} in ECR", function=t.name, hint=hint) from exc
        t.spec.warnings.append(f"no image {uri} in ECR yet ({hint})")
        return uri
    digest = found["imageDetails"][0]["imageDigest"]
    return f"{uri.rsplit(':', 1)[0]}@{digest}"


def ensure_image(t: Target, uri: str) -> None:
    """Our repository's pull policy for this function, when the image is in our repository."""
    parsed = names.ecr_uri(uri.split("@", 1)[0] if "@" in uri else uri)
    repo = names.repository_name(t.name)
    if t.spec.image is not None and (parsed is None or parsed[2] != repo):
        return  # an image from another repository: nothing of ours to manage
    action, _ = ensure_repository(t.aws, t.name)
    t.note(action, "ecr-repository", repo)
