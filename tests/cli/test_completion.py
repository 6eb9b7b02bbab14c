"""Shell completion: the scripts in completions/ match the CLI, and completion really answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmsctl.cli.completion import SHELLS, completion_script
from tests.support.cli import run_mmsctl
from tests.client.standin import StandIn, running_standin

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_completion_scripts_in_repo_are_current(shell: str, capsys) -> None:
    r = run_mmsctl(capsys, "completion", shell)
    assert r.code == 0
    assert r.stdout == completion_script(shell)
    assert (REPO / "completions" / SHELLS[shell]).read_text() == r.stdout, (
        "completions/ is stale: run scripts/gen_completions.py")
    assert "_MMSCTL_COMPLETE" in r.stdout


def test_unknown_shell_is_a_usage_error(capsys) -> None:
    r = run_mmsctl(capsys, "completion", "tcsh")
    assert r.code == 2


def _completion_env(words: str, env: dict[str, str]) -> dict[str, str]:
    """What bash sets for a <TAB> after *words*, on top of *env*."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    return {**env, "_MMSCTL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}


def _complete_in_a_process(words: str, env: dict[str, str]) -> list[str]:
    """The console entry as bash runs it: its own process."""
    full = {**os.environ, **_completion_env(words, env)}
    proc = subprocess.run([sys.executable, "-m", "mmsctl"], env=full, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def _complete(capsys: pytest.CaptureFixture[str], words: str, env: dict[str, str]) -> list[str]:
    """The same entry point in-process (click completes inside ``main()`` and exits 0), the variables set only
    for the call."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in _completion_env(words, env).items():
            mp.setenv(key, value)
        result = run_mmsctl(capsys)
    assert result.code == 0, result.stderr
    return result.stdout.split()


def test_bash_completion_commands_and_live_model_names(capsys) -> None:
    assert _complete_in_a_process("mmsctl mod", {}) == ["models"]
    with running_standin(StandIn(management_key=None, inference_key=None)) as server:
        server.add_model("squeezenet")
        server.add_model("resnet-18")
        env = {"MMSCTL_MANAGEMENT_URL": server.management_url}
        assert _complete(capsys, "mmsctl models describe ", env) == ["resnet-18", "squeezenet"]
        assert _complete(capsys, "mmsctl scale sq", env) == ["squeezenet"]
    # server gone: completion stays silent, no traceback in the shell
    assert _complete(capsys, "mmsctl scale sq", env) == []


def test_context_names_complete_and_remove_offers_only_removable_ones(capsys) -> None:
    assert run_mmsctl(capsys, "context", "add", "prod", "--inference", "http://10.0.0.5:8080",
                      "--management", "http://10.0.0.5:8081").code == 0
    env = {key: os.environ[key] for key in ("MMSCTL_CONFIG_DIR", "MMSCTL_STATE_DIR")}
    assert _complete(capsys, "mmsctl context use ", env) == ["local", "prod"]
    assert _complete(capsys, "mmsctl context remove ", env) == ["prod"]  # `local` is built in


def _commands_with(option: str) -> list[list[str]]:
    from mmsctl.cli.main import command

    found: list[list[str]] = []

    def walk(cmd, path: list[str]) -> None:  # type: ignore[no-untyped-def]
        if any(option in p.opts for p in cmd.params):
            found.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(command(), [])
    return found


def test_context_completes_on_every_command_that_takes_it(capsys) -> None:
    """`--context <TAB>`: local, each running local server as local:NAME, contexts.toml's names."""
    import os as _os

    from mmsctl.local_servers import Instance, InstanceState, process_start_time

    assert run_mmsctl(capsys, "context", "add", "prod", "--inference", "http://10.0.0.5:8080",
                      "--management", "http://10.0.0.5:8081").code == 0
    Instance("qa").write_state(InstanceState(name="qa", pid=_os.getpid(), status="ready",
                                             process_start=process_start_time(_os.getpid()),
                                             inference_url="http://127.0.0.1:1", management_url="http://127.0.0.1:2"))
    env = {key: os.environ[key] for key in ("MMSCTL_CONFIG_DIR", "MMSCTL_STATE_DIR")}
    paths = _commands_with("--context")
    assert [] in paths and ["models", "list"] in paths and ["predict"] in paths and len(paths) >= 10
    for path in paths:
        words = " ".join(["mmsctl", *path, "--context", ""])
        assert _complete(capsys, words, env) == ["local", "local:qa", "prod"], words
    assert _complete(capsys, "mmsctl scale m --context p", env) == ["prod"]


def test_zoo_names_complete_for_predict_and_zoo_pull(capsys) -> None:
    assert "squeezenet" in _complete(capsys, "mmsctl predict squ", {})
    assert _complete(capsys, "mmsctl zoo pull resnet-1", {}) == ["resnet-152", "resnet-18"]
    assert _complete(capsys, "mmsctl predict ./", {}) == []  # a path: the shell completes files


def test_serve_name_completes_instances_stop_only_the_running_ones(capsys) -> None:
    """`serve stop --name <TAB>` offers the servers running here; `logs`/`status` every instance."""
    from mmsctl.local_servers import Instance, InstanceState, process_start_time

    pid = os.getpid()  # a live process with its real start time: the registry takes it as running
    for name, status in (("alpha", "ready"), ("beta", "stopped")):
        instance = Instance(name)
        instance.dir.mkdir(parents=True)
        instance.write_state(InstanceState(name=name, pid=pid, status=status, process_start=process_start_time(pid),
                                           inference_url="http://127.0.0.1:1", management_url="http://127.0.0.1:2",
                                           log_file=str(instance.log_file)))
    env = {"MMSCTL_STATE_DIR": os.environ["MMSCTL_STATE_DIR"]}
    assert _complete(capsys, "mmsctl serve stop --name ", env) == ["alpha"]
    assert _complete(capsys, "mmsctl serve logs --name ", env) == ["alpha", "beta"]
    assert _complete(capsys, "mmsctl serve status -n b", env) == ["beta"]
