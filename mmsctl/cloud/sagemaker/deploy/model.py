"""The model (CreateModel): the pinned image, the model data, the environment, the role. Its name is a hash of
them, so an unchanged model is found and reused, and a changed one is a new model beside the old."""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.resources import describe
from mmsctl.cloud.sagemaker.spec import model_name
from mmsctl.errors import CloudError

__all__ = ["container", "ensure_model"]

#: A new role reaches SageMaker within seconds (IAM is eventually consistent); CreateModel refuses it until then.
_ROLE_RETRIES = 10


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
    delay = 2.0
    for attempt in range(_ROLE_RETRIES):
        try:
            t.aws.call("sagemaker", "create_model", ModelName=name, PrimaryContainer=primary,
                       ExecutionRoleArn=role_arn, Tags=t.tag_list("model"))
            break
        except CloudError as exc:
            if "assume" not in exc.message.lower() or attempt == _ROLE_RETRIES - 1:
                raise
            t.sleep(delay)
            delay = min(delay * 1.5, 10.0)
    t.note("create", "model", name)
    return name
