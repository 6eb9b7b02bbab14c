"""Children that a test will signal start with the default signal dispositions, whatever the parent had.

A background job of a non-interactive shell (``make test &`` from a script, CI runners, ``nohup``)
starts with SIGINT and SIGQUIT *ignored* (POSIX, Shell Command Language 2.11: asynchronous lists
without job control), and an ignored disposition survives ``fork`` and ``exec``: pytest and every
process it starts inherit it. Python installs its KeyboardInterrupt handler only when SIGINT is not
ignored at start, so such a child never sees Ctrl+C and a test expecting exit 130 fails. Wrappers
hide it: coreutils ``timeout`` resets the dispositions for its command, an interactive shell's
``trap '' INT`` does not apply to its jobs the same way — which is why it reproduced only sometimes.

Every test that sends a signal to a child passes ``preexec_fn=default_signals`` (or starts it with
:func:`popen`), so the child decides for itself, as it would under a terminal.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any

__all__ = ["SIGNALS", "default_signals", "popen"]

#: The dispositions a test's child must start with: the ones a test sends, and SIGQUIT (ignored with SIGINT).
SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)


def default_signals() -> None:
    """In the child, between fork and exec: every signal a test may send back to its default action."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def popen(args: list[str], **kwargs: Any) -> "subprocess.Popen[Any]":
    """``subprocess.Popen`` for a child that a test will signal (default dispositions, see the module)."""
    return subprocess.Popen(args, preexec_fn=default_signals, **kwargs)  # noqa: PLW1509 - nothing else runs between fork and exec
