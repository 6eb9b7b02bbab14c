"""AWS's own refusal of one operation, everything else answered by moto: for behaviour moto does not model.

    with refusing("ec2", "CreateVpcEndpoint", "InvalidServiceName", "The Vpc Endpoint Service '…' does not exist"):
        run_cli_here(moto, "ec2", "launch", "--eia", "medium")

Every client an :class:`~mmsctl.cloud.aws.session.AwsSession` hands out for *service* inside the block answers
*operation* with that error code and message, built the way botocore's ``Stubber.add_client_error`` builds it
(a ``before-call`` hook that returns the parsed error, so botocore raises its own ``ClientError`` and mmsctl
translates it as it would AWS's). Unlike a Stubber, the client's other operations still go to moto. The hooks are
removed when the block ends (the tests' sessions share their clients, tests/support/moto.py).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

__all__ = ["refusing"]


@contextlib.contextmanager
def refusing(service: str, operation: str, code: str, message: str, *, status: int = 400) -> Iterator[list[dict]]:
    """Inside the block, *operation* (``CreateVpcEndpoint``) of *service* fails with AWS's *code* and *message*;
    yields the parameters of each refused call."""
    from botocore.awsrequest import AWSResponse

    from mmsctl.cloud.aws.session import AwsSession

    refused: list[dict] = []
    hooked: list[Any] = []

    def answer(params: Any = None, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        refused.append(dict(params.get("body", {})) if isinstance(params, dict) else {})
        return (AWSResponse(None, status, {}, None),
                {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}})

    original = AwsSession.client

    def client(self: AwsSession, name: str, *args: Any, **kwargs: Any) -> Any:
        made = original(self, name, *args, **kwargs)
        if name == service and all(made is not c for c in hooked):
            event = f"before-call.{made.meta.service_model.service_id.hyphenize()}.{operation}"
            made.meta.events.register(event, answer, unique_id="tests-refusing")
            hooked.append(made)
        return made

    AwsSession.client = client  # type: ignore[method-assign]
    try:
        yield refused
    finally:
        AwsSession.client = original  # type: ignore[method-assign]
        for made in hooked:
            event = f"before-call.{made.meta.service_model.service_id.hyphenize()}.{operation}"
            made.meta.events.unregister(event, unique_id="tests-refusing")
