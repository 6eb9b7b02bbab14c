"""The endpoint: created on its configuration, or moved to a new one with UpdateEndpoint (SageMaker's own
blue/green: a new fleet, traffic shifted, the old fleet stopped), then waited for until it is InService.

UpdateEndpoint goes out once (no retry: a repeated call meets the update it started, "Cannot update
in-progress endpoint"). The wait reads DescribeEndpoint with growing pauses, says each status as it comes,
and tells a rollback (InService again, on the old configuration) from success.
"""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.resources import describe
from mmsctl.errors import CloudError, RequestTimeout, UsageError

__all__ = ["EndpointBusy", "RolledBack", "WAIT_TIMEOUT_S", "check_in_service", "ensure_endpoint", "update_endpoint",
           "wait_in_service"]

#: A real-time endpoint takes minutes to start (instances, image, model); an update with a canary, its bakes.
WAIT_TIMEOUT_S = 3600.0
_FAILED = ("Failed", "UpdateRollbackFailed", "OutOfService")


class EndpointBusy(UsageError):
    """The endpoint is not InService: SageMaker refuses a second change while one is in progress."""

    reference = "sagemaker-endpoint-busy"


def check_in_service(t: Target, previous: Optional[dict[str, Any]]) -> None:
    """Refuse to change an endpoint that is not InService, before anything is made (a dry run without AWS has
    nothing to go by).

    Raises:
        EndpointBusy: it is Creating, Updating, RollingBack, Failed, ….
    """
    status = (previous or {}).get("EndpointStatus")
    if previous is None or status == "InService" or t.aws.unlooked is not None:
        return
    reason = previous.get("FailureReason")
    hint = (f"remove it first: mmsctl sagemaker destroy {t.name}" if status in _FAILED
            else f"wait until it is InService: mmsctl sagemaker describe {t.name}")
    raise EndpointBusy(f"endpoint {t.name} is {status}" + (f" ({reason})" if reason else "")
                       + ": SageMaker takes one change at a time, on an endpoint in service", hint=hint)


class RolledBack(CloudError):
    """The update did not take: SageMaker rolled the endpoint back to the configuration it ran before."""

    reference = "sagemaker-rolled-back"


def ensure_endpoint(t: Target, config: str, previous: Optional[dict[str, Any]], *, retain: bool = False,
                    deployment: Optional[dict[str, Any]] = None, wait_s: Optional[float] = WAIT_TIMEOUT_S) -> None:
    """Endpoint *t.name* on *config*: created, moved there, or left as it is; waited for unless *wait_s* is None."""
    if previous is None:
        t.aws.call("sagemaker", "create_endpoint", EndpointName=t.name, EndpointConfigName=config,
                   Tags=t.tag_list("endpoint"))
        t.note("create", "endpoint", t.name)
    elif previous.get("EndpointConfigName") == config:
        t.note("reuse", "endpoint", t.name)
        return
    else:
        update_endpoint(t, config, retain=retain, deployment=deployment)
        t.note("update", "endpoint", f"{t.name} -> {config}")
    if wait_s is not None and not t.aws.dry_run:
        wait_in_service(t, config, timeout=wait_s)


def update_endpoint(t: Target, config: str, *, retain: bool, deployment: Optional[dict[str, Any]]) -> None:
    params: dict[str, Any] = {"EndpointName": t.name, "EndpointConfigName": config,
                              "RetainAllVariantProperties": retain}
    if deployment:
        params["DeploymentConfig"] = deployment
    t.aws.call("sagemaker", "update_endpoint", max_attempts=0, **params)


def wait_in_service(t: Target, config: str, *, timeout: float = WAIT_TIMEOUT_S) -> dict[str, Any]:
    """DescribeEndpoint until InService on *config*; each new status goes to ``t.progress``.

    Raises:
        RolledBack: InService again on another configuration (the update rolled back).
        CloudError: Failed (with SageMaker's reason), or the endpoint is gone.
        RequestTimeout: still going after *timeout* seconds (SageMaker carries on; exit 7).
    """
    delay, waited, last = 5.0, 0.0, None
    while True:
        found = describe(t.aws, "endpoint", t.name)
        if found is None:
            raise CloudError(f"endpoint {t.name} is gone")
        status = str(found.get("EndpointStatus"))
        reason = found.get("FailureReason")
        if status != last:
            t.progress(f"endpoint {t.name}: {status}" + (f" ({reason})" if reason else "") + f" after {waited:.0f} s")
            last = status
        if status == "InService":
            if found.get("EndpointConfigName") != config:
                raise RolledBack(f"endpoint {t.name} rolled back to {found.get('EndpointConfigName')}"
                                 + (f": {reason}" if reason else ""), hint="see the endpoint's CloudWatch alarms "
                                 f"and logs: mmsctl sagemaker describe {t.name}")
            return found
        if status in _FAILED:
            raise CloudError(f"endpoint {t.name} is {status}: {reason or 'SageMaker gave no reason'}",
                             hint="the containers' output is in CloudWatch Logs: /aws/sagemaker/Endpoints/"
                                  f"{t.name}")
        if waited >= timeout:
            raise RequestTimeout(f"endpoint {t.name} is still {status} after {timeout:g} s; SageMaker carries on",
                                 hint=f"watch it with: mmsctl sagemaker describe {t.name}")
        t.sleep(delay)
        waited += delay
        delay = min(delay * 1.5, 30.0)
