"""What the AWS command groups share: the session (``ec2``, ``fleet``, ``lambda``, ``sagemaker``, and ``predict``
and ``top`` on a ``sagemaker:NAME`` context), a dry run's calls as the user sees them, and how ``ec2`` and ``fleet``
name the arguments of the instance code they share (mmsctl/cloud/instance)."""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cli.hints import CommandWords
from mmsctl.cli.render import Column, get_ui, render_data, render_table

__all__ = ["CALL_COLUMNS", "CLOUD_WORDS", "aws_session", "render_calls", "render_destroy_plan"]

#: How `ec2` and `fleet` name the arguments of mmsctl/cloud (userdata, accelerators, ami, network, cost), and fixes.
CLOUD_WORDS = CommandWords(
    flags={"models": "--models", "server": "--server", "eia": "--eia", "accelerator": "--accelerator", "ami": "--ami",
           "count": "--count", "subnet": "--subnet", "subnets": "--subnets", "throughput": "--throughput",
           "price": "--price", "allow_cidrs": "--allow-cidr", "allow_world_ssh": "--allow-world-ssh"},
    hints=(
        ("cloud-world-open-ssh", "name your own network (curl -s https://checkip.amazonaws.com)/32, tunnel through "
                                 "Session Manager, or pass --allow-world-ssh if you mean it"),
        ("cloud-ami-parameter-not-found", "pass --ami ami-… or --ami resolve:ssm:/your/parameter"),
        ("cloud-no-bundled-price", "pass --price DOLLARS_PER_HOUR, or --live to ask the AWS Pricing API"),
        ("mms-needs-archive-url", "use --server mmsctl, which resolves zoo names itself"),
        ("cloud-ami-python", lambda exc: f"pass --instance-python {getattr(exc, 'found', '')}"
         if getattr(exc, "found", "") in ("3.9", "3.10", "3.11", "3.12")
         else "pass --ami with an image whose python3 is 3.9 to 3.12"),
    ),
)
#: How every AWS command names the session's own arguments.
_SESSION_WORDS = CommandWords(flags={"profile": "--profile", "region": "--region"})
CALL_COLUMNS = (
    Column("#", "n", justify="right"),
    Column("Service", "service"),
    Column("Operation", "operation"),
    Column("Status", "status"),
    Column("Parameters", "parameters"),
)


def aws_session(region: Optional[str], profile: Optional[str], dry_run: bool = False,
                plan_without_aws: bool = False, local_service: Optional[str] = None) -> Any:
    """The AWS session; a dry run that may plan without AWS (*plan_without_aws*) needs no region or credentials,
    nor does a command whose one service (*local_service*) is pointed at loopback."""
    from mmsctl.cloud.aws.session import open_session

    with _SESSION_WORDS.applied():
        return open_session(region=region, profile=profile, dry_run=dry_run, plan_without_aws=plan_without_aws,
                            local_service=local_service)


def render_destroy_plan(aws: Any, output: str, result: dict[str, Any], tag: str) -> None:
    """A destroy's dry run: its calls, and where nothing was looked up, that it deletes only what it finds."""
    render_calls(aws, output, {"destroy": result})
    if aws.unlooked is not None:  # unlooked, destroy finds nothing: the plan is its look-ups
        get_ui().message(f"destroy deletes only what it finds tagged {tag}: this plan shows what it would look for; "
                         f"with {_wanting(aws.unlooked)} it lists what it would delete")


def unlooked_banner(unlooked: str, operations: list[str]) -> str:
    """What a dry run without AWS (*unlooked*: why) says of itself: the look-ups it could not make (this
    command's own *operations*), and what to pass for a plan from the account."""
    names = list(dict.fromkeys(operations))
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return (f"dry run with {unlooked}: nothing was looked up in AWS ({shown or 'no look-ups'}); <…> marks what a "
            "real run would find there, and what mmsctl creates when missing is planned as missing. Pass "
            f"{_wanting(unlooked)} for a plan from your account.")


def _wanting(unlooked: str) -> str:
    """What a dry run without AWS lacked, as what to pass: ``--region``, ``credentials`` or both."""
    missing = [what for what, word in (("--region", "region"), ("credentials", "credentials")) if word in unlooked]
    return " and ".join(missing) or "--region and credentials"


def render_calls(aws: Any, output: str, extra: Optional[dict[str, Any]] = None) -> None:
    """A dry run's calls on stdout (a table, or with *extra* as JSON/YAML) and what they change on stderr."""
    calls = [c.to_dict() for c in aws.calls]
    unlooked = getattr(aws, "unlooked", None)
    ui = get_ui()
    if unlooked is not None:
        ui.message(unlooked_banner(unlooked, [c["operation"] for c in calls if not c["looked_up"]]))
    if render_data({**(extra or {}), "dry_run": True, "region": aws.region, "looked_up": unlooked is None,
                    "calls": calls}, output):
        return
    rows = [{"n": i, "service": c.service, "operation": c.to_dict()["operation"],
             "status": "would look up" if not c.looked else "would run" if not c.executed else "read",
             "parameters": c.summary()}
            for i, c in enumerate(aws.calls, 1)]
    render_table(rows, CALL_COLUMNS, wide=output == "wide")
    made = sum(1 for c in aws.calls if not c.executed and c.mutating)
    ui.message(f"dry run in {aws.region}: {made} call(s) would change something; nothing was changed")
