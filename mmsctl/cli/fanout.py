"""`models …`, `scale` and `ping` on a fleet context: find the members, call them all, one row each.

:class:`FleetTarget` is what ``cli/models.py`` picks, once per command, when its context is
a fleet (:attr:`Context.is_fleet`); it offers the operations of a single server's target
there, so no command branches on fleets itself. Members come from the context's static list, or,
for ``context add --fleet NAME``, from the fleet's Auto Scaling group (in-service
instances at their private addresses; boto3 is imported only then). A member
that fails gets its row and its reason; then the command exits 4 naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from mmsctl.cli.render import Column, get_ui, render_data, render_table

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.client.contexts import Context
    from mmsctl.client.fanout import FanOut, FleetClient, Member

__all__ = ["FleetTarget", "beyond_template", "fleet_members", "persist_advice", "served_beyond_template"]


def fleet_members(ctx: "Context") -> list["Member"]:
    """The members of a fleet context, now."""
    from mmsctl.client.fanout import member_from_address, parse_members

    if ctx.members:
        return parse_members(ctx.members)
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.fleet.query import members
    from mmsctl.errors import CloudError

    rows = members(open_session(region=ctx.region), str(ctx.fleet))
    found = [member_from_address(str(r["id"]), str(r["private_ip"])) for r in rows if r.get("private_ip")]
    if not found:
        raise CloudError(f"fleet {ctx.fleet!r} has no in-service instance to manage",
                         hint=f"`mmsctl fleet describe {ctx.fleet}` shows its instances")
    return found


def beyond_template(served: dict[str, list[str]], template: list[str]) -> dict[str, list[str]]:
    """Of the models each member serves (member → names), those the launch template's models
    (``NAME=LOCATION`` or ``LOCATION`` as given to the fleet) lack: model → the members serving it."""
    from mmsctl.cloud.instance.userdata import parse_models

    boots = {m.name for m in parse_models(template)}
    extra: dict[str, list[str]] = {}
    for member, names in served.items():
        for name in names:
            if name not in boots:
                extra.setdefault(name, []).append(member)
    return dict(sorted(extra.items()))


def persist_advice(fleet: str) -> str:
    """How a fan-out registration becomes part of what the fleet's instances boot."""
    return (f"make one permanent with `mmsctl models register LOCATION --persist` or "
            f"`mmsctl fleet rollout {fleet} --models …`")


def served_beyond_template(ctx: "Context", template: list[str], timeout: float) -> dict[str, list[str]]:
    """Ask every member of fleet context *ctx* what it serves (fan-out ``GET /models``, one page of
    1000) and keep what the template lacks; raises :class:`MembersFailed` when a member does not answer
    (then the comparison would be wrong)."""
    from mmsctl.client.fanout import FleetClient

    answers = FleetClient(fleet_members(ctx), token_file=ctx.token_file, timeout=timeout).list_models(limit=1000)
    answers.check("models list")
    return beyond_template({r.member.name: [m.name for m in r.value or []] for r in answers.results}, template)


def _base(result: Any) -> dict[str, Any]:
    member = result.member
    return {"member": member.name, "url": member.management_url, "ok": result.ok,
            "error": result.error.message if result.error is not None else None}


def _write_rows(answers: "FanOut[Any]", *, pending: str, done: str) -> list[dict[str, Any]]:
    """One row per member for register/unregister: failed, *pending* (accepted, still working) or *done*."""
    rows = []
    for r in answers.results:
        row = _base(r)
        row.update(status="failed" if not r.ok else pending if r.value and r.value.in_progress else done,
                   message=r.value.message if r.value else None, httpStatus=r.value.status if r.value else None)
        rows.append(row)
    return rows


def _finish(rows: list[dict[str, Any]], columns: tuple[Column, ...], output: str, answers: "FanOut[Any]",
            what: str) -> None:
    """Print one row per member (or the data), then fail naming the members that failed."""
    data = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    if not render_data(data, output):
        render_table(rows, columns, wide=output == "wide")
    answers.check(what)


def _table_or(output: str) -> str:
    """Write commands take text|json|yaml; on a fleet, text is the per-member table."""
    return "table" if output == "text" else output


_ERROR = Column("Error", "error")
_URL = Column("URL", "url", wide=True)
_WRITE_COLUMNS = (Column("Member", "member"), Column("Status", "status"), Column("Message", "message"), _URL, _ERROR)


class FleetTarget:
    """A fleet context's members, each command on all of them: one row per member, exit 4 naming
    the failed ones. *timeout* is the command's ``--timeout`` (checked by the caller)."""

    def __init__(self, ctx: "Context", timeout: float) -> None:
        self.ctx = ctx
        self.timeout = timeout

    def _client(self, timeout: Optional[float] = None) -> "FleetClient":
        from mmsctl.client.fanout import FleetClient

        return FleetClient(fleet_members(self.ctx), token_file=self.ctx.token_file,
                           timeout=self.timeout if timeout is None else timeout)

    def list_models(self, *, output: str, limit: int) -> None:
        answers = self._client().list_models(limit=limit)
        rows = []
        for r in answers.results:
            row = _base(r)
            models = r.value or []
            row.update(models=[m.to_dict() for m in models], _names=[m.name for m in models] if r.ok else None,
                       _count=len(models) if r.ok else None, status="ok" if r.ok else "error")
            rows.append(row)
        columns = (Column("Member", "member"), Column("Status", "status"), Column("Models", "_names"),
                   Column("Count", "_count", justify="right", wide=True), _URL, _ERROR)
        if self.ctx.fleet and rows and all(r["ok"] for r in rows):
            self._note_untemplated({r["member"]: list(r.get("_names") or []) for r in rows})
        _finish(rows, columns, output, answers, "models list")

    def _note_untemplated(self, served: dict[str, list[str]]) -> None:
        """Models today's members serve that the fleet's launch template does not: the next instance won't."""
        from mmsctl.cloud.fleet.rollout import template_models
        from mmsctl.errors import MmsError

        fleet = str(self.ctx.fleet)
        try:
            template = template_models(fleet, self.ctx.region)
        except MmsError as exc:
            get_ui().warn(f"could not compare with fleet {fleet}'s launch template: {exc}")
            return
        extra = beyond_template(served, template)
        if extra:
            get_ui().warn(f"served by members but not in fleet {fleet}'s launch template (instances launched later "
                          f"will not serve them): {', '.join(extra)}; {persist_advice(fleet)}")

    def describe(self, model: str, version: Optional[str], *, output: str) -> None:
        answers = self._client().describe(model, version)
        rows = []
        for r in answers.results:
            row = _base(r)
            details = r.value or []
            detail = details[0] if details else None
            row.update(
                status="ok" if r.ok else "error",
                describe=([d.raw for d in details] if version == "all" else (detail.raw if detail else None)),
                _version=detail.version if detail else None,
                _workers=f"{detail.ready_workers}/{len(detail.workers)}" if detail else None,
                _min=detail.min_workers if detail else None, _max=detail.max_workers if detail else None,
                _batch=detail.batch_size if detail else None,
            )
            rows.append(row)
        columns = (Column("Member", "member"), Column("Status", "status"), Column("Version", "_version"),
                   Column("Workers", "_workers", justify="right"), Column("Min", "_min", justify="right"),
                   Column("Max", "_max", justify="right"), Column("Batch", "_batch", justify="right", wide=True),
                   _URL, _ERROR)
        _finish(rows, columns, output, answers, f"models describe {model}")

    def register(self, location: str, options: dict[str, Any], *, output: str, persisting: bool = False) -> None:
        answers = self._client().register(location, timeout=self.timeout, **options)
        rows = _write_rows(answers, pending="accepted", done="registered")
        if self.ctx.fleet and not persisting:  # members the group launches later boot the template's models only
            from mmsctl.cli.fleet.rollout import persist_command

            get_ui().message("only today's members serve it; to make it permanent (a rollout), add --persist or run: "
                             + persist_command(str(self.ctx.fleet), self.ctx.region, location))
        _finish(rows, _WRITE_COLUMNS, _table_or(output), answers, f"models register {location}")

    def unregister(self, model: str, version: Optional[str], *, output: str) -> None:
        answers = self._client().unregister(model, version, timeout=self.timeout)
        rows = _write_rows(answers, pending="unregistering", done="unregistered")
        _finish(rows, _WRITE_COLUMNS, _table_or(output), answers, f"models unregister {model}")

    def scale(self, model: str, min_workers: int, max_workers: Optional[int], *, version: Optional[str],
              wait: bool, output: str) -> None:
        fleet = self._client(min(self.timeout, 30.0))
        if wait and not get_ui().quiet:
            get_ui().message(f"scaling {model} to {min_workers} workers on {len(fleet.members)} members…")
        answers = fleet.scale(model, min_workers, max_workers, version=version, wait=wait, timeout=self.timeout)
        rows = []
        for r in answers.results:
            row = _base(r)
            value = r.value
            status = "failed" if value is None else (
                "scaled" if value.waited or not value.in_progress else "scaling")
            row.update(status=status, scale=value.to_dict() if value else None,
                       _ready=value.ready if value and value.waited else None)
            rows.append(row)
        columns = (Column("Member", "member"), Column("Status", "status"),
                   Column("Ready", "_ready", justify="right"), _URL, _ERROR)
        _finish(rows, columns, _table_or(output), answers, f"scale {model}")

    def ping(self, *, output: str) -> None:
        from mmsctl.client.fanout import FleetClient, Member

        fleet = self._client()
        ctx = self.ctx
        if ctx.inference_url and ctx.inference_url not in {m.inference_url for m in fleet.members}:
            # The balancer (or whatever `predict --context` calls) is checked beside the members.
            fleet = FleetClient([*fleet.members, Member("(balancer)", "", ctx.inference_url)],
                                token_file=ctx.token_file, timeout=self.timeout)
        answers = fleet.ping()
        rows = []
        for r in answers.results:
            row = _base(r)
            row["url"] = r.member.inference_url
            if r.value is not None:
                row.update(r.value.to_dict(), url=r.member.inference_url)
                row["_latency"] = None if r.value.latency_ms is None else f"{r.value.latency_ms:.0f} ms"
            rows.append(row)
        columns = (Column("Member", "member"), Column("URL", "url"), Column("Status", "status"),
                   Column("Server", "server"), Column("Latency", "_latency", justify="right"),
                   Column("Version", "version", wide=True))
        _finish(rows, columns, output, answers, "ping")
