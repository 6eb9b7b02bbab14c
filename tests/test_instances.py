"""The local-instance registry: what a server publishes in state.json and what clients read from it."""

from __future__ import annotations

import os
from pathlib import Path

from mmsctl.instances import Instance, InstanceState, list_instances


def _publish(name: str, *, pid: int, token_file: str | None = None, status: str = "ready") -> Instance:
    instance = Instance(name)
    instance.write_state(InstanceState(
        name=name, pid=pid, status=status, inference_url="http://127.0.0.1:18080",
        management_url="http://127.0.0.1:18081", metrics_url="http://127.0.0.1:18082", token_file=token_file,
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


def test_the_local_context_takes_the_token_file_from_the_registry(tmp_path: Path) -> None:
    """The client learns a local server's token file from state.json, not the server's private config."""
    from mmsctl.client.contexts import local_context

    token = tmp_path / "token"
    instance = _publish("default", pid=os.getpid(), token_file=str(token))
    instance.config_file.write_text("{not the server's config: never read by the client")
    context = local_context()
    assert context.management_url == "http://127.0.0.1:18081"
    assert context.token_file == str(token)
