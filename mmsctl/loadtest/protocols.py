"""What differs between a context that speaks MMS's API, one that speaks the Open Inference Protocol (v2), and a
SageMaker endpoint (:mod:`~mmsctl.loadtest.sagemaker`: InvokeEndpoint, signed).

``bench`` measures both alike (same sweep, same columns); only four things depend on the protocol:
how the server is pinged and named, how the model is checked before the sweep, which requests the
load generator writes (``POST /predictions/MODEL`` with the raw file, or ``POST /v2/models/MODEL/infer``
with the file as one BYTES element in the binary tensor extension, the bytes ``predict --context``
sends), and whether a no-op model can be put up (v2 has no management API: only when the context
also names an MMS management API, as ``mmsctl serve``'s is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from mmsctl.errors import UsageError
from mmsctl.loadtest.inputs import Body
from mmsctl.loadtest.loadgen import Endpoint, build_posts, build_requests

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.client.contexts import Context
    from mmsctl.loadtest.sweep import Plan

__all__ = ["NoopNeedsManagement", "check_model", "check_noop", "detect", "endpoint", "has_management"]


class NoopNeedsManagement(UsageError):
    """``--noop`` on a v2 context without an MMS management API: nothing can register the no-op model."""

    reference = "bench-noop-v2"


def has_management(context: "Context") -> bool:
    """Whether the context names a management API (a v2 context's defaults to its inference URL: none; a
    SageMaker endpoint has none)."""
    if context.sagemaker:
        return False
    if context.protocol != "v2":
        return True
    return bool(context.management_url) and \
        context.management_url.rstrip("/") != context.inference_url.rstrip("/")


def check_noop(context: "Context") -> None:
    """Refuse ``--noop`` where no management API can register the model (before any server is touched)."""
    if not has_management(context):
        kind = "is a SageMaker endpoint" if context.sagemaker else "speaks the Open Inference Protocol (v2)"
        raise NoopNeedsManagement(
            f"the no-op model needs a management API to register it, and context {context.name!r} {kind}, which "
            "has none", param="noop")


def detect(context: "Context", plan: "Plan") -> str:
    """Ping the server (errors out when it is unreachable or refuses the token) and name its kind."""
    if context.sagemaker:
        from mmsctl.loadtest import sagemaker

        return sagemaker.detect(context, plan)
    if context.protocol == "v2":
        from mmsctl.client.v2 import V2Client

        with V2Client(context, timeout=min(10.0, plan.timeout_s), retries=1) as v2:
            ping = v2.ping()
    else:
        from mmsctl.client.inference import InferenceClient

        with InferenceClient(context, timeout=min(10.0, plan.timeout_s), retries=1,
                             max_response_bytes=plan.max_response_bytes) as client:
            ping = client.ping(detect=True)
    if ping.error is not None:
        raise ping.error
    return ping.server


def check_model(context: "Context", model: str, body: Body, version: Optional[str], plan: "Plan") -> None:
    """One real prediction: an unknown model, a refused token, no answer within the plan's timeout
    or one over its size limit fails here, with the client's error."""
    if context.sagemaker:
        from mmsctl.loadtest import sagemaker

        sagemaker.check(context, body, plan)
        return
    if context.protocol == "v2":
        from mmsctl.client.v2 import V2Client

        with V2Client(context, timeout=plan.timeout_s, retries=0) as v2:
            v2.predict(model, body.data, body.content_type, version=version)
        return
    from mmsctl.client.inference import InferenceClient

    with InferenceClient(context, timeout=plan.timeout_s, retries=0,
                         max_response_bytes=plan.max_response_bytes) as client:
        client.predict(model, body.data, body.content_type, version=version)


def endpoint(context: "Context", model: str, bodies: Sequence[Body], version: Optional[str],
             token: Optional[str]) -> Endpoint:
    """The load generator's requests for *model* on this context, one per body."""
    if context.sagemaker:
        from mmsctl.loadtest import sagemaker

        return sagemaker.endpoint(context, bodies, version)
    if context.protocol != "v2":
        return build_requests(context.inference_url, model, [(b.data, b.content_type) for b in bodies],
                              token=token, version=version)
    from mmsctl.client.v2 import V2Client, infer_path

    with V2Client(context, timeout=30.0, retries=1) as v2:
        posts = v2.infer_requests(model, [b.data for b in bodies], version)
    return build_posts(context.inference_url, infer_path(model, version), posts, token=token)
