"""The ``mmsctl`` command line (``cli/main.py`` is the root).

The console script imports this package first: until :func:`mmsctl.cli.main.run`
starts (importing typer and rich takes a while), a Ctrl+C ends the process quietly
with 130 instead of a KeyboardInterrupt traceback from the middle of an import.
"""

import os
import signal
import sys


def _interrupted(signum: int, frame: object) -> None:
    os._exit(130)


def restore_sigint() -> None:
    """Ctrl+C raises KeyboardInterrupt again (called by ``run`` once the CLI is imported)."""
    if signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)


if (sys.argv and os.path.basename(sys.argv[0]) == "mmsctl"
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    signal.signal(signal.SIGINT, _interrupted)
