"""The model (CreateModel): the pinned image, the model data, the environment, the role. Its name is a hash of
them, so an unchanged model is found and reused, and a changed one is a new model beside the old."""

from __future__ import annotations

from typing import Any, Callable, Optional

from mmsctl.cloud.aws.service_role import retry_while_propagating
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.resources import describe
from mmsctl.cloud.sagemaker.spec import model_name
from mmsctl.errors import CloudError

__all__ = ["PROPAGATING", "container", "ensure_model", "propagating"]

#: What SageMaker says while a role change has not reached it: the role cannot be assumed yet, or may not yet pull
#: the image or read the model data (CreateModel), or pull the images (CreateEndpointConfig).
PROPAGATING = ("assume", "access denied for repository", "could not access model data",
               "execution role used to create the model has permissions to access them")


def propagating(t: Target) -> Callable[[CloudError], bool]:
    """Whether a refusal is one of :data:`PROPAGATING`, after this run changed the role (otherwise it is final)."""
    return lambda exc: t.role_changed and any(text in exc.message.lower() for text in PROPAGATING)


def container(image: str, model_data: Optional[str], environment: dict[str, str]) -> dict[str, Any]:
    """The model's PrimaryContainer."""
    found: dict[str, Any] = {"Image": image, "Mode": "SingleModel"}
    if model_data:
        found["ModelDataUrl"] = model_data
    if environment:
        found["Environment"] = dict(sorted(environment.items()))
    return found


def ensure_model(t: Target, primary: dict[str, Any], role_arn: str) -> str:
    """The model's name, created if there is none of it."""
    name = model_name(t.name, primary, role_arn)
    if describe(t.aws, "model", name) is not None:
        t.note("reuse", "model", name)
        return name
    retry_while_propagating(lambda: t.aws.call("sagemaker", "create_model", ModelName=name, PrimaryContainer=primary,
                                               ExecutionRoleArn=role_arn, Tags=t.tag_list("model")),
                            propagating=propagating(t), sleep=t.sleep)
    t.note("create", "model", name)
    return name
