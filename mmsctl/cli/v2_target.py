"""``models`` and ``ping`` on a context that speaks the Open Inference Protocol (``--protocol v2``): read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from mmsctl.cli.render import Column, get_ui, render_data, render_table

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.client.contexts import Context
    from mmsctl.client.v2 import V2Client

__all__ = ["V2Target"]

_COLUMNS = (Column("Name", "modelName"), Column("Version", "modelVersion"), Column("State", "state"))
_DESCRIBE = (Column("Name", "modelName"), Column("Version", "modelVersion"), Column("Platform", "platform"),
             Column("Ready", "ready"), Column("Inputs", "inputsH"), Column("Outputs", "outputsH"))

_PING = (Column("Context", "context"), Column("URL", "url"), Column("Status", "status"), Column("Server", "server"),
         Column("Latency", "latency", justify="right"), Column("Version", "version", wide=True))


def _tensors(specs: list[dict[str, Any]]) -> str:
    return ", ".join(f"{t.get('name')} {t.get('datatype')} {t.get('shape')}" for t in specs)


class V2Target:
    """The one v2 server of a context; register, unregister and scale are refused in one line."""

    def __init__(self, ctx: "Context", timeout: float) -> None:
        self.ctx = ctx
        self.timeout = timeout

    def _client(self) -> "V2Client":
        from mmsctl.client.v2 import V2Client

        return V2Client(self.ctx, timeout=self.timeout)

    def list_models(self, *, output: str, limit: int) -> None:
        with self._client() as client:
            rows = client.list_models()
        if render_data(rows, output):
            return
        if not rows:
            get_ui().message(f"no models on {client.server}")
            return
        render_table(rows, _COLUMNS, wide=output == "wide")

    def describe(self, model: str, version: Optional[str], *, output: str) -> None:
        with self._client() as client:
            detail = client.describe(model, None if version == "all" else version)
        if render_data(detail.raw | {"ready": detail.ready}, output):
            return
        row = detail.to_dict() | {"inputsH": _tensors(detail.inputs), "outputsH": _tensors(detail.outputs)}
        render_table([row], _DESCRIBE, wide=True)

    def register(self, location: str, options: dict[str, Any], *, output: str, persisting: bool = False) -> None:
        from mmsctl.client.v2 import read_only

        raise read_only("register models", self.ctx)

    def unregister(self, model: str, version: Optional[str], *, output: str) -> None:
        from mmsctl.client.v2 import read_only

        raise read_only("unregister models", self.ctx)

    def scale(self, model: str, min_workers: int, max_workers: Optional[int], *, version: Optional[str],
              wait: bool, output: str) -> None:
        from mmsctl.client.v2 import read_only

        raise read_only("scale models", self.ctx)

    def ping(self, *, output: str) -> None:
        """The server's readiness as a row like ``ping``'s for MMS servers (``ping --all`` reaches it too)."""
        from mmsctl.errors import ApiError

        with self._client() as client:
            result = client.ping()
        row = result.to_dict() | {"context": self.ctx.name, "source": self.ctx.source,
                                  "latency": None if result.latency_ms is None else f"{result.latency_ms:.0f} ms"}
        if not render_data([row], output):
            render_table([row], _PING, wide=output == "wide")
        if not result.healthy:
            raise result.error or ApiError(f"{self.ctx.name} ({result.url}) is not healthy: {result.status}")
