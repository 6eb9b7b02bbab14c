"""`mmsctl context …`: named servers, like `kubectl config` contexts.

    mmsctl context add prod --inference http://10.0.0.5:8080 --management http://10.0.0.5:8081
    mmsctl context add lab --members http://10.0.0.5:8081,http://10.0.0.6:8081    # a fleet: fan-out
    mmsctl context add prod --fleet prod --region us-east-1                          # an mmsctl fleet on AWS
    mmsctl context use prod
    mmsctl context list
    mmsctl context current
    mmsctl context remove prod
"""

from __future__ import annotations

import os
from typing import Any, List, Optional

import typer

from mmsctl.cli.options import ContextOpt, OutputOpt, check_output, complete_context_names, output_option, option
from mmsctl.cli.render import Column, get_ui, render_data, render_table

__all__ = ["register"]

context_app = typer.Typer(
    name="context",
    help="Named servers (inference/management/metrics URLs and a token file), like kubectl contexts. "
    "Kept in <config>/contexts.toml; MMSCTL_CONTEXT and MMSCTL_*_URL override it.",
    no_args_is_help=True,
)


def _complete_removable_names(incomplete: str) -> list[str]:
    """Only contexts from contexts.toml: the built-in `local` cannot be removed."""
    try:
        from mmsctl.client.contexts import ContextStore

        return [n for n in ContextStore().names() if n.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion stays silent
        return []


NameArg: str = typer.Argument(..., help="Context name.", metavar="NAME", autocompletion=complete_context_names)

_COLUMNS = (
    Column("Current", "current"),
    Column("Name", "name"),
    Column("Inference", "inference_url"),
    Column("Management", "management_url"),
    Column("Metrics", "metrics_url", wide=True),
    Column("Token file", "token_file", wide=True),
)


@context_app.command("add")
def add(
    name: str = typer.Argument(..., help="Context name.", metavar="NAME"),
    inference: Optional[str] = typer.Option(
        None, "--inference", help="Inference API URL, e.g. http://host:8080 (a fleet: its balancer).", metavar="URL"),
    management: Optional[str] = typer.Option(
        None, "--management", help="Management API URL, e.g. http://host:8081.", metavar="URL"),
    metrics: Optional[str] = typer.Option(None, "--metrics", help="Prometheus metrics URL, e.g. http://host:8082.", metavar="URL"),
    token_file: Optional[str] = option("--token-file", help="Bearer token file (plain token or TorchServe key_file.json)."),
    members: List[str] = typer.Option(
        [], "--members", help="A fleet of servers: management URLs (port 8081 default; inference and metrics "
        "assumed on 8080 and 8082 of the same host) or INFERENCE=MANAGEMENT[=METRICS], comma-separated or repeated.",
        metavar="URL,URL…"),
    fleet: Optional[str] = typer.Option(
        None, "--fleet", help="An mmsctl fleet on AWS (`mmsctl fleet create`): members are its instances, "
        "predict goes through its load balancer.", metavar="FLEET"),
    region: Optional[str] = option("--region", help="AWS region of --fleet."),
    use: bool = typer.Option(False, "--use", help="Also make it the current context."),
    protocol: Optional[str] = typer.Option(
        None, "--protocol", help="What the server speaks: mms (MMS 1.1, TorchServe, mmsctl; the default) or v2 "
        "(the Open Inference Protocol: Triton, KServe, mmsctl serve; read-only, --management not needed).",
        metavar="mms|v2"),
) -> None:
    """Add a context, or change the fields given of an existing one (like `kubectl config set-context`).

    A new context needs --inference and --management (or --members / --fleet); on an existing one,
    what is not given stays, and an empty value (--token-file "") removes an optional field.
    A fleet context (--members or --fleet) makes `models`, `scale`, `ping` and `top` run on every member.
    """
    from pathlib import Path

    from mmsctl.client.contexts import Context, ContextStore
    from mmsctl.errors import InputNotFoundError, UsageError

    if token_file and not Path(token_file).expanduser().is_file():
        raise InputNotFoundError(f"token file {token_file} not found")
    if members and fleet:
        raise UsageError("pass --members or --fleet, not both")
    store = ContextStore()
    old = store.get(name) if name in store.names() else None
    if region and not (fleet or (old and old.fleet)):
        raise UsageError("--region goes with --fleet")
    member_specs: tuple[str, ...] = old.members if old and not fleet else ()
    fleet_name = fleet or (old.fleet if old and not members else None)
    if members:
        from mmsctl.client.fanout import parse_members

        parsed = parse_members(members)
        member_specs = tuple(m for spec in members for m in (x.strip() for x in spec.split(",")) if m)
        inference = inference or (old.inference_url if old else parsed[0].inference_url)
    elif fleet:
        inference, region = _fleet_endpoint(fleet, region or (old.region if old else None), inference)
    elif old is None and protocol == "v2" and inference:
        management = management or inference  # v2 has no management API: its reads go to the inference port
    elif old is None and (not inference or not management):
        raise UsageError(f"a new context needs --inference and --management (or --members / --fleet for a fleet); "
                         f"{name!r} does not exist yet", hint="see `mmsctl context add --help`")
    given = {"inference": inference, "management": management, "metrics": metrics, "token file": token_file,
             "members": members or None, "fleet": fleet, "region": region, "protocol": protocol}
    context = Context(
        name,
        inference if inference is not None else (old.inference_url if old else ""),
        management if management is not None else (old.management_url if old else ""),
        _field(metrics, old.metrics_url if old else None),
        _field(token_file, old.token_file if old else None),
        members=member_specs, fleet=fleet_name,
        region=_field(region, old.region if old and not members else None),
        protocol=protocol or (old.protocol if old else "mms"),
    )
    store.add(context)
    if use:
        store.use(name)
    ui = get_ui()
    what = f" ({len(member_specs)} members)" if members else (f" (fleet {fleet}, {inference})" if fleet else "")
    changed = ", ".join(k for k, v in given.items() if v is not None)
    verb = f"updated ({changed or 'nothing given'})" if old else "added"
    ui.message(f"context {name!r} {verb}{what}" + (" and in use" if use else ""))


def _field(given: Optional[str], old: Optional[str]) -> Optional[str]:
    """A flag's new value, the old one when it was not given, nothing when given empty."""
    if given is None:
        return old
    return given or None


def _fleet_endpoint(fleet: str, region: Optional[str], inference: Optional[str]) -> tuple[str, str]:
    """The fleet's balancer URL (unless --inference names another, e.g. a DNS alias) and its region."""
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.fleet.names import check_name
    from mmsctl.cloud.fleet.query import endpoint

    check_name(fleet)
    aws = open_session(region=region)
    url = endpoint(aws, fleet)
    return inference or url, aws.region


@context_app.command("use")
def use(name: str = NameArg) -> None:
    """Make NAME the current context (`local` is the local server)."""
    from mmsctl.client.contexts import ContextStore

    ContextStore().use(name)
    get_ui().message(f"switched to context {name!r}")


@context_app.command("list")
def list_contexts(output: str = OutputOpt) -> None:
    """List the contexts; `*` marks the one commands use (after MMSCTL_CONTEXT)."""
    check_output(output)
    from mmsctl.client.contexts import LOCAL, Context, ContextStore, instance_contexts, resolve_context
    from mmsctl.errors import AmbiguousInstanceError, MmsError

    store = ContextStore()
    try:
        local = store.get(LOCAL)
    except AmbiguousInstanceError:  # `local` with several servers running: each is listed as local:NAME
        local = Context(LOCAL, "", "", source="ambiguous")
    try:
        active = resolve_context(None, store=store).name
    except MmsError:  # the one in use is gone (a stopped local:NAME): still list the others
        active = os.environ.get("MMSCTL_CONTEXT") or store.current or LOCAL
    contexts = [c for c in [local, *instance_contexts()] if c.name not in store.names()] + store.all()
    rows: list[dict[str, Any]] = []
    for ctx in contexts:
        row = ctx.to_dict()
        row["current"] = "*" if ctx.name == active else ""
        if ctx.source == "ambiguous":
            row["inference_url"] = "(several local servers: use local:NAME)"
        rows.append(row)
    if render_data([{k: v for k, v in r.items() if k != "current"} | {"current": bool(r["current"])} for r in rows], output):
        return
    for row in rows:  # a fleet's management API is on each member
        if row["fleet"]:
            row["management_url"] = f"fleet {row['fleet']} ({row['region']})"
        elif row["members"]:
            row["management_url"] = f"{len(row['members'])} members"
    render_table(rows, _COLUMNS, wide=output == "wide")


@context_app.command("current")
def current(output: str = output_option("name", "json", "yaml"),
            context: Optional[str] = ContextOpt) -> None:
    """Print the context commands use now, and (with -o json) its URLs and where it came from."""
    check_output(output, ("name", "json", "yaml"))
    from mmsctl.cli.models import context_name
    from mmsctl.client.contexts import resolve_context

    ctx = resolve_context(context_name(context))
    if render_data(ctx.to_dict(), output):
        return
    out = get_ui().out.file
    out.write(ctx.name + "\n")
    out.flush()


@context_app.command("remove")
def remove(
    name: str = typer.Argument(..., help="Context name.", metavar="NAME", autocompletion=_complete_removable_names),
) -> None:
    """Remove a context (if it was current, the local server becomes current)."""
    from mmsctl.client.contexts import ContextStore

    ContextStore().remove(name)
    get_ui().message(f"context {name!r} removed")


def register(app: typer.Typer) -> None:
    app.add_typer(context_app, name="context")
