"""Every AWS call a dry run only plans, checked against the installed botocore's service model as a sent one is.

botocore validates a request's parameters before it sends it: an unknown or misspelt parameter, a missing
required one or a wrong type fails in the client, before any network. A call the tests make against moto is
checked that way; a call a ``--dry-run`` only lists (every mutating call, and every call of a dry run without
credentials) is not, so a parameter that only a dry-run path sends (``lambda deploy --provisioned``) would go
unchecked. :func:`check_planned_calls` checks those too. Under ``make test-lowest`` the installed botocore is the
floor pyproject.toml allows, so a parameter newer than the floor fails there, sent or planned.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_planned_calls", "planned_call_errors", "problems"]

#: What the checks found since the last :func:`planned_call_errors` (one line each).
_errors: list[str] = []
_models: dict[str, Any] = {}


def _operation(service: str, operation: str) -> Any:
    """botocore's model of *operation* (python name, ``run_instances``) of *service*."""
    import botocore.session
    from botocore import xform_name

    if service not in _models:
        _models[service] = botocore.session.get_session().get_service_model(service)
    model = _models[service]
    names = {xform_name(name): name for name in model.operation_names}
    if operation not in names:
        raise LookupError(f"{service} has no operation {operation} in botocore's model")
    return model.operation_model(names[operation])


def problems(service: str, operation: str, params: dict[str, Any]) -> str:
    """botocore's report on *params* for one call ('' when it would send them)."""
    from botocore.validate import ParamValidator

    try:
        shape = _operation(service, operation).input_shape
    except LookupError as exc:
        return str(exc)
    if shape is None:
        return "" if not params else f"{service} {operation} takes no parameters"
    report = ParamValidator().validate(params, shape)
    return report.generate_report() if report.has_errors() else ""


def check_planned_calls() -> None:
    """From now on, check every call an :class:`AwsSession` of this process records without sending it."""
    from mmsctl.cloud.aws.session import AwsSession

    if getattr(AwsSession, "_tests_check_plans", False):
        return
    call, paginate = AwsSession.call, AwsSession.paginate

    def checked(method: Any) -> Any:
        def wrapper(self: AwsSession, service: str, operation: str, *args: Any, **kwargs: Any) -> Any:
            seen = len(self.calls)
            try:
                return method(self, service, operation, *args, **kwargs)
            finally:
                for planned in self.calls[seen:]:
                    if not planned.executed:
                        found = problems(planned.service, planned.operation, planned.params)
                        if found:
                            _errors.append(f"{planned.service} {planned.operation}: {found}")
        return wrapper

    AwsSession.call = checked(call)  # type: ignore[method-assign]
    AwsSession.paginate = checked(paginate)  # type: ignore[method-assign]
    AwsSession._tests_check_plans = True  # type: ignore[attr-defined]


def planned_call_errors() -> list[str]:
    """What the checks found since the last call (and forget it)."""
    found = list(_errors)
    _errors.clear()
    return found
