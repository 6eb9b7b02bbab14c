"""`mmsctl fleet rollout NAME`: new models, AMI, type or mmsctl version on a running fleet (blue/green or rolling).

    mmsctl fleet rollout prod --models squeezenet --models resnet-18     # a second group, shifted when healthy
    mmsctl fleet rollout prod --status | --finish | --rollback
"""

from __future__ import annotations

from typing import Any, List, Optional

import typer

from mmsctl.cli.aws import CLOUD_WORDS, aws_session, render_calls
from mmsctl.cli.hints import CommandWords
from mmsctl.cli.options import DryRunOpt, OutputOpt, ProfileOpt, RegionOpt, check_output, note_model_locations, option
from mmsctl.cli.render import Column, get_ui, render_data, render_table

__all__ = ["add_rollout", "persist_command", "persist_model"]

_WORDS = CommandWords(
    flags={**CLOUD_WORDS.flags, "strategy": "--strategy", "min_healthy": "--min-healthy",
           "pip_spec": "--pip-spec", "instance_python": "--instance-python", "models": "--models", "finish": "--finish",
           "rollback": "--rollback", "show_status": "--status", "auto_finish_s": "--auto-finish",
           "checkpoint_delay_s": "--checkpoint-delay"},
    hints=CLOUD_WORDS.hints,
)


@_WORDS.command
def rollout_cmd(
    name: str = typer.Argument(..., help="Fleet name.", metavar="NAME"),
    models: List[str] = option("--models", [], help="The models the new instances serve (repeatable; "
                               "default: the fleet's current ones)."),
    instance_type: Optional[str] = option("--instance-type", help="A new instance type."),
    ami: Optional[str] = option("--ami", help="A new AMI: ami-… or resolve:ssm:/parameter."),
    pip_spec: Optional[str] = option("--pip-spec", help="Install mmsctl from this pip spec "
                                     "(a new mmsctl version)."),
    instance_python: Optional[str] = option("--instance-python", help="The new AMI's "
                                            "python3, for the wheels (default: the fleet's, as created)."),
    strategy: str = typer.Option("blue-green", "--strategy", help="blue-green (a second group, traffic shifted "
                                 "when healthy) or rolling (instance refresh of the one group).", metavar="S"),
    min_healthy: int = typer.Option(90, "--min-healthy", help="rolling: percent of the group kept in service.",
                                    metavar="PCT"),
    checkpoint_delay: Optional[str] = typer.Option(None, "--checkpoint-delay", metavar="AFTER", help="rolling: "
                                                   "the pause at 50 % and at 100 % replaced (e.g. 10m, the "
                                                   "default; 0s to 24h)."),
    auto_finish: Optional[str] = typer.Option(None, "--auto-finish", metavar="AFTER", help="blue-green: after "
                                              "the shift, watch the new group for AFTER (e.g. 10m) and finish if it "
                                              "stayed healthy; else keep the old group for --rollback."),
    finish: bool = typer.Option(False, "--finish", help="Delete the old group of a shifted rollout."),
    rollback: bool = typer.Option(False, "--rollback", help="Put the old group back; delete the new one."),
    show_status: bool = typer.Option(False, "--status", help="Show the rollout's state and groups."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = DryRunOpt,
    wait_timeout: float = option("--wait-timeout", 1200.0, help="Seconds to wait for the new group's "
                                 "targets before giving up (nothing is shifted then)."),
    output: str = OutputOpt,
) -> None:
    """Roll new models, AMI, type or mmsctl version onto a fleet without downtime.

    Example: mmsctl fleet rollout prod --models squeezenet --models resnet-18
    """
    check_output(output)
    from mmsctl.cloud.fleet import rollout
    from mmsctl.cloud.fleet.names import check_name
    from mmsctl.errors import UsageError

    check_name(name)
    if sum([finish, rollback, show_status]) > 1:
        raise UsageError("give only one of --finish, --rollback, --status")
    auto_finish_s = _seconds(auto_finish, "--auto-finish")
    checkpoint_delay_s = _seconds(checkpoint_delay, "--checkpoint-delay")
    aws = aws_session(region, profile, dry_run)
    if finish or rollback or show_status:
        act = rollout.finish if finish else rollout.rollback if rollback else None
        result = act(aws, name) if act else rollout.status(aws, name)
    else:
        from mmsctl.cloud.instance.userdata import parse_models

        note_model_locations(models)
        req = rollout.RolloutRequest(name=name, models=parse_models(models) if models else [],
                                     instance_type=instance_type, ami=ami, pip_spec=pip_spec, strategy=strategy,
                                     instance_python=instance_python,
                                     min_healthy=min_healthy, timeout=wait_timeout,
                                     auto_finish_s=auto_finish_s, checkpoint_delay_s=checkpoint_delay_s)
        result = rollout.start(aws, req)
    if dry_run:
        render_calls(aws, output, {"rollout": result})
        return
    _show(result, output)


def _seconds(text: Optional[str], flag: str) -> Optional[float]:
    """*text* as seconds, None when not given; a bad value is told before AWS is asked anything, naming *flag*."""
    from mmsctl.loadtest.sweep import parse_duration

    return None if text is None else parse_duration(text, flag)


def _show(result: dict[str, Any], output: str) -> None:
    if render_data(result, output):
        return
    if "groups" in result:
        get_ui().message(f"fleet {result['name']}: rollout {result['state']}")
        render_table(result["groups"], (Column("Group", "group"), Column("Role", "role"),
                                        Column("Version", "template_version"), Column("Healthy", "healthy"),
                                        Column("Desired", "desired"), Column("Models", "models")))
        refresh = result.get("instance_refresh")
        if refresh:
            checkpoints = ", ".join(f"{c}%" for c in refresh.get("checkpoints") or []) or "none"
            get_ui().message(
                f"instance refresh {refresh['id']}: {refresh['status']}, {refresh.get('percent_complete')}% done, "
                f"to version {refresh.get('to_version')}; checkpoints {checkpoints}, each a "
                f"{refresh.get('checkpoint_delay_s')} s pause" + (f" ({refresh['status_reason']})"
                                                                  if refresh.get("status_reason") else ""))
        return
    rows = [{"field": k, "value": v} for k, v in result.items() if v is not None]
    render_table(rows, (Column("Field", "field"), Column("Value", "value")))


def add_rollout(app: typer.Typer) -> None:
    app.command("rollout")(rollout_cmd)


def persist_command(name: str, region: Optional[str], location: str) -> str:
    """The ``fleet rollout`` command that adds *location* to the models fleet *name*'s template boots."""
    import shlex

    from mmsctl.cloud.fleet.rollout import template_models

    models = [*template_models(name, region), location]
    return shlex.join(["mmsctl", "fleet", "rollout", name, *[a for m in models for a in ("--models", m)],
                       *(["--region", region] if region else [])])


def persist_model(name: str, region: Optional[str], location: str, output: str) -> None:
    """``models register --persist`` on a fleet: a blue/green rollout of the template's models plus *location*."""
    from mmsctl.cloud.fleet import rollout
    from mmsctl.cloud.instance.userdata import parse_models

    models = [*rollout.template_models(name, region), location]
    get_ui().message(f"rolling {location} out to fleet {name}'s launch template (blue/green)")
    aws = aws_session(region, None)
    result = rollout.start(aws, rollout.RolloutRequest(name=name, models=parse_models(models)))
    _show(result, output)
