"""The local-instance registry: what a server publishes in state.json and what clients read from it."""

from __future__ import annotations

import os
from pathlib import Path

from mmsctl.local_servers import Instance, InstanceState, list_instances, process_start_time


def _publish(name: str, *, pid: int, token_file: str | None = None, status: str = "ready",
             process_start: float | None = None) -> Instance:
    """A state.json as a server at *pid* writes it (its start time recorded, unless *process_start* says other)."""
    instance = Instance(name)
    instance.write_state(InstanceState(
        name=name, pid=pid, status=status, inference_url="http://127.0.0.1:18080",
        management_url="http://127.0.0.1:18081", metrics_url="http://127.0.0.1:18082", token_file=token_file,
        process_start=process_start if process_start is not None else process_start_time(pid),
    ))
    return instance


def test_state_round_trips_with_the_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    instance = _publish("qa", pid=os.getpid(), token_file=str(token))
    state = instance.read_state()
    assert state is not None and state.token_file == str(token) and state.status == "ready"
    assert [i.name for i in list_instances()] == ["qa"]
    assert instance.running_state() is not None


def test_a_dead_or_stopped_server_is_not_running() -> None:
    assert _publish("gone", pid=2**22 + 12345).running_state() is None
    assert _publish("stopped", pid=os.getpid(), status="stopped").running_state() is None


def test_a_pid_that_now_belongs_to_another_process_is_not_the_server() -> None:
    """After a crash the pid may be reused: the recorded start time tells them apart."""
    reused = _publish("reused", pid=os.getpid(), process_start=(process_start_time(os.getpid()) or 0) - 3600)
    assert reused.running_state() is None
    assert reused.died_state() is not None
    old = Instance("old")  # a state file from before start times were recorded: the command line decides
    old.write_state(InstanceState(name="old", pid=os.getpid(), status="ready"))
    assert old.running_state() is None  # pytest is not mmsctl.server


def test_the_local_context_takes_the_token_file_from_the_registry(tmp_path: Path) -> None:
    """The client learns a local server's token file from state.json, not the server's private config."""
    from mmsctl.client.contexts import local_context

    token = tmp_path / "token"
    instance = _publish("default", pid=os.getpid(), token_file=str(token))
    instance.config_file.write_text("{not the server's config: never read by the client")
    context = local_context()
    assert context.management_url == "http://127.0.0.1:18081"
    assert context.token_file == str(token)
