"""The CLI's words for core errors: the flag an argument is, and what to type next.

The core packages never name a CLI flag or command (a library user has none). An error
says which arguments of the call it is about (``MmsError.param``/``params``, e.g. ``synset``)
or has a type of its own, and carries a ``reference``. The CLI adds its words in two ways:

* per command, :class:`CommandWords` maps arguments to that command's flags, and error
  types (or arguments) to hints::

      with CREATE_WORDS.applied():
          create_archive(folder, synset=synset, ...)   # "x: no such file" -> "x: no such file (--synset)"

  or, for a whole command, ``@WORDS.command`` under ``@app.command(...)``;

* everywhere, :func:`hint_for` (called by ``cli/main.py`` where errors become messages)
  finds the hint for an error's ``reference`` in :data:`HINTS`; a hint the core did set
  (about the data, not the CLI) wins.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, TypeVar, Union, cast

from mmsctl.errors import MmsError

__all__ = ["HINTS", "CommandWords", "hint_for"]

_F = TypeVar("_F", bound=Callable[..., Any])
_SERVER_DOWN = "is the server running? `mmsctl ping --all` checks every context"


def _version(exc: MmsError) -> str:
    model = getattr(exc, "model", None) or "MODEL"
    return f"`mmsctl models describe {model}` shows its default version; leave out --model-version to use it"


def _builtin_context(exc: MmsError) -> Optional[str]:
    if getattr(exc, "operation", "") == "remove":
        return "`mmsctl context use NAME` switches to another context"
    return None


def _ambiguous_local(exc: MmsError) -> str:
    names = getattr(exc, "names", None) or ["NAME"]
    picks = " or ".join(f"--context local:{n}" for n in names[:3])
    return f"say which: {picks} (`mmsctl context use local:{names[0]}` keeps it)"


def _sagemaker_context(exc: MmsError) -> str:
    endpoint, context = getattr(exc, "endpoint", "NAME"), getattr(exc, "context", "sagemaker:NAME")
    return (f"its state and load: `mmsctl sagemaker describe {endpoint}`; predictions: "
            f"`mmsctl predict MODEL IMAGE --context {context}`")


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
    "local-server-not-running": "`mmsctl serve status` lists the servers started here; "
    "`mmsctl context use local` switches back to the local one",
    "ambiguous-instance": _ambiguous_local,
    "builtin-context": _builtin_context,
    "tunnels-failed": "ssh needs the fleet's key (--key-name, --identity-dir), its login (--user) and port 22 open "
    "to you (`fleet create --ssh-cidr`); --via ssm needs no open port",
    "local-port-busy": "choose other local ports with --local-port",
    "cloud-no-region": "pass --region or set AWS_DEFAULT_REGION",
    "cloud-unsupported-region": "pass --region us-east-1 (or another of those), or pick --accelerator inf2|g4dn|g5|none",
    "cloud-ei-retired": "launch with --accelerator inf2|g4dn|g5|none instead",
    "sagemaker-context-no-api": _sagemaker_context,
    "sagemaker-endpoint-not-found": "`mmsctl sagemaker list` shows the endpoints mmsctl deployed",
    "sagemaker-not-an-ecr-image": "push one with: mmsctl lambda build MODEL --push --name NAME",
    "sagemaker-missing-image": "build and push it: mmsctl lambda build MODEL --push --name NAME",
}


def hint_for(exc: MmsError) -> Optional[str]:
    """The hint to print under *exc*: its own, else the CLI's for its reference, else None."""
    if exc.hint:
        return exc.hint
    hint = HINTS.get(exc.reference)
    return hint(exc) if callable(hint) else hint


@dataclass(frozen=True)
class CommandWords:
    """How one command names the core's arguments and fixes.

    Attributes:
        flags: a core argument (``param``) -> the flag that sets it; the flags of the arguments
            an error is about are named after its message: ``… (--warm, --provisioned)``.
        hints: an error type, an error ``reference`` (no import needed), or the name of an
            argument the error is about -> the hint to show instead of the core's (the first
            that matches); a hint is a text, or a function of the error.
    """

    flags: Mapping[str, str] = field(default_factory=dict)
    hints: tuple[tuple[Union[type[MmsError], str], Union[str, Callable[[MmsError], str]]], ...] = ()

    def reword(self, exc: MmsError) -> None:
        """Put this command's flags into *exc* (in place)."""
        flags = [flag for flag in dict.fromkeys(self.flags.get(p, "") for p in exc.params)
                 if flag and flag not in exc.message]
        if flags:
            exc.message = f"{exc.message} ({', '.join(flags)})"
        for key, hint in self.hints:
            if (key == exc.reference or key in exc.params) if isinstance(key, str) else isinstance(exc, key):
                exc.hint = hint(exc) if callable(hint) else hint
                break

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Reword any MmsError raised inside the block, then let it go on to cli/main.py."""
        try:
            yield
        except MmsError as exc:
            self.reword(exc)
            raise

    def command(self, function: _F) -> _F:
        """A command function whose errors get these words (put it under ``@app.command``)."""

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.applied():
                return function(*args, **kwargs)

        return cast(_F, wrapper)
