"""``mmsctl bench`` from start to end: find the servers, put the no-op model up, sweep, save, clean up.

The order matters for the promises the command makes:

1. every input is read and every flag checked before any server is touched;
2. each server is pinged (unreachable: exit 5; refused token: exit 6; no answer within the
   plan's timeout: exit 7) and its kind detected;
3. with ``--noop`` the model is registered (and removed in a ``finally``, whatever
   happens next); without it one real prediction checks the model (unknown: exit 3; no
   answer within the timeout: exit 7; an answer over the size limit: exit 8);
4. the sweep runs under a Ctrl-C handler that only sets a flag;
5. the run, complete or not, is saved (``--save``) *before* the no-op model is removed,
   so a second Ctrl-C during clean-up cannot lose it.
"""

from __future__ import annotations

import os
import platform
import secrets
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional, Sequence

from mmsctl.loadtest.inputs import Body, read_bodies
from mmsctl.loadtest.protocols import check_model, check_noop, detect, endpoint as build_endpoint
from mmsctl.loadtest.results import BenchRun, Level, save_run
from mmsctl.loadtest.loadgen import event_loop_name
from mmsctl.loadtest.sweep import Plan, Target, Tick, run_sweep, stop_on_sigint
from mmsctl.errors import MmsError, UsageError

__all__ = ["BenchRequest", "Hooks", "run_bench"]


@dataclass
class BenchRequest:
    """Everything the command line asked for."""

    model: Optional[str]
    inputs: Sequence[str]
    plan: Plan
    contexts: Sequence[Optional[str]] = (None,)  # the target, then --compare
    noop: bool = False
    noop_url: Optional[str] = None
    noop_workers: int = 1
    version: Optional[str] = None
    save: Optional[Path] = None


@dataclass
class Hooks:
    """How the run talks to the user (the CLI plugs in rich); every hook is optional."""

    message: Callable[[str], None] = lambda _m: None
    warning: Callable[[str], None] = lambda _m: None
    tick: Optional[Callable[[Tick], None]] = None
    level: Optional[Callable[[Target, Level], None]] = None
    interrupted: Callable[[], None] = lambda: None
    stop: threading.Event = field(default_factory=threading.Event)


def _noop_name(model: Optional[str]) -> str:
    return model or f"bench-noop-{secrets.token_hex(3)}"


def _settings(request: BenchRequest, bodies: Sequence[Body], noop_names: dict[str, str]) -> dict[str, object]:
    return {
        **request.plan.settings(),
        "inputs": [b.name for b in bodies][:20] + ([f"... {len(bodies) - 20} more"] if len(bodies) > 20 else []),
        "noop": request.noop,
        "noop_models": noop_names,
        "host": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                 "event_loop": event_loop_name()},
    }


def run_bench(request: BenchRequest, hooks: Optional[Hooks] = None) -> tuple[BenchRun, Optional[MmsError]]:
    """Run the benchmark; return the run and the error that ended it early (None when complete).

    Raises:
        MmsError: anything that fails before the first level (bad input, unreachable server,
            refused token, unknown model, a no-op model the server will not take).
    """
    from mmsctl import __version__
    from mmsctl.loadtest.noop import noop_model
    from mmsctl.loadtest.server_side import ServerProbe
    from mmsctl.client.auth import read_token
    from mmsctl.client.contexts import resolve_context
    from mmsctl.config import cache_dir

    hooks = hooks or Hooks()
    if not request.noop and not request.model:
        raise UsageError("MODEL is required (or measure the server with a no-op model)", param="noop")
    if request.noop and request.inputs:
        raise UsageError("a no-op model gets empty requests; leave out INPUT", param="noop")
    if request.noop_url and not request.noop:
        raise UsageError("a no-op archive location goes with a no-op model", params=("noop_url", "noop"))
    bodies = read_bodies(request.inputs, noop=request.noop, skipped=hooks.warning)
    contexts = [resolve_context(name) for name in request.contexts]
    if request.noop:
        for context in contexts:
            check_noop(context)
    labels = [c.name for c in contexts]
    if len(set(labels)) != len(labels):
        labels = [f"{c.name} ({c.inference_url})" for c in contexts]
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    targets: list[Target] = []
    noop_names: dict[str, str] = {}
    with stop_on_sigint(hooks.stop, hooks.interrupted), ExitStack() as stack:
        for context, label in zip(contexts, labels):
            kind = detect(context, request.plan)
            hooks.message(f"{label}: {kind} server at {context.inference_url}"
                          + (" (Open Inference Protocol, v2)" if context.protocol == "v2" else ""))
            if request.noop:
                model = stack.enter_context(noop_model(
                    context, kind, name=_noop_name(request.model), workers=request.noop_workers,
                    location=request.noop_url, archive_dir=cache_dir() / "bench",
                    on_message=hooks.message, on_warning=hooks.warning))
                noop_names[label] = model
            else:
                assert request.model is not None
                model = request.model
                check_model(context, model, bodies[0], request.version, request.plan)
            endpoint = build_endpoint(context, model, bodies, request.version,
                                      read_token(context.token_file, "inference"))
            probe = ServerProbe(context, kind, model)
            stack.callback(probe.close)
            probe.scrape()  # a metrics URL that does not answer is said now, not discovered per level
            if probe.unavailable:
                hooks.message(f"{label}: no server-side figures ({probe.unavailable})")
            targets.append(Target(label, context.inference_url, model, kind, endpoint, probe))
        sweeps, stopped = run_sweep(targets, request.plan, stop=hooks.stop, on_tick=hooks.tick,
                                    on_level=hooks.level)
        run = BenchRun(sweeps=sweeps, started=started, mmsctl_version=__version__,
                       settings=_settings(request, bodies, noop_names), complete=stopped is None)
        if request.save is not None:
            save_run(run, request.save)
            hooks.message(f"saved to {request.save}")
        if stopped is not None and request.noop:
            hooks.message("removing the no-op model")
    return run, stopped
