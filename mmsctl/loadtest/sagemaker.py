"""``bench --context sagemaker:NAME``: the load generator aimed at a SageMaker endpoint's runtime API.

The requests are InvokeEndpoint's own (``POST /endpoints/NAME/invocations`` on sagemaker-runtime, the file
with its content type), signed once with Signature Version 4 (service ``sagemaker``) when the sweep starts and
then replayed, so the generator stays as cheap per request as against any server. AWS takes a signed request
within 5 minutes of its timestamp ("Signature Version 4 signing process": the request date): a sweep that could
run longer is refused before it starts. The endpoint must be InService; one real invocation checks the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence
from urllib.parse import quote

from mmsctl.errors import UsageError
from mmsctl.loadtest.inputs import Body
from mmsctl.loadtest.loadgen import Endpoint, build_posts

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.client.contexts import Context
    from mmsctl.loadtest.sweep import Plan

__all__ = ["MAX_SWEEP_S", "check", "detect", "endpoint"]

#: The longest sweep whose signed requests AWS still takes at its end (5 minutes, a margin kept).
MAX_SWEEP_S = 270.0


def _session(context: "Context") -> Any:
    from mmsctl.cloud.aws.session import open_session

    return open_session(region=context.region, local_service="sagemaker-runtime")


def detect(context: "Context", plan: "Plan") -> str:
    """The endpoint is InService (else an error saying its status), and the sweep fits the signatures' life."""
    from mmsctl.cloud.sagemaker.query import EndpointNotFound
    from mmsctl.cloud.sagemaker.resources import describe
    from mmsctl.errors import CloudError

    each = (plan.duration_s or 0.0) + plan.warmup_s
    if plan.requests is None and each * len(plan.levels) > MAX_SWEEP_S:
        raise UsageError(f"a sweep of {len(plan.levels)} levels of {each:g} s runs past the 5 minutes a signed "
                         "request is good for", param="duration", hint="run fewer or shorter levels")
    aws = _session(context)
    assert context.sagemaker is not None
    found = describe(aws, "endpoint", context.sagemaker)
    if found is None:
        raise EndpointNotFound(context.sagemaker, aws.region)
    if found.get("EndpointStatus") != "InService":
        raise CloudError(f"endpoint {context.sagemaker} is {found.get('EndpointStatus')}, not InService")
    return "sagemaker"


def check(context: "Context", body: Body, plan: "Plan") -> None:
    """One real invocation: a model that refuses the input fails here, with its answer."""
    from mmsctl.cloud.sagemaker.invoke import invoke_endpoint

    assert context.sagemaker is not None
    invoke_endpoint(_session(context), context.sagemaker, body.data, content_type=body.content_type,
                    max_response_bytes=plan.max_response_bytes)


def endpoint(context: "Context", bodies: Sequence[Body], version: Optional[str]) -> Endpoint:
    """The signed InvokeEndpoint requests, one per body."""
    from mmsctl.cloud.sagemaker.invoke import sniff_content_type

    aws = _session(context)
    base = str(aws.client("sagemaker-runtime").meta.endpoint_url).rstrip("/")
    assert context.sagemaker is not None
    path = f"/endpoints/{quote(context.sagemaker, safe='')}/invocations"
    posts = []
    for body in bodies:
        headers = {"Content-Type": body.content_type or sniff_content_type(body.data)}
        signed = aws.sigv4_headers("POST", base + path, body=body.data, service="sagemaker", headers=headers)
        posts.append((body.data, {k: v for k, v in signed.items() if k.lower() != "host"}))
    return build_posts(base, path, posts)
