"""Drive the real `mmsctl top` program in tmux, as a person at a terminal would."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support.waiting import wait_until

server_support = pytest.importorskip("tests.support.mmsctl_server")

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


def _poll(condition: Callable[[], bool], timeout: float, failure: Callable[[], str]) -> None:
    """Check *condition* every 0.1 s until it holds; fail with *failure()* after *timeout* s."""
    try:
        wait_until(condition, timeout=timeout, what="the screen", interval=0.1)
    except TimeoutError:
        raise AssertionError(failure()) from None


class Tmux:
    """One detached tmux session on a private socket."""

    def __init__(self, command: str, *, width: int = 120, height: int = 30) -> None:
        self.socket = f"mmsctl-test-{uuid.uuid4().hex[:8]}"
        self.session = "top"
        self._tmux("new-session", "-d", "-s", self.session, "-x", str(width), "-y", str(height), command)

    def _tmux(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20)
        return proc.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.session, *keys)

    def alive(self) -> bool:
        return subprocess.run(["tmux", "-L", self.socket, "has-session", "-t", self.session],
                              capture_output=True, timeout=20).returncode == 0

    def wait(self, condition: Callable[[str], bool], timeout: float = 30.0) -> str:
        """Poll the pane (capture-pane) until *condition* holds; the screen it held then."""
        shown: list[str] = []

        def matches() -> bool:
            shown[:] = [self.screen()]
            return condition(shown[0])

        _poll(matches, timeout, lambda: f"screen never matched; it shows:\n{shown[0]}")
        return shown[0]

    def press_until(self, key: str, condition: Callable[[str], bool], timeout: float = 30.0) -> str:
        """Press *key* until *condition* holds (at most once a second): a key that reaches the app
        while it is still moving focus from a widget it just left is dropped, and a person presses again."""
        shown: list[str] = []
        pressed = [0.0]

        def matches() -> bool:
            shown[:] = [self.screen()]
            if condition(shown[0]):
                return True
            if time.monotonic() - pressed[0] >= 1.0:
                self.keys(key)
                pressed[0] = time.monotonic()
            return False

        _poll(matches, timeout, lambda: f"screen never matched; it shows:\n{shown[0]}")
        return shown[0]

    def wait_ended(self, timeout: float = 20.0) -> None:
        """Poll until the session is gone (the program and the shell after it exited)."""
        _poll(lambda: not self.alive(), timeout, lambda: f"still running; it shows:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=20)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    noop = server_support.make_noop_archive(tmp_path / "noop")
    other = server_support.make_noop_archive(tmp_path / "resnet", name="resnet")
    with server_support.running_mmsctl_server(tmp_path, models={"noop": str(noop), "resnet": str(other)}) as info:
        yield info


@pytest.mark.slow
def test_a_person_watches_filters_and_quits(served: Any, tmp_path: Path) -> None:
    env = {
        "MMSCTL_INFERENCE_URL": served.inference_url,
        "MMSCTL_MANAGEMENT_URL": served.management_url,
        "MMSCTL_METRICS_URL": served.metrics_url,
        "MMSCTL_CONFIG_DIR": os.environ["MMSCTL_CONFIG_DIR"],
        "MMSCTL_STATE_DIR": os.environ["MMSCTL_STATE_DIR"],
        "TERM": "xterm-256color",
    }
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    exit_file = tmp_path / "exit-code"
    command = (f"env {exports} {shlex.quote(sys.executable)} -m mmsctl top --interval 0.5 --readonly; "
               f"echo $? > {shlex.quote(str(exit_file))}")
    tmux = Tmux(command)
    try:
        screen = tmux.wait(lambda s: "noop" in s and "resnet" in s and "Healthy" in s)
        assert "REQ/S" in screen and "[mmsctl]" in screen
        tmux.keys("?")
        tmux.wait(lambda s: "register a model" in s)
        tmux.keys("Escape")
        tmux.wait(lambda s: "register a model" not in s)
        tmux.keys("/")
        tmux.wait(lambda s: "filter models" in s)  # the box has the keys once it is drawn
        tmux.keys("-l", "^res")
        tmux.wait(lambda s: "resnet" in s and not any(line.lstrip().startswith("noop") for line in s.splitlines()))
        tmux.keys("Enter")  # leave the filter box: the table has the keys again
        tmux.press_until("Enter", lambda s: "requests/s" in s and "READY" in s)  # open the model
        tmux.keys("Escape")
        tmux.wait(lambda s: "REQ/S" in s)
        tmux.keys("+")  # read-only: refused, with a reason
        tmux.wait(lambda s: "read-only" in s)
        tmux.keys("q")
        tmux.wait_ended()  # `top` quit and the shell wrote its exit code
        assert exit_file.read_text().strip() == "0"
    finally:
        tmux.kill()


@pytest.mark.slow
def test_a_person_watches_a_fleet_with_a_member_down(served: Any, tmp_path: Path) -> None:
    """`mmsctl top --context lab` on a fleet context: one real server and a closed port."""
    dead = f"127.0.0.1:{server_support.free_port()}"
    env = {
        "MMSCTL_CONFIG_DIR": os.environ["MMSCTL_CONFIG_DIR"],
        "MMSCTL_STATE_DIR": os.environ["MMSCTL_STATE_DIR"],
        "TERM": "xterm-256color",
    }
    member = f"{served.inference_url}={served.management_url}={served.metrics_url}"
    added = subprocess.run([sys.executable, "-m", "mmsctl", "context", "add", "lab", "--members",
                            f"{member},http://{dead}"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **env})
    assert added.returncode == 0, added.stderr
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    exit_file = tmp_path / "exit-code"
    command = (f"env {exports} {shlex.quote(sys.executable)} -m mmsctl top --context lab --interval 0.5; "
               f"echo $? > {shlex.quote(str(exit_file))}")
    tmux = Tmux(command)
    try:
        # the whole first view, not its first frame: the members table can still say "connecting…" there
        screen = tmux.wait(lambda s: "noop" in s and "members 1/2 up" in s and "MEMBERS" in s
                           and f"{dead} (cannot connect" in s)
        assert "lab (fleet, 2 members)" in screen
        tmux.keys("m")
        screen = tmux.wait(lambda s: "LAST ERROR" in s and dead in s)
        row = next(line for line in screen.splitlines() if line.lstrip().startswith(dead)).split()
        assert row[1] == "down"
        tmux.keys("Escape")
        tmux.wait(lambda s: "REQ/S" in s and "LAST ERROR" not in s)
        tmux.keys("q")
        tmux.wait_ended()
        assert exit_file.read_text().strip() == "0"
    finally:
        tmux.kill()
