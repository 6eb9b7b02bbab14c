"""What an error body must never carry: a Python exception's class name, a traceback, an object's address.

A client is told what it did wrong in the server's words; an exception's own text names code, paths and data
the client has no business seeing (the server log has it). The fuzz tests and the hostile-input tests check
every error body they get against :data:`LEAK`.
"""

from __future__ import annotations

import builtins
import re

__all__ = ["LEAK"]

_BUILTIN = sorted(name for name, value in vars(builtins).items()
                  if isinstance(value, type) and issubclass(value, BaseException))
#: Python's own exception names, a ``SomethingError:`` of any library, a traceback, ``<… object at 0x…>``.
LEAK = re.compile(r"\b(?:" + "|".join(_BUILTIN) + r")\b|\b[A-Z]\w*Error:|Traceback \(most recent call last\)"
                  r"| object at 0x[0-9a-f]+")
