"""MMS 1.1.11's own server test suite (ModelServerTest.java), replayed over HTTP against any server.

MMS tests its server with one long sequence of requests against a model store of small test models
(``frontend/modelarchive/src/test/resources/models``) and one ``config.properties``. The replay sends
the same requests in the same order and checks what the Java test checks, case by case
(:mod:`tests.support.mms_suite_cases`), against real MMS 1.1.11 and against ``mmsctl serve`` on the same
store and config. The store holds our own equivalents of MMS's test models (tests/fixtures/mms_suite:
the same manifests and behaviour, written for these tests).

The Java test changes settings between cases through reflection; over HTTP a setting is a server's. So
the replay runs three servers, one per configuration (:data:`PHASES`): the main one (MMS's config), one
that does not decode request bodies, and one whose ``unregister_model_timeout`` is 0.

A case MMS and mmsctl answer differently on purpose (docs/server.md, "Differences from MMS 1.1.11, on
purpose") is marked ``kept`` with the reason, and checks each server's own answer.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import httpx

from tests.support.paths import REPO

__all__ = ["Case", "PHASES", "Phase", "Session", "Target", "make_store", "replay", "replay_mms", "replay_mmsctl"]

#: Our equivalents of MMS's test models, one folder each (copied into a store: workers write bytecode there).
MODELS = REPO / "tests" / "fixtures" / "mms_suite"


def make_store(dest: Path) -> Path:
    """A model store holding the suite's models (as folders, as MMS's test store does)."""
    shutil.copytree(MODELS, dest, ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    return dest


@dataclass(frozen=True)
class Phase:
    """One server configuration of the replay: ``config.properties`` keys on top of the addresses."""

    name: str
    properties: dict[str, str]


#: MMS's test config.properties, over plain HTTP on loopback (its HTTPS and Unix-socket listeners are the
#: transport, not what the cases test), plus what the Java test sets through reflection before its cases:
#: ``default_service_handler`` (testPredictionsNoManifest). ``allowed_urls`` lets mmsctl download, so the
#: download cases compare MMS's own codes and messages (MMS 1.1 has no such key and ignores it);
#: ``metric_time_interval`` makes the host metrics of testMetricManager come within seconds.
MAIN = Phase("main", {
    "model_store": "",  # filled in: the store folder
    "load_models": "noop-v0.1,noop-v1.0",
    "preload_model": "false",
    "async_logging": "true",
    "default_response_timeout": "120",
    "unregister_model_timeout": "120",
    "max_request_size": "10485760",
    "enable_envvars_config": "true",
    "default_service_handler": "service:handle",
    "allowed_urls": "https?://(localhost|127[.]0[.]0[.]1)(:[0-9]*)?/.*",
    "metric_time_interval": "5",
})
#: ``setConfiguration("decode_input_request", "false")``: handlers get bodies as bytes.
NO_DECODE = Phase("no-decode", {"model_store": "", "decode_input_request": "false",
                                "unregister_model_timeout": "120"})
#: ``setConfiguration("unregister_model_timeout", "0")``.
TIMEOUT_0 = Phase("unregister-timeout-0", {"model_store": "", "unregister_model_timeout": "0"})
PHASES = (MAIN, NO_DECODE, TIMEOUT_0)


@dataclass
class Target:
    """A running server under replay, as the cases see it."""

    kind: str  # "mms" or "mmsctl"
    inference_url: str
    management_url: str
    #: The server's log: its own lines and each worker's output (MMS: mms_log.log; mmsctl: server.log).
    log: Callable[[], str]
    #: Where its host metrics are written (MMS: mms_metrics.log; mmsctl: server.log).
    metrics_log: Callable[[], str]


@dataclass
class Session:
    """What a case works with: the target and a keep-alive client for each API."""

    target: Target
    inference: httpx.Client = field(init=False)
    management: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        timeout = httpx.Timeout(180.0, connect=10.0)
        self.inference = httpx.Client(base_url=self.target.inference_url, timeout=timeout)
        self.management = httpx.Client(base_url=self.target.management_url, timeout=timeout)

    def close(self) -> None:
        self.inference.close()
        self.management.close()

    @property
    def kind(self) -> str:
        return self.target.kind


@dataclass(frozen=True)
class Case:
    """One test method of ModelServerTest (or a part of one), run against one phase's server."""

    name: str
    phase: str
    run: Callable[[Session], None]
    #: Why mmsctl answers differently on purpose (docs/server.md); the case then checks each server's answer.
    kept: Optional[str] = None


def replay(cases: list[Case], phase: str, target: Target) -> dict[str, Optional[str]]:
    """Run *phase*'s cases in order against *target*: each case's failure (None: passed).

    A failing case does not stop the replay: later cases run on whatever state it left, as the Java test's
    would if its asserts did not throw.
    """
    results: dict[str, Optional[str]] = {}
    session = Session(target)
    try:
        for case in (c for c in cases if c.phase == phase):
            try:
                case.run(session)
            except Exception as exc:  # noqa: BLE001 - recorded as the case's failure; the replay goes on
                results[case.name] = f"{type(exc).__name__}: {exc}"[:1500]
            else:
                results[case.name] = None
    finally:
        session.close()
    return results


def properties_for(phase: Phase, store: Path) -> dict[str, str]:
    """*phase*'s keys with the model store filled in."""
    return {**phase.properties, "model_store": str(store)}


def replay_mmsctl(cases: list[Case], root: Path) -> dict[str, Optional[str]]:
    """Every phase against ``mmsctl serve`` (one server per phase, started from its config.properties)."""
    from tests.support.mmsctl_server import ServerStartError, running_mmsctl_server

    store = make_store(root / "store")
    results: dict[str, Optional[str]] = {}
    for phase in PHASES:
        try:
            # online: the download cases reach this machine's loopback (allowed_urls), as MMS does
            with running_mmsctl_server(root / phase.name, model_store=store, properties=properties_for(phase, store),
                                       environ={"MMSCTL_OFFLINE": None}) as server:
                target = Target("mmsctl", server.inference_url, server.management_url, server.log_text,
                                server.log_text)
                results.update(replay(cases, phase.name, target))
        except ServerStartError as exc:  # every case of the phase fails with the reason
            results.update({c.name: f"the server did not start: {str(exc).splitlines()[0]}" for c in cases if c.phase == phase.name})
    return results


def replay_mms(cases: list[Case], root: Path) -> dict[str, Optional[str]]:
    """Every phase against real MMS 1.1.11 (one server per phase), waiting for its start-up models first."""
    from tests.support.mms import running_mms, wait_for_prediction

    store = make_store(root / "store")
    results: dict[str, Optional[str]] = {}
    for phase in PHASES:
        with running_mms(root / phase.name, model_store=store, workers=None,
                         extra_config=properties_for(phase, store)) as server:
            for name in _startup_names(phase):
                wait_for_prediction(server, name)  # MMS says READY before a worker serves
            logs = server.log_dir
            target = Target("mms", server.inference_url, server.management_url,
                            lambda: _read(logs / "mms_log.log"), lambda: _read(logs / "mms_metrics.log"))
            results.update(replay(cases, phase.name, target))
    return results


def _startup_names(phase: Phase) -> list[str]:
    return ["noop_v0.1", "noop"] if phase.properties.get("load_models") else []


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
