"""Hints that name mmsctl's own commands and flags, added where errors become messages.

The core packages raise typed errors and never name a CLI flag (a library user has no
``--timeout``); :func:`hint_for` says what to type next, keyed by the error's ``reference``
(so nothing is imported to look it up), and ``cli/main.py`` prints it under the error.
A hint the core did set (about the data, not the CLI) wins.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

from mmsctl.errors import MmsError

__all__ = ["HINTS", "hint_for"]

_SERVER_DOWN = "is the server running? `mmsctl ping --all` checks every context"


def _version(exc: MmsError) -> str:
    model = getattr(exc, "model", None) or "MODEL"
    return f"`mmsctl models describe {model}` shows its default version; leave out --version to use it"


def _builtin_context(exc: MmsError) -> Optional[str]:
    if getattr(exc, "operation", "") == "remove":
        return "`mmsctl context use NAME` switches to another context"
    return None


#: error reference -> hint (a text, or a function of the error).
HINTS: dict[str, Union[str, Callable[[MmsError], Optional[str]]]] = {
    "connection-refused": _SERVER_DOWN,
    "server-unreachable": _SERVER_DOWN,
    "authentication-failed": "check the context's token file (`mmsctl context list -o wide`); "
    "TorchServe writes its keys to key_file.json in the folder it was started from",
    "timeout": "raise the limit with --timeout",
    "workers-not-ready": "raise --timeout, or check the server's log for workers that fail to start",
    "remote-model-not-found": "list the models with `mmsctl models list`",
    "remote-version-not-found": _version,
    "remote-archive-not-found": "LOCATION is an http(s) URL or a file name in the server's model store",
    "no-metrics-url": "add one with `mmsctl context add NAME … --metrics URL` (MMS 1.1 has no metrics API)",
    "context-not-found": "add it with `mmsctl context add`",
    "builtin-context": _builtin_context,
}


def hint_for(exc: MmsError) -> Optional[str]:
    """The hint to print under *exc*: its own, else the CLI's for its reference, else None."""
    if exc.hint:
        return exc.hint
    hint = HINTS.get(exc.reference)
    return hint(exc) if callable(hint) else hint
