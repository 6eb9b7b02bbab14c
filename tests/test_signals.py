"""Tests that signal a child pass whatever shell started the suite (tests/support/signals.py says why)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from typing import Iterator

import pytest

from tests.support.signals import popen

_SHOW = "import signal; print(' '.join(repr(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)))"


@pytest.fixture()
def started_as_a_background_job() -> Iterator[None]:
    """This process as `make test &` in a script starts it: SIGINT and SIGQUIT ignored."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGQUIT)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_plain_child_inherits_the_ignored_sigint(started_as_a_background_job: None) -> None:
    """The premise: what made Ctrl+C tests fail when the suite ran as a background job."""
    out = subprocess.run([sys.executable, "-c", _SHOW], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "<Handlers.SIG_IGN:"


def test_a_child_started_for_signalling_gets_the_default_dispositions(started_as_a_background_job: None) -> None:
    proc = popen([sys.executable, "-c", _SHOW], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    assert out.split() == ["<built-in", "function", "default_int_handler>", "<Handlers.SIG_DFL:", "0>",
                           "<Handlers.SIG_DFL:", "0>"]


def test_ctrl_c_reaches_a_child_of_a_background_suite(started_as_a_background_job: None) -> None:
    """End to end: SIGINT sent to a Python child raises KeyboardInterrupt there (uncaught, it ends by SIGINT)."""
    proc = popen([sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(60)"],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGINT and "KeyboardInterrupt" in err


#: SIGINT sent to another process (a test that interrupts itself, ``os.kill(os.getpid(), …)``, starts no child).
_SIGINT_TO_A_CHILD = re.compile(r"send_signal\(signal\.SIGINT\)|killpg\([^)]*SIGINT|os\.kill\((?!os\.getpid\(\))[^)]*SIGINT")


def test_every_test_that_sends_sigint_starts_its_child_for_signalling() -> None:
    """The check that would have caught `fleet tunnel`'s test hanging under `make test &`: a test module that
    sends SIGINT starts its children with tests/support/signals.popen, never a bare subprocess.Popen(...)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name in ("signals.py", "test_signals.py"):
            continue
        text = path.read_text(encoding="utf-8")
        if _SIGINT_TO_A_CHILD.search(text) and ("subprocess.Popen(" in text
                                                or "tests.support.signals import popen" not in text):
            offenders.append(str(path.relative_to(root)))
    assert offenders == [], offenders
