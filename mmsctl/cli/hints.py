"""The CLI's words for core errors: which flag an argument is, and what to type to fix it.

The core never names a flag (the server and library callers have none): an error says
which argument of the call it is about (``MmsError.param``, e.g. ``synset``) or has a
type of its own (``AlreadyExistsError``). Each command says how its flags map:

    with CREATE_WORDS.applied():
        create_archive(folder, synset=synset, ...)   # "x: no such file" -> "x: no such file (--synset)"
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from mmsctl.errors import MmsError

__all__ = ["CommandWords"]


@dataclass(frozen=True)
class CommandWords:
    """How one command names the core's arguments and fixes.

    Attributes:
        flags: a core argument (``param``) -> the flag that sets it; named after the message.
        hints: an error type -> the hint to show instead of the core's (the first that matches).
    """

    flags: Mapping[str, str] = field(default_factory=dict)
    hints: tuple[tuple[type[MmsError], str], ...] = ()

    def reword(self, exc: MmsError) -> None:
        """Put this command's flags into *exc* (in place)."""
        flag = self.flags.get(exc.param or "")
        if flag and flag not in exc.message:
            exc.message = f"{exc.message} ({flag})"
        for kind, hint in self.hints:
            if isinstance(exc, kind):
                exc.hint = hint
                break

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Reword any MmsError raised inside the block, then let it go on to cli/main.py."""
        try:
            yield
        except MmsError as exc:
            self.reword(exc)
            raise
